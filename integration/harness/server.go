package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/openapi/openapitest"
)

// Config describes one runtime server.
type Config struct {
	// Runtime holds the lines of the runtime block, e.g. "api_prefix /_".
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
	logs    *logBuffer
	exited  chan struct{}
	exitErr error
}

// Start starts a runtime with cfg and waits until it is ready; it stops when the test ends.
func Start(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	s, err := Launch(tb, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.WaitReady(30 * time.Second); err != nil {
		tb.Fatalf("%v\nlogs:\n%s", err, s.Logs())
	}
	return s
}

// Launch starts a runtime process without waiting for it to be ready.
func Launch(tb testing.TB, cfg Config) (*Server, error) {
	tb.Helper()
	dir := tb.TempDir()
	s := &Server{
		tb:      tb,
		Dir:     dir,
		DataDir: filepath.Join(dir, "data"),
		Port:    FreePort(tb),
		cfg:     cfg,
		logs:    &logBuffer{},
		exited:  make(chan struct{}),
		Client:  &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
	if cfg.HTTP2 {
		var protocols http.Protocols
		protocols.SetUnencryptedHTTP2(true)
		s.Client.Transport = &http.Transport{Protocols: &protocols}
	}
	s.URL = fmt.Sprintf("http://127.0.0.1:%d", s.Port)
	s.AdminURL = fmt.Sprintf("http://127.0.0.1:%d", FreePort(tb))
	caddyfile := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(caddyfile, []byte(s.Caddyfile(cfg)), 0o600); err != nil {
		return nil, err
	}
	s.cmd = exec.Command(Binary(tb), "run", "--config", caddyfile, "--adapter", "caddyfile")
	s.cmd.Dir = dir
	s.cmd.Env = Environ(dir, cfg.Env)
	s.cmd.Stdout = s.logs
	s.cmd.Stderr = s.logs
	// Own process group, so Stop reaches worker processes too; killed if the test process dies.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
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
			tb.Logf("runtime logs (last %d lines):\n%s", failureLogLines, s.tail(failureLogLines))
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
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// Caddyfile renders the Caddyfile of this server for cfg.
func (s *Server) Caddyfile(cfg Config) string {
	global := cfg.Global
	if cfg.HTTP2 {
		global += "\n\tservers {\n\t\tprotocols h1 h2c\n\t}"
	}
	return fmt.Sprintf(`{
	admin %s
	auto_https off
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

:%d {
	runtime {
%s
	}
%s
}
`, strings.TrimPrefix(s.AdminURL, "http://"), filepath.Join(s.Dir, "caddy"), global, s.Port, cfg.Runtime, cfg.Site)
}

// WaitReady waits for the discovery document and the readiness probe, then loads and validates
// the OpenAPI document.
func (s *Server) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("the runtime exited before it was ready: %v", s.exitErr)
		default:
		}
		if err := s.probeReady(); err == nil {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("the runtime was not ready within %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
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

func (s *Server) probeReady() error {
	resp, err := s.Client.Get(s.URL + "/.well-known/runtime")
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
	resp, err = s.Client.Get(s.URL + s.API + "/health/ready")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("ready: %d", resp.StatusCode)
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
	return nil
}

// adminClient talks to Caddy's admin endpoint, which speaks HTTP/1.1 only.
var adminClient = &http.Client{Timeout: time.Minute}

// Signal sends sig to the runtime process.
func (s *Server) Signal(sig syscall.Signal) error { return s.cmd.Process.Signal(sig) }

// Exited is closed when the process has exited.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// Stop stops the runtime gracefully, and kills its process group if it does not exit in time.
func (s *Server) Stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
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

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
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

type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
