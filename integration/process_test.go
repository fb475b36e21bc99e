package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

type echoBody struct {
	PID     int               `json:"pid"`
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Query   string            `json:"query"`
	Headers map[string]string `json:"headers"`
	Env     []string          `json:"env"`
	Body    int               `json:"body"`
	Dir     string            `json:"dir"`
}

// processWorker installs the test worker as worker name@version with extra manifest lines;
// the binary is copied in as an executable entrypoint.
func processWorker(t *testing.T, s *harness.Server, name, version, extra string) string {
	t.Helper()
	dir := filepath.Join(s.DataDir, "apps", filepath.FromSlash(name), version)
	writeFiles(t, dir, map[string]string{"manifest.yaml": fmt.Sprintf("name: '%s'\nversion: %s\nentrypoint: server\n%s", name, version, extra)})
	bin, err := os.ReadFile(harness.TestWorker(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func echoOf(t *testing.T, resp *harness.Response) echoBody {
	t.Helper()
	var e echoBody
	if resp.Status != 200 || resp.JSON(&e) != nil {
		t.Fatalf("worker answer = %s", resp)
	}
	return e
}

// TestProcessWorkerProxying checks the request a worker receives and its environment.
func TestProcessWorkerProxying(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{
		"RUNTIME_ROOT_KEY": rootKey, "AWS_SECRET_ACCESS_KEY": "leak-me-not", "RUNTIME_STATE_DIR": "./data/state",
	}})
	dir := processWorker(t, s, "@team/echo", "1.0.0", "env:\n  MODE: test\n")
	key := s.CreateKey(rootKey, map[string]any{"name": "user"})

	if resp := s.Get("/@team/echo?x=1"); resp.Status != 308 || resp.Header.Get("Location") != "/@team/echo/?x=1" {
		t.Fatalf("308 = %d %q", resp.Status, resp.Header.Get("Location"))
	}
	resp := s.Do("POST", "/@team/echo/api/items?a=1&b=two",
		harness.WithHeader("X-Request-Id", "trace-77"), harness.WithKey(key.Secret),
		harness.WithHeader("Cookie", "theme=dark; runtime_api_key="+key.Secret+"; __Host-runtime_api_key="+key.Secret+"; lang=en"),
		harness.WithBody("application/json", []byte(`{"hello":"world"}`)))
	e := echoOf(t, resp)
	if e.Method != "POST" || e.Path != "/api/items" || e.Query != "a=1&b=two" || e.Body != 17 {
		t.Errorf("the worker got %s %s?%s with %d bytes", e.Method, e.Path, e.Query, e.Body)
	}
	for k, want := range map[string]string{
		"X-Base": "/@team/echo", "X-Forwarded-Prefix": "/@team/echo", "X-Request-Id": "trace-77",
		"X-Forwarded-Proto": "http", "X-Forwarded-Host": strings.TrimPrefix(s.URL, "http://"),
		"X-Forwarded-For": "127.0.0.1", "Cookie": "theme=dark; lang=en",
	} {
		if e.Headers[k] != want {
			t.Errorf("header %s = %q, want %q", k, e.Headers[k], want)
		}
	}
	if _, ok := e.Headers["X-Api-Key"]; ok {
		t.Error("the worker received X-API-Key")
	}
	if got := resp.Header.Values("X-Request-Id"); len(got) != 1 || got[0] != "trace-77" {
		t.Errorf("response X-Request-Id = %v, want just trace-77", got)
	}
	// A runtime key as Bearer is removed; the worker's own Authorization passes.
	e = echoOf(t, s.Get("/@team/echo/", harness.WithBearer(key.Secret)))
	if _, ok := e.Headers["Authorization"]; ok {
		t.Error("the worker received a runtime key in Authorization")
	}
	e = echoOf(t, s.Get("/@team/echo/", harness.WithBearer(rootKey)))
	if _, ok := e.Headers["Authorization"]; ok {
		t.Error("the worker received the root key in Authorization")
	}
	e = echoOf(t, s.Get("/@team/echo/", harness.WithHeader("Authorization", "Bearer app-token-123")))
	if e.Headers["Authorization"] != "Bearer app-token-123" {
		t.Errorf("the worker's own token was removed: %v", e.Headers)
	}
	env := strings.Join(e.Env, "\n")
	if e.Dir != dir || !strings.Contains(env, "MODE=test") || !strings.Contains(env, "HOST=127.0.0.1") || !strings.Contains(env, "PORT=") {
		t.Errorf("worker in %s with env:\n%s", e.Dir, env)
	}
	for _, secret := range []string{rootKey, "leak-me-not", "RUNTIME_", key.Secret} {
		if strings.Contains(env, secret) {
			t.Errorf("the worker's environment holds %q:\n%s", secret, env)
		}
	}
	if n := s.LogCount("worker started", 1); n != 1 {
		t.Errorf("worker start logged %d times, want once", n)
	}
}

// TestProcessWorkerStartsOnce sends 100 concurrent first requests.
func TestProcessWorkerStartsOnce(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	processWorker(t, s, "busy", "1.0.0", "")
	var wg sync.WaitGroup
	pids := make(chan int, 100)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := s.Send("GET", "/busy/")
			if err != nil || resp.Status != 200 {
				t.Errorf("request: %v %v", err, resp)
				return
			}
			var e echoBody
			json.Unmarshal(resp.Body, &e)
			pids <- e.PID
		}()
	}
	wg.Wait()
	close(pids)
	seen := map[int]bool{}
	for pid := range pids {
		seen[pid] = true
	}
	if n := s.LogCount("worker started", 1); len(seen) != 1 || n != 1 {
		t.Fatalf("%d processes (%d starts logged) for 100 concurrent first requests", len(seen), n)
	}
}

