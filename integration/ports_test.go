package integration

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// workerPort finds the process whose environment holds mark (a worker started by the
// runtime) and returns its PORT, waiting up to timeout for it to appear.
func workerPort(t *testing.T, mark string, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		pids, _ := filepath.Glob("/proc/[0-9]*/environ")
		for _, p := range pids {
			env, err := os.ReadFile(p)
			if err != nil || !bytes.Contains(env, []byte(mark)) {
				continue
			}
			for _, kv := range bytes.Split(env, []byte{0}) {
				if v, ok := bytes.CutPrefix(kv, []byte("PORT=")); ok {
					if port, err := strconv.Atoi(string(v)); err == nil {
						return port
					}
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no worker process with %s appeared within %s", mark, timeout)
	return 0
}

// TestPortTakenBeforeTheWorker: another process binds the port the runtime gave a worker
// before the worker does (here the test itself, as a hostile worker of another tenant did by
// holding every other port of the ephemeral range). The runtime must see that the listener is
// not the worker's, start the worker on another port, and never proxy a request to the other
// process.
func TestPortTakenBeforeTheWorker(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the listener's owner is checked on Linux (/proc)")
	}
	t.Parallel()
	s := startWithRoot(t)
	mark := fmt.Sprintf("VICTIM_MARK=victim-%d", time.Now().UnixNano())
	name, value, _ := strings.Cut(mark, "=")
	// The worker waits before it binds PORT, so the test takes the port first.
	processWorker(t, s, "@other/victim", "1.0.0", fmt.Sprintf("env:\n  %s: %s\n  START_DELAY: 1s\n", name, value))

	answers := make(chan *harness.Response, 1)
	go func() {
		resp, err := s.Send("GET", "/@other/victim/")
		if err != nil {
			resp = &harness.Response{Status: -1, Body: []byte(err.Error())}
		}
		answers <- resp
	}()
	port := workerPort(t, mark, 10*time.Second)
	stolen := hijack(t, port)

	var resp *harness.Response
	select {
	case resp = <-answers:
	case <-time.After(30 * time.Second):
		t.Fatal("the request to the worker did not return within 30 s")
	}
	if n := stolen.Load(); n > 0 {
		t.Fatalf("%d request(s) for @other/victim reached the process that took its port; the answer: %s", n, resp)
	}
	e := echoOf(t, resp)
	if !strings.Contains(strings.Join(e.Env, "\n"), mark) {
		t.Errorf("the answer is not the worker's: %+v", e)
	}
	if port2, _ := workerEnv(t, s, "/@other/victim/", "PORT"); port2 == strconv.Itoa(port) {
		t.Errorf("the worker serves on the taken port %d", port)
	}
	entry, err := s.WaitLog("another process listens on the port picked for the worker; stopping the worker and starting it on another port", 5*time.Second)
	if err != nil {
		t.Fatalf("no warning about the taken port: %v\n%s", err, s.Logs())
	}
	if got := fmt.Sprint(entry["owner"]); !strings.Contains(got, fmt.Sprintf("pid %d ", os.Getpid())) || fmt.Sprint(entry["port"]) != strconv.Itoa(port) {
		t.Errorf("the warning names port %v and owner %q, want port %d and this test's pid %d", entry["port"], got, port, os.Getpid())
	}
}

// hijack listens on 127.0.0.1:port until the test ends and counts the requests it is sent.
func hijack(t *testing.T, port int) *atomic.Int64 {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("taking port %d: %v", port, err)
	}
	var stolen atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Add(1)
		fmt.Fprint(w, "served by another process")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return &stolen
}

// TestPortLeftByARunningWorker: a running worker closes its listener (as a program that
// re-binds to reload would, or one that exited a moment before the runtime heard of it) and
// another process binds the port. The runtime's next connection to the worker must not carry a
// request there: it is closed unused, and the worker is started again on another port.
func TestPortLeftByARunningWorker(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the listener's owner is checked on Linux")
	}
	t.Parallel()
	s := startWithRoot(t)
	processWorker(t, s, "@other/victim", "1.0.0", "")
	first := echoOf(t, s.Get("/@other/victim/"))
	port, _ := workerEnv(t, s, "/@other/victim/", "PORT")
	if resp := s.Get("/@other/victim/unlisten"); resp.Status != 200 {
		t.Fatalf("unlisten: %s", resp)
	}
	n, _ := strconv.Atoi(port)
	stolen := hijack(t, n)

	// The first request after may fail (502): its connection found the other listener.
	var e echoBody
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp := s.Get("/@other/victim/")
		if resp.Status == 200 && resp.JSON(&e) == nil && e.PID != 0 {
			break
		}
		if stolen.Load() > 0 || time.Now().After(deadline) {
			t.Fatalf("after the worker let its port go: %s (requests sent to the other process: %d)", resp, stolen.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := stolen.Load(); n > 0 {
		t.Fatalf("%d request(s) for @other/victim reached the process that took its port", n)
	}
	if e.PID == first.PID {
		t.Errorf("the same process %d answers, without its listener", e.PID)
	}
	if _, err := s.WaitLog("the worker's port is no longer its own listener's; stopping the worker, the next request starts it on another port", 5*time.Second); err != nil {
		t.Error(err)
	}
}
