package harness

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/openapi/openapitest"
)

// Config describes one runtime server.
type Config struct {
	// Name names the server in messages, e.g. "A" among the instances of a cluster.
	Name string
	// App holds the lines of the global runtime option, the process-wide settings, e.g.
	// "pool_size 4".
	App string
	// Runtime holds the lines of the runtime directive of each site block, e.g.
	// "api_prefix /_"; process-wide settings there are the deprecated form.
	Runtime string
	// Site holds further directives of the site block.
	Site string
	// Global holds further global options.
	Global string
	// Env sets environment variables of the process (RUNTIME_* and others). The test
	// process's own RUNTIME_* variables never leak in.
	Env map[string]string
	// HTTP2 serves cleartext HTTP/2 (h2c) besides HTTP/1.1 and makes the server's Client
	// speak it. Over HTTP/2 a config reload loses no request: the old server's GOAWAY tells
	// clients which requests to retry, where HTTP/1.1 gives no such signal.
	HTTP2 bool
	// Port is the port to serve on; 0 picks a free one. Set it when the config must name it,
	// e.g. in workers_url.
	Port int
	// Hosts, when set, replaces the one site block answering every host name with one block
	// per host name, all on the same port: http://<name>:<port>. The first must serve the
	// API, since the Server's URL names it; Host gives a view of the others. Every name
	// reaches the server on 127.0.0.1, whatever it resolves to.
	Hosts []Host
	// TLS serves the blocks of Hosts over HTTPS (https://<name>:<port>) with certificates of
	// Caddy's internal issuer, whose root the Server's Client trusts.
	TLS bool
	// File, when set, is the config file's text, used as written instead of one rendered from
	// the fields above, e.g. Caddyfile.example with its port rewritten. Port must then be the
	// port it serves, and with Hosts the first must name the API's site.
	File string
	// Dir, when set, is the working directory (prepared by the test); else a new temporary one.
	Dir string
	// Sites, when set, renders the site blocks for the port instead of Runtime, Site and
	// Hosts, e.g. to mount the runtime below a path. App still applies.
	Sites func(port int) string
	// Mount is the path the runtime is mounted at when Sites or File mount it below one
	// (e.g. "/hp"): the harness finds the discovery document there.
	Mount string
	// ExtraFiles are open files the process inherits as descriptors 3, 4 and on, as a
	// service manager's sockets or a shell's redirections would be.
	ExtraFiles []*os.File
	// Wrap, when set, returns the command line that starts the binary with args instead, e.g.
	// through capsh with a capability dropped. Its program must exec the binary (same pid), so
	// signals and PID reach the runtime.
	Wrap func(binary string, args []string) []string
}

// Host is one site block of a Config with Hosts.
type Host struct {
	Name string // e.g. "localhost" or "apps.localhost"
	// Runtime holds runtime lines of this block only, after Config.Runtime, e.g. "serve workers".
	Runtime string
}

// Server is a running runtime process.
type Server struct {
	tb testing.TB
	// URL is the base URL, e.g. http://127.0.0.1:41234.
	URL       string
	Port      int
	AdminURL  string
	Dir       string // working directory of the process
	DataDir   string // Dir/data, where the default settings put workers, plugins and state
	API       string // the API path, read from the discovery document
	Version   string // the version from the discovery document
	Validator *openapitest.Validator
	Client    *http.Client

	cfg     Config
	cmd     *exec.Cmd
	logs    *Buffer
	exited  chan struct{}
	exitErr error
}

// Start starts a runtime with cfg and waits until it is ready; it stops when the test ends.
func Start(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	for attempt := 1; ; attempt++ {
		s, err := Launch(tb, cfg)
		if err != nil {
			tb.Fatal(err)
		}
		err = s.WaitReady(30 * time.Second)
		if err == nil {
			return s
		}
		// A port FreePort gave can be taken before the runtime binds it (an outgoing
		// connection's local port comes from the same range): the ports the harness chose move.
		if attempt < 3 && cfg.Port == 0 && cfg.File == "" && s.WaitExit(time.Second) && strings.Contains(s.Logs(), "address already in use") {
			tb.Logf("the runtime's port was taken before it started; starting it again on others:\n%s", s.tail(5))
			continue
		}
		tb.Fatalf("%v\nlogs:\n%s", err, s.Logs())
	}
}