// TestProcessWorkerLifecycle covers crash and restart, disable and replace.
func TestProcessWorkerLifecycle(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	processWorker(t, s, "app", "1.0.0", "")
	processWorker(t, s, "app", "0.9.0", "")
	first := echoOf(t, s.Get("/app/")).PID

	// A crash answers with the envelope, then the worker comes back.
	s.Get("/app/crash")
	harness.Eventually(t, "the crashed process to go", 15*time.Second, func() bool { return !harness.Alive(first) })
	var next int
	harness.Eventually(t, "a restarted process", 15*time.Second, func() bool {
		resp, err := s.Send("GET", "/app/")
		if err != nil {
			return false
		}
		if resp.Status != 200 {
			if resp.Status != 503 && resp.Status != 502 || resp.ErrorCode() != "WORKER_UNAVAILABLE" {
				t.Fatalf("while restarting: %s", resp)
			}
			return false
		}
		next = echoOf(t, resp).PID
		return true
	})
	if next == first {
		t.Fatal("the crashed process answered")
	}
	if s.LogCount("worker crashed; it restarts on a later request", 1) != 1 || s.LogCount("crashing as asked", 1) != 1 {
		t.Error("the crash and the worker's stderr were not logged")
	}

	// Disabling the version drains and stops its process; the older version takes over.
	s.Do("POST", s.API+"/workers/_/app/1.0.0/disable", harness.WithKey(rootKey))
	harness.Eventually(t, "the disabled version's process to stop", 15*time.Second, func() bool { return !harness.Alive(next) })
	older := echoOf(t, s.Get("/app/")).PID
	// Replacing the running version stops its process too.
	uploadOK(t, s, "workers", "app.tgz", testWorkerArchive(t, "app", "0.9.0", ""), rootKey)
	harness.Eventually(t, "the replaced version's process to stop", 15*time.Second, func() bool { return !harness.Alive(older) })
	if pid := echoOf(t, s.Get("/app/")).PID; pid == older {
		t.Fatal("the replaced version kept its process")
	}
	// Deleting the worker stops its processes.
	last := echoOf(t, s.Get("/app/")).PID
	s.Do("DELETE", s.API+"/workers/_/app", harness.WithKey(rootKey))
	harness.Eventually(t, "the deleted worker's process to stop", 15*time.Second, func() bool { return !harness.Alive(last) })
}

// TestProcessWorkerLimits checks maxBodySize, timeout, idle stop and the pool cap.
func TestProcessWorkerLimits(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_POOL_SIZE": "2"}})
	processWorker(t, s, "small", "1.0.0", "maxBodySize: 1KiB\ntimeout: 1s\nttl: 2s\n")
	big := make([]byte, 4096)
	resp := s.Do("POST", "/small/", harness.WithBody("application/octet-stream", big))
	if resp.Status != 413 || resp.ErrorCode() != "PAYLOAD_TOO_LARGE" || !strings.Contains(string(resp.Body), "maxBodySize") {
		t.Fatalf("big body = %s", resp)
	}
	// Without a Content-Length the limit still holds.
	resp = s.Do("POST", "/small/", harness.WithBody("application/octet-stream", big), func(r *http.Request) error {
		r.ContentLength = -1
		r.Body = io.NopCloser(strings.NewReader(string(big)))
		return nil
	})
	if resp.Status != 413 {
		t.Fatalf("chunked big body = %s", resp)
	}
	if resp := s.Get("/small/sleep?d=3s"); resp.Status != 504 || resp.ErrorCode() != "WORKER_TIMEOUT" {
		t.Fatalf("slow answer = %s", resp)
	}
	// Idle past its ttl, the process stops.
	pid := echoOf(t, s.Get("/small/")).PID
	harness.Eventually(t, "the idle process to stop", 15*time.Second, func() bool { return !harness.Alive(pid) })
	// The pool holds 2 processes: a third stops the least recently used.
	processWorker(t, s, "a", "1.0.0", "")
	processWorker(t, s, "b", "1.0.0", "")
	processWorker(t, s, "c", "1.0.0", "")
	pa := echoOf(t, s.Get("/a/")).PID
	pb := echoOf(t, s.Get("/b/")).PID
	echoOf(t, s.Get("/a/"))
	pc := echoOf(t, s.Get("/c/")).PID
	harness.Eventually(t, "the least recently used process (b) to stop", 15*time.Second, func() bool { return !harness.Alive(pb) })
	if !harness.Alive(pa) || !harness.Alive(pc) {
		t.Fatal("the pool stopped a recently used process")
	}
}

// TestProcessWorkerSurvivesReload checks that a reload with the same settings restarts nothing.
// HTTP/2, so a request right after a reload is never the one Caddy drops over HTTP/1.1 (see
// TestReloadUnderLoad).
func TestProcessWorkerSurvivesReload(t *testing.T) {
	t.Parallel()
	cfg := harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, HTTP2: true}
	s := harness.Start(t, cfg)
	processWorker(t, s, "steady", "1.0.0", "")
	before := echoOf(t, s.Get("/steady/")).PID
	for range 3 {
		if err := s.Reload(cfg); err != nil {
			t.Fatal(err)
		}
	}
	if after := echoOf(t, s.Get("/steady/")).PID; after != before {
		t.Fatalf("pid %d after reloads, was %d", after, before)
	}
	if n := s.LogCount("worker started", 1); n != 1 {
		t.Fatalf("%d worker starts across reloads", n)
	}
	// And all processes stop when Caddy exits.
	s.Stop()
	if harness.Alive(before) {
		t.Fatal("the worker process outlived the runtime")
	}
}
