package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// workerEnv returns the environment variable name of the worker at base, and whether it is set.
func workerEnv(t *testing.T, s *harness.Server, base, name string) (string, bool) {
	t.Helper()
	for _, kv := range echoOf(t, s.Get(base)).Env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// extraListener has the test worker at base open a TCP listener on its loopback, beside the
// one it serves on, and returns its address.
func extraListener(t *testing.T, s *harness.Server, base string) string {
	t.Helper()
	resp := workerTries(t, s, base, "/listen", nil)
	if resp.Status != 200 {
		t.Fatalf("%s/listen = %s", base, resp)
	}
	return string(resp.Body)
}

// hostAddress returns an address of this machine that is not a loopback one, or "".
func hostAddress() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// switchProtocols asks the test worker at target to switch to its echo protocol, checks that
// the switched connection echoes a line back, and returns the 101 answer.
func switchProtocols(t *testing.T, target string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", target, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	up, err := new(http.Client).Do(req) // with no timeout, so the switched body is writable
	if err != nil {
		t.Fatal(err)
	}
	if up.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade = %d", up.StatusCode)
	}
	conn := up.Body.(io.ReadWriteCloser)
	defer conn.Close()
	fmt.Fprint(conn, "ping\n")
	if line, _ := bufio.NewReader(conn).ReadString('\n'); line != "ping\n" {
		t.Errorf("the switched connection echoed %q", line)
	}
	return up
}

// TestWorkerNetworkHost: with worker_network host (the default) workers share the host's
// loopback, so one worker reaches another's port past the runtime and its hooks, as the README
// says; the start-up log says so too.
func TestWorkerNetworkHost(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	if entry, _ := s.WaitLog("process worker sandbox", 5*time.Second); entry == nil ||
		!strings.Contains(fmt.Sprint(entry["layers"]), "network: host (workers share the host's loopback)") {
		t.Errorf("start-up log does not name the host network: %v", entry)
	}
	processWorker(t, s, "a", "1.0.0", "")
	processWorker(t, s, "b", "1.0.0", "")
	port, ok := workerEnv(t, s, "/b/", "PORT")
	if !ok {
		t.Fatal("worker b has no PORT")
	}
	for _, addr := range []string{"127.0.0.1:" + port, extraListener(t, s, "/b")} {
		if resp := workerTries(t, s, "/a", "/dial", url.Values{"network": {"tcp"}, "addr": {addr}}); resp.Status != 200 {
			t.Errorf("worker a could not reach worker b at %s: %s", addr, resp)
		}
	}
}

// TestWorkerNetworkIsolated: with worker_network isolated a worker has a network of its own:
// it reaches its own loopback and nothing else (not another worker, not the runtime's port,
// not Caddy's admin endpoint, no other address), and serves on the listener it is handed as
// descriptor 3. A worker that listens elsewhere fails to start with a clear answer.
func TestWorkerNetworkIsolated(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("worker_network isolated needs root")
	}
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: "worker_network isolated"})
	if entry, _ := s.WaitLog("process worker sandbox", 5*time.Second); entry == nil ||
		!strings.Contains(fmt.Sprint(entry["layers"]), "network: isolated (own network namespace, listener passed as fd 3)") {
		t.Errorf("start-up log does not name the isolated network: %v", entry)
	}
	processWorker(t, s, "a", "1.0.0", "")
	processWorker(t, s, "b", "1.0.0", "")

	e := echoOf(t, s.Get("/a/"))
	env := strings.Join(e.Env, "\n") + "\n"
	if !strings.Contains(env, "LISTEN_FDS=1\n") || !strings.Contains(env, fmt.Sprintf("LISTEN_PID=%d\n", e.PID)) {
		t.Errorf("worker a was not handed its listener (LISTEN_FDS=1, LISTEN_PID=%d):\n%s", e.PID, env)
	}
	if strings.Contains(env, "\nPORT=") || strings.Contains(env, "\nHOST=") {
		t.Errorf("worker a got a PORT or HOST in an isolated network:\n%s", env)
	}
	// Its own loopback is up.
	own := extraListener(t, s, "/a")
	if resp := workerTries(t, s, "/a", "/dial", url.Values{"network": {"tcp"}, "addr": {own}}); resp.Status != 200 ||
		!strings.Contains(body(resp), fmt.Sprintf("hello from %d", e.PID)) {
		t.Errorf("worker a could not reach its own loopback listener %s: %s", own, resp)
	}

	admin, _ := url.Parse(s.AdminURL)
	targets := map[string]string{
		"worker b's loopback listener":           extraListener(t, s, "/b"),
		"the runtime's port on the loopback":     fmt.Sprintf("127.0.0.1:%d", s.Port),
		"Caddy's admin endpoint on the loopback": admin.Host,
		"an outside address":                     "192.0.2.1:80",
	}
	if host := hostAddress(); host != "" {
		targets["the runtime's port on "+host] = net.JoinHostPort(host, fmt.Sprint(s.Port))
	}
	for what, addr := range targets {
		if resp := workerTries(t, s, "/a", "/dial", url.Values{"network": {"tcp"}, "addr": {addr}}); resp.Status == 200 {
			t.Errorf("worker a reached %s (%s): %s", what, addr, resp)
		}
	}
	// The start is logged as the pool's own step, which may come after b's first answer.
	var socket string
	harness.Eventually(t, "worker b's socket path in the log", 5*time.Second, func() bool {
		for _, entry := range s.LogEntries("worker started") {
			if entry["worker"] == "b" {
				socket, _ = entry["addr"].(string)
			}
		}
		return strings.HasPrefix(socket, "/")
	})
	if resp := workerTries(t, s, "/a", "/dial", url.Values{"network": {"unix"}, "addr": {socket}}); resp.Status == 200 {
		t.Errorf("worker a reached worker b's socket %s: %s", socket, resp)
	}
	// Protocol switches go through the socket too.
	switchProtocols(t, s.URL+"/a/upgrade")

	processWorker(t, s, "deaf", "1.0.0", "startTimeout: 2s\nenv:\n  IGNORE_LISTEN_FDS: '1'\n")
	resp := s.Get("/deaf/")
	if resp.Status != 503 || resp.ErrorCode() != "WORKER_UNAVAILABLE" || !strings.Contains(body(resp), "descriptor 3") {
		t.Fatalf("a worker that ignores its listener = %s, want 503 WORKER_UNAVAILABLE naming descriptor 3", resp)
	}
}