// Launch starts a runtime process without waiting for it to be ready.
func Launch(tb testing.TB, cfg Config) (*Server, error) {
	tb.Helper()
	dir := cfg.Dir
	if dir == "" {
		dir = tb.TempDir()
	}
	s := &Server{
		tb:      tb,
		Dir:     dir,
		DataDir: filepath.Join(dir, "data"),
		Port:    cmp.Or(cfg.Port, FreePort(tb)),
		cfg:     cfg,
		logs:    &Buffer{},
		exited:  make(chan struct{}),
		Client:  &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
	if cfg.HTTP2 || len(cfg.Hosts) > 0 {
		transport := &http.Transport{}
		if cfg.TLS {
			transport.TLSClientConfig = s.trustLocalCA()
		}
		if cfg.HTTP2 {
			transport.Protocols = new(http.Protocols)
			transport.Protocols.SetUnencryptedHTTP2(true)
		}
		if len(cfg.Hosts) > 0 {
			addr := fmt.Sprintf("127.0.0.1:%d", s.Port)
			transport.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}
		}
		s.Client.Transport = transport
	}
	s.URL = fmt.Sprintf("http://127.0.0.1:%d", s.Port)
	if len(cfg.Hosts) > 0 {
		s.URL = fmt.Sprintf("%s://%s:%d", cfg.scheme(), cfg.Hosts[0].Name, s.Port)
	}
	s.AdminURL = fmt.Sprintf("http://127.0.0.1:%d", FreePort(tb))
	caddyfile := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(caddyfile, []byte(s.Caddyfile(cfg)), 0o600); err != nil {
		return nil, err
	}
	argv := []string{Binary(tb), "run", "--config", caddyfile, "--adapter", "caddyfile"}
	if cfg.Wrap != nil {
		argv = cfg.Wrap(argv[0], argv[1:])
	}
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Dir = dir
	s.cmd.Env = Environ(dir, cfg.Env)
	s.cmd.Stdout = s.logs
	s.cmd.Stderr = s.logs
	s.cmd.ExtraFiles = cfg.ExtraFiles
	// Own process group, so Stop reaches worker processes too; killed if the test process dies.
	ownGroup(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the runtime: %v", err)
	}
	go func() {
		s.exitErr = s.cmd.Wait()
		close(s.exited)
	}()
	tb.Cleanup(func() {
		s.Stop()
		if tb.Failed() {
			tb.Logf("runtime %s logs (last %d lines):\n%s", s.Name(), failureLogLines, s.tail(failureLogLines))
		}
	})
	return s, nil
}

