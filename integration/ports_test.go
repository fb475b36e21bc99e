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
	portTakenFirst(t, startWithRoot(t), "@other/victim", fmt.Sprintf("pid %d ", os.Getpid()))
}

// portTakenFirst is TestPortTakenBeforeTheWorker against s, with the worker app; owner is what
// the runtime's warning must say of the test process that takes the port.
func portTakenFirst(t *testing.T, s *harness.Server, app, owner string) {
	t.Helper()
	mark := fmt.Sprintf("VICTIM_MARK=victim-%d", time.Now().UnixNano())
	name, value, _ := strings.Cut(mark, "=")
	// The worker waits before it binds PORT, so the test takes the port first.
	processWorker(t, s, app, "1.0.0", fmt.Sprintf("env:\n  %s: %s\n  START_DELAY: 1s\n", name, value))

	answers := make(chan *harness.Response, 1)
	go func() {
		resp, err := s.Send("GET", "/"+app+"/")
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
		t.Fatalf("%d request(s) for %s reached the process that took its port; the answer: %s", n, app, resp)
	}
	e := echoOf(t, resp)
	if !strings.Contains(strings.Join(e.Env, "\n"), mark) {
		t.Errorf("the answer is not the worker's: %+v", e)
	}
	if port2, _ := workerEnv(t, s, "/"+app+"/", "PORT"); port2 == strconv.Itoa(port) {
		t.Errorf("the worker serves on the taken port %d", port)
	}
	entry, err := s.WaitLog("another process listens on the port picked for the worker; stopping the worker and starting it on another port", 5*time.Second)
	if err != nil {
		t.Fatalf("no warning about the taken port: %v\n%s", err, s.Logs())
	}
	if got := fmt.Sprint(entry["owner"]); !strings.Contains(got, owner) || fmt.Sprint(entry["port"]) != strconv.Itoa(port) {
		t.Errorf("the warning names port %v and owner %q, want port %d and %q (this test's process)", entry["port"], got, port, owner)
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
	portLeft(t, startWithRoot(t), "@other/victim")
}

// portLeft is TestPortLeftByARunningWorker against s, with the worker app.
func portLeft(t *testing.T, s *harness.Server, app string) {
	t.Helper()
	processWorker(t, s, app, "1.0.0", "")
	first := echoOf(t, s.Get("/"+app+"/"))
	port, _ := workerEnv(t, s, "/"+app+"/", "PORT")
	if resp := s.Get("/" + app + "/unlisten"); resp.Status != 200 {
		t.Fatalf("unlisten: %s", resp)
	}
	n, _ := strconv.Atoi(port)
	stolen := hijack(t, n)

	// The first request after may fail (502): its connection found the other listener.
	var e echoBody
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp := s.Get("/" + app + "/")
		if resp.Status == 200 && resp.JSON(&e) == nil && e.PID != 0 {
			break
		}
		if stolen.Load() > 0 || time.Now().After(deadline) {
			t.Fatalf("after the worker let its port go: %s (requests sent to the other process: %d)", resp, stolen.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := stolen.Load(); n > 0 {
		t.Fatalf("%d request(s) for %s reached the process that took its port", n, app)
	}
	if e.PID == first.PID {
		t.Errorf("the same process %d answers, without its listener", e.PID)
	}
	if _, err := s.WaitLog("the worker's port is no longer its own listener's; stopping the worker, the next request starts it on another port", 5*time.Second); err != nil {
		t.Error(err)
	}
}

// TestPortsWithoutPtrace: the runtime runs as root without CAP_SYS_PTRACE, as in a container
// with Docker's default capabilities, and starts its workers under worker_user. It may not read
// the descriptors of the workers' processes then, so it tells whose a listener is from the
// kernel's socket diagnostics (the cgroup a socket was made in): a process worker starts and
// answers, and a process that takes a worker's port, first or later, still gets no request.
func TestPortsWithoutPtrace(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the listener's owner is checked on Linux")
	}
	if os.Geteuid() != 0 {
		t.Skip("dropping a capability of the runtime and starting workers as another user needs root")
	}
	t.Parallel()
	capsh := capsh(t)
	s := harness.Start(t, harness.Config{
		Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey},
		App: "worker_user nobody",
		Wrap: func(binary string, args []string) []string {
			return append([]string{capsh, "--drop=cap_sys_ptrace", "--shell=" + binary, "--"}, args...)
		},
	})
	for _, set := range []string{"CapEff", "CapBnd"} {
		if capabilities(t, s.PID(), set)&(1<<capSysPtrace) != 0 {
			t.Fatalf("the runtime holds CAP_SYS_PTRACE in %s: capsh did not drop it", set)
		}
	}
	entry, _ := s.WaitLog("process worker sandbox", 5*time.Second)
	if layers := fmt.Sprint(entry["layers"]); !strings.Contains(layers, "cgroup v2") {
		t.Skipf("workers get no cgroup v2 of their own here (%s): without CAP_SYS_PTRACE the runtime cannot tell whose a listener is", layers)
	}

	openToOthers(processWorker(t, s, "@team/echo", "1.0.0", ""))
	e := echoOf(t, s.Get("/@team/echo/"))
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.PID)); err != nil || !strings.Contains(string(status), "Uid:\t65534") {
		t.Errorf("the worker %d does not run as nobody (%v):\n%s", e.PID, err, status)
	}
	// The runtime may not look into this test's process either (it holds more capabilities):
	// the warning names the listener's uid, from the kernel.
	t.Run("port taken first", func(t *testing.T) { portTakenFirst(t, s.In(t), "@other/first", "uid 0") })
	t.Run("port left", func(t *testing.T) { portLeft(t, s.In(t), "@other/left") })
}

// capSysPtrace is CAP_SYS_PTRACE's bit in a capability set (linux/capability.h).
const capSysPtrace = 19

// capabilities returns the capability set (CapEff, CapBnd, ...) of process pid.
func capabilities(t *testing.T, pid int, set string) uint64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, set+":\t"); ok {
			caps, err := strconv.ParseUint(v, 16, 64)
			if err != nil {
				t.Fatalf("%s of process %d: %v", set, pid, err)
			}
			return caps
		}
	}
	t.Fatalf("process %d shows no %s", pid, set)
	return 0
}

// capsh returns capsh, which starts a program with capabilities dropped: $CAPSH, else
// /usr/sbin/capsh (make deps installs it, package libcap2-bin).
func capsh(t *testing.T) string {
	t.Helper()
	return testProgram(t, "capsh", "CAPSH", "/usr/sbin/capsh")
}