// TestWorkerListenSocket: with listen: socket a worker of the host's network is handed its
// listener as descriptor 3 (LISTEN_FDS=1, LISTEN_PID its own pid, no PORT) and serves there;
// one that starts listening late answers too, as does a late one on its port. A worker that
// ignores LISTEN_FDS, one that never listens and one that exits first answer 503
// WORKER_UNAVAILABLE saying why, as does one that never listens on its port; a worker without
// listen keeps its PORT, and a bad value refuses the upload.
func TestWorkerListenSocket(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	processWorker(t, s, "sock", "1.0.0", "listen: socket\nenv:\n  LISTEN_PID: '1'\n")
	e := echoOf(t, s.Get("/sock/"))
	env := strings.Join(e.Env, "\n") + "\n"
	if !strings.Contains(env, "LISTEN_FDS=1\n") || !strings.Contains(env, fmt.Sprintf("LISTEN_PID=%d\n", e.PID)) ||
		strings.Contains(env, "\nPORT=") || strings.Contains(env, "\nHOST=") {
		t.Errorf("a worker with listen: socket has the environment:\n%s", env)
	}
	switchProtocols(t, s.URL+"/sock/upgrade")

	processWorker(t, s, "plain", "1.0.0", "")
	if _, ok := workerEnv(t, s, "/plain/", "PORT"); !ok {
		t.Error("a worker without listen has no PORT")
	}
	processWorker(t, s, "late", "1.0.0", "listen: socket\nenv:\n  START_DELAY: 700ms\n")
	processWorker(t, s, "lateport", "1.0.0", "env:\n  START_DELAY: 700ms\n")
	for _, base := range []string{"/late/", "/lateport/"} {
		echoOf(t, s.Get(base))
	}

	tests := []struct{ name, extra, says string }{
		{"deaf", "listen: socket\nstartTimeout: 2s\nenv:\n  IGNORE_LISTEN_FDS: '1'\n", "did not accept connections on its listener within startTimeout 2s"},
		{"never", "listen: socket\nstartTimeout: 2s\nenv:\n  TESTWORKER_MODE: sleeper\n", "did not accept connections on its listener within startTimeout 2s"},
		{"quitter", "listen: socket\nenv:\n  EXIT_AT_START: '1'\n", "exited before accepting a connection on its listener, descriptor 3"},
		{"neverport", "startTimeout: 2s\nenv:\n  TESTWORKER_MODE: sleeper\n", "did not listen on PORT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			processWorker(t, s, tt.name, "1.0.0", tt.extra)
			resp := s.Get("/" + tt.name + "/")
			if resp.Status != 503 || resp.ErrorCode() != "WORKER_UNAVAILABLE" || !strings.Contains(body(resp), tt.says) {
				t.Errorf("GET /%s/ = %s, want 503 WORKER_UNAVAILABLE saying %q", tt.name, resp, tt.says)
			}
		})
	}

	resp := s.Upload(s.API+"/workers/upload", "a.tgz", harness.TarGz(t, pkg("name: bad\nversion: 1.0.0\nentrypoint: server\nlisten: fd3\n",
		harness.File{Name: "server", Body: "#!/bin/sh\n", Mode: 0o755})...), harness.WithKey(rootKey))
	refused(t, "an upload with listen: fd3", resp, 400, "INVALID_MANIFEST", `listen "fd3"`)
}