// Environ returns a minimal environment for a runtime process rooted at dir, plus extra.
func Environ(dir string, extra map[string]string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"XDG_CONFIG_HOME=" + filepath.Join(dir, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(dir, ".local", "share"),
		// Replaced folders go soon, so tests waiting for them do not wait the default 2 s;
		// a test's own value (extra) comes later and wins.
		"RUNTIME_RETIRE_DELAY=100ms",
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// Caddyfile renders the Caddyfile of this server for cfg.
func (s *Server) Caddyfile(cfg Config) string {
	if cfg.File != "" {
		return cfg.File
	}
	global := cfg.Global
	if cfg.App != "" {
		global += fmt.Sprintf("\n\truntime {\n%s\n\t}", cfg.App)
	}
	autoHTTPS := "off"
	if cfg.TLS {
		// Certificates from the internal issuer, without a redirect server on port 80 or a try
		// to install the issuer's root in the system's trust store.
		autoHTTPS = "disable_redirects\n\tskip_install_trust"
	}
	if cfg.HTTP2 {
		global += "\n\tservers {\n\t\tprotocols h1 h2c\n\t}"
	}
	sites := fmt.Sprintf(":%d {\n\truntime {\n%s\n\t}\n%s\n}\n", s.Port, cfg.Runtime, cfg.Site)
	if cfg.Sites != nil {
		sites = cfg.Sites(s.Port)
	} else if len(cfg.Hosts) > 0 {
		sites = ""
		site := cfg.Site
		if cfg.TLS {
			site = "\ttls internal\n" + site
		}
		for _, h := range cfg.Hosts {
			sites += fmt.Sprintf("%s://%s:%d {\n\truntime {\n%s\n%s\n\t}\n%s\n}\n", cfg.scheme(), h.Name, s.Port, cfg.Runtime, h.Runtime, site)
		}
	}
	return fmt.Sprintf(`{
	admin %s
	auto_https %s
	persist_config off
	default_bind 127.0.0.1
	storage file_system %s
	log {
		output stderr
		format json
		level INFO
	}
%s
}

%s`, strings.TrimPrefix(s.AdminURL, "http://"), autoHTTPS, filepath.Join(s.Dir, "caddy"), global, sites)
}

// scheme is the scheme of the site blocks of Hosts.
func (cfg Config) scheme() string {
	if cfg.TLS {
		return "https"
	}
	return "http"
}

// trustLocalCA is the client side of Config.TLS: the server's certificate must chain to the
// root of Caddy's internal issuer, which Caddy creates in its storage as it starts, so the
// root is read when a connection is verified.
func (s *Server) trustLocalCA() *tls.Config {
	return &tls.Config{
		InsecureSkipVerify: true, // verified by VerifyConnection below, against the internal root
		VerifyConnection: func(cs tls.ConnectionState) error {
			root, err := os.ReadFile(filepath.Join(s.Dir, "caddy", "pki", "authorities", "local", "root.crt"))
			if err != nil {
				return err
			}
			roots := x509.NewCertPool()
			if !roots.AppendCertsFromPEM(root) {
				return fmt.Errorf("no certificate in Caddy's internal root")
			}
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("the server sent no certificate")
			}
			intermediates := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				intermediates.AddCert(c)
			}
			_, err = cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: cs.ServerName, Roots: roots, Intermediates: intermediates})
			return err
		},
	}
}

// Host returns a view of the server that sends its requests to the site block of another
// of its Hosts. Its answers are not checked against the API's document, since that site
// need not serve the API.
func (s *Server) Host(name string) *Server {
	view := *s
	view.URL = fmt.Sprintf("%s://%s:%d", s.cfg.scheme(), name, s.Port)
	view.Validator = nil
	return &view
}

// WaitReady waits for the discovery document and the readiness probe, then loads and validates
// the OpenAPI document.
func (s *Server) WaitReady(timeout time.Duration) error { return s.wait(timeout, "ready") }

// WaitLive waits for the discovery document and the liveness probe, then loads and validates
// the OpenAPI document: the server answers, ready or not.
func (s *Server) WaitLive(timeout time.Duration) error { return s.wait(timeout, "live") }

// wait waits for the discovery document and the probe health/<probe>, then loads and
// validates the OpenAPI document.
func (s *Server) wait(timeout time.Duration, probe string) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("the runtime exited before it was %s: %v", probe, s.exitErr)
		default:
		}
		err := s.probe(s.cfg.Mount, "/health/"+probe)
		if err == nil {
			return s.loadDocument()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the runtime was not %s within %s: %v", probe, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// At returns a view of the server that finds the runtime mounted at mount (e.g. "/x"; "" for
// the root) of the same site: its API path comes from the discovery document there, and its
// answers are checked against the OpenAPI document served there.
func (s *Server) At(mount string) *Server {
	s.tb.Helper()
	view := *s
	if err := view.probeReady(mount); err != nil {
		s.tb.Fatalf("the runtime at %q: %v", mount, err)
	}
	if err := view.loadDocument(); err != nil {
		s.tb.Fatalf("the runtime at %q: %v", mount, err)
	}
	return &view
}

// loadDocument loads and validates the OpenAPI document of the API at s.API.
func (s *Server) loadDocument() error {
	resp, err := s.Client.Get(s.URL + s.API + "/openapi.json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	doc, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	s.Validator, err = openapitest.New(doc, s.API)
	return err
}

func (s *Server) probeReady(mount string) error { return s.probe(mount, "/health/ready") }

// probe reads the discovery document at mount, then asks the probe (relative to the API) for
// a 200.
func (s *Server) probe(mount, probe string) error {
	resp, err := s.Client.Get(s.URL + mount + "/.well-known/runtime")
	if err != nil {
		return err
	}
	var disc struct{ API, Version string }
	err = json.NewDecoder(resp.Body).Decode(&disc)
	resp.Body.Close()
	if err != nil || disc.API == "" {
		return fmt.Errorf("discovery: %d %v", resp.StatusCode, err)
	}
	s.API, s.Version = disc.API, disc.Version
	resp, err = s.Client.Get(s.URL + s.API + probe)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d", strings.TrimPrefix(probe, "/health/"), resp.StatusCode)
	}
	return nil
}

// Reload replaces the running config through Caddy's admin API, forcing a reload even when
// the config is unchanged.
func (s *Server) Reload(cfg Config) error {
	req, err := http.NewRequest("POST", s.AdminURL+"/load", strings.NewReader(s.Caddyfile(cfg)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/caddyfile")
	req.Header.Set("Cache-Control", "must-revalidate")
	resp, err := adminClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("reload: %d %s", resp.StatusCode, body)
	}
	// The old config's server closes its idle connections: a request the client sent on one
	// would fail, and one that is not idempotent would not be retried.
	s.Client.CloseIdleConnections()
	return s.waitOldListener()
}

// waitOldListener waits until the old config's listener on the server's port is closed. Caddy
// binds each config's listener with SO_REUSEPORT and answers the load before the old server has
// surely closed its own: a connection the kernel gives the old socket in that time is reset,
// or read by a server already shutting down, which closes it unanswered (EOF).
func (s *Server) waitOldListener() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := listeners(s.Port)
		switch {
		case errors.Is(err, errors.ErrUnsupported):
			return nil // counted on Linux only; elsewhere a request may meet the race
		case err != nil:
			return fmt.Errorf("reload: counting the listeners on port %d: %w", s.Port, err)
		case n <= 1:
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("reload: %d sockets still listen on port %d after 10 s; the old config's server did not close its own", n, s.Port)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// adminClient talks to Caddy's admin endpoint, which speaks HTTP/1.1 only.
var adminClient = &http.Client{Timeout: time.Minute}

// Signal sends sig to the runtime process.
func (s *Server) Signal(sig syscall.Signal) error { return s.cmd.Process.Signal(sig) }

// Exited is closed when the process has exited.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// WaitExit waits up to timeout for the process to exit and reports whether it did.
func (s *Server) WaitExit(timeout time.Duration) bool {
	select {
	case <-s.exited:
		return true
	case <-time.After(timeout):
		return false
	}
}

// PID is the runtime's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Stop stops the runtime gracefully, and kills its process group if it does not exit in time.
func (s *Server) Stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	// The test's own idle keep-alive connections would hold Caddy's graceful shutdown, which
	// has no time limit, open (an idle h2c connection does under load): a client that is done
	// hangs up.
	s.Client.CloseIdleConnections()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		killGroup(s.cmd)
		<-s.exited
	}
}

// failureLogLines is how much of the log a failed test shows.
const failureLogLines = 60

func (s *Server) tail(n int) string {
	lines := strings.Split(strings.TrimRight(s.Logs(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Logs returns everything the process wrote so far.
func (s *Server) Logs() string { return s.logs.String() }

// LogEntries returns the JSON log entries whose message is msg.
func (s *Server) LogEntries(msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(s.Logs(), "\n") {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) == nil && entry["msg"] == msg {
			out = append(out, entry)
		}
	}
	return out
}

// LogCount waits up to two seconds for at least atLeast entries with message msg (the log
// arrives through a pipe, a moment after the response it belongs to) and returns how many
// there are.
func (s *Server) LogCount(msg string, atLeast int) int {
	deadline := time.Now().Add(2 * time.Second)
	for {
		n := len(s.LogEntries(msg))
		if n >= atLeast || time.Now().After(deadline) {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitLog waits until an entry with message msg is logged and returns it.
func (s *Server) WaitLog(msg string, timeout time.Duration) (map[string]any, error) {
	deadline := time.Now().Add(timeout)
	for {
		if entries := s.LogEntries(msg); len(entries) > 0 {
			return entries[0], nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no log entry %q within %s", msg, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RunCommand runs the runtime binary with args in dir (with a minimal environment plus env)
// and returns its combined output and error.
func RunCommand(tb testing.TB, dir string, env map[string]string, args ...string) (string, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(tb), args...)
	cmd.Dir = dir
	cmd.Env = Environ(dir, env)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
