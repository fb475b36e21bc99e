package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/launch"
	"github.com/caddy-runtime/runtime/internal/testkit"
	"golang.org/x/sys/unix"
)

// run starts a shell script as a worker in a fresh version folder and returns its output.
func run(t *testing.T, sb *Sandbox, script string, limits Limits) (string, string) {
	t.Helper()
	return runArgv(t, sb, []string{"/bin/sh", "-c", script}, nil, nil, limits)
}

// runArgv starts argv as a worker in a fresh version folder holding files, with env added to
// its environment, and returns its output once it exits.
func runArgv(t *testing.T, sb *Sandbox, argv []string, files map[string][]byte, env []string, limits Limits) (string, string) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "apps", "w", "1.0.0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files = maps.Clone(files)
	if files == nil {
		files = map[string][]byte{}
	}
	files["own.txt"] = []byte("own file")
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut testkit.Buffer
	scratch := filepath.Join(root, "scratch")
	p, err := sb.Start(Spec{Argv: argv, Dir: dir, Env: append([]string{"PATH=/usr/bin:/bin", "TMPDIR=" + scratch}, env...),
		Scratch: scratch, Limits: limits}, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		p.Kill()
		<-done
		t.Fatalf("the worker did not exit; output:\n%s\n%s", out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// runTestWorker runs the test worker (testkit/testworker) in mode under the sandbox and
// decodes the JSON it prints.
func runTestWorker(t *testing.T, sb *Sandbox, mode string, v any) {
	t.Helper()
	bin, err := os.ReadFile(testkit.TestWorker(t))
	if err != nil {
		t.Fatal(err)
	}
	out, errOut := runArgv(t, sb, []string{"./testworker"}, map[string][]byte{"testworker": bin}, []string{"TESTWORKER_MODE=" + mode}, Limits{})
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("test worker in mode %s: %v\n%s%s", mode, err, out, errOut)
	}
}

func newSandbox(t *testing.T) *Sandbox {
	t.Helper()
	sb, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	return sb
}

func TestWorkerFiles(t *testing.T) {
	sb := newSandbox(t)
	if sb.Layers().Landlock == 0 {
		t.Skip("this kernel has no Landlock")
	}
	secret := filepath.Join(t.TempDir(), "state", "bootstrap-key")
	os.MkdirAll(filepath.Dir(secret), 0o700)
	os.WriteFile(secret, []byte("rtk_secret"), 0o600)
	tests := []struct {
		name, script, want string
	}{
		{"reads its own folder", "cat own.txt", "own file"},
		{"writes its scratch folder", `echo hi > "$TMPDIR/x" && cat "$TMPDIR/x"`, "hi"},
		{"reads system files", "head -c 4 /etc/passwd", "root"},
		{"cannot read state", "cat " + secret + " || echo denied", "denied"},
		{"cannot write its own folder", "echo x > own.txt || echo denied", "denied"},
		{"cannot write /tmp", "echo x > /tmp/sandbox-test-$$ || echo denied", "denied"},
		{"cannot read the runtime's environment", fmt.Sprintf("cat /proc/%d/environ || echo denied", os.Getpid()), "denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut := run(t, sb, tt.script, Limits{})
			if !strings.Contains(out, tt.want) || strings.Contains(out, "rtk_secret") {
				t.Fatalf("output %q (stderr %q), want %q", out, errOut, tt.want)
			}
		})
	}
}

func TestWorkerPrivileges(t *testing.T) {
	sb := newSandbox(t)
	out, errOut := run(t, sb, "grep -E '^(NoNewPrivs|CapEff|CapPrm|CapBnd|CapAmb)' /proc/self/status", Limits{})
	for _, want := range []string{"NoNewPrivs:\t1", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000"} {
		if !strings.Contains(out, want) {
			t.Errorf("worker status lacks %q:\n%s%s", want, out, errOut)
		}
	}
}

// TestOrphansStopWithTheWorker starts a grandchild in a session of its own and checks it is
// gone once the worker is stopped.
func TestOrphansStopWithTheWorker(t *testing.T) {
	sb := newSandbox(t)
	root := t.TempDir()
	var out testkit.Buffer
	p, err := sb.Start(Spec{Argv: []string{"/bin/sh", "-c", "setsid sh -c 'echo $$; exec sleep 60' & wait"},
		Dir: root, Env: []string{"PATH=/usr/bin:/bin"}, Scratch: filepath.Join(root, "s")}, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	testkit.EventuallyNil(t, 10*time.Second, func() error {
		if pid, _ = strconv.Atoi(strings.TrimSpace(out.String())); pid == 0 {
			return fmt.Errorf("no grandchild pid in %q", out.String())
		}
		return nil
	})
	p.Terminate()
	p.Wait()
	if err := syscall.Kill(pid, 0); err == nil {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("grandchild %d outlived its worker", pid)
	}
}

// TestProcessLimit runs a fork loop and checks it stops at the worker's limit: one its manifest
// asks for, written as the worker starts, and the operator's cap alone, which a spare launcher
// has written into its cgroups before a worker takes it.
func TestProcessLimit(t *testing.T) {
	tests := []struct {
		name   string
		caps   Limits
		limits Limits
	}{
		{"the manifest's limit", Limits{}, Limits{Processes: 20}},
		{"the operator's cap", Limits{Processes: 20}, Limits{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb, err := New(Options{Caps: tt.caps})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sb.Close)
			if !strings.Contains(sb.Layers().Cgroup, "pids") && os.Geteuid() == 0 {
				t.Skip("no pids cgroup here, and rlimits do not limit root")
			}
			// The shell stops at its first failed fork; each line is one process it started.
			out, errOut := run(t, sb, `n=0; while [ $n -lt 200 ]; do sleep 5 & echo started; n=$((n+1)); done`, tt.limits)
			n := strings.Count(out, "started")
			if n < 5 || n >= 20 {
				t.Fatalf("the worker started %d processes, want some but fewer than its limit of 20 (stderr %q)", n, errOut)
			}
		})
	}
}

// TestStaleCgroupsRemoved: workers left by a runtime that was killed are stopped when the next
// runtime starts.
func TestStaleCgroupsRemoved(t *testing.T) {
	cg := newCgroups(fmt.Sprintf("%sprobe-%d", parentPrefix, os.Getpid()))
	base := cg.bases["pids"]
	if base == "" {
		base = cg.v2
	}
	if base == "" {
		t.Skip("no cgroup may be created here")
	}
	defer os.Remove(base)
	stale := filepath.Join(filepath.Dir(base), parentPrefix+"999999999-1")
	leaf := filepath.Join(stale, "w1")
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		cmd.Process.Kill()
		t.Fatal(err)
	}
	newSandbox(t)
	t.Cleanup(func() { cmd.Process.Kill() })
	testkit.Eventually(t, "the stale worker to stop", 5*time.Second, func() bool { return syscall.Kill(cmd.Process.Pid, 0) != nil })
	if exists(stale) {
		t.Fatalf("the stale cgroup %s is still there", stale)
	}
}

// TestWorkerUnixSockets: a worker cannot connect to a unix socket of the runtime's account,
// such as Caddy's admin endpoint, but can still make socket pairs.
func TestWorkerUnixSockets(t *testing.T) {
	sb := newSandbox(t)
	if len(sb.Layers().Seccomp) == 0 {
		t.Skip("no seccomp filter for " + runtime.GOARCH)
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3 to play the worker; integration/sandbox_test.go covers this with the test worker")
	}
	sock := filepath.Join(t.TempDir(), "admin.sock")
	testkit.ServeUnix(t, sock, "admin reached")
	tests := []struct{ script, want string }{
		{fmt.Sprintf("python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('%s'); print(s.recv(64))\" || echo denied", sock), "denied"},
		{"python3 -c \"import socket; a,b=socket.socketpair(); a.send(b'pair'); print(b.recv(4))\"", "pair"},
		{"python3 -c \"import socket; s=socket.socket(); print('tcp ok')\"", "tcp ok"},
	}
	for _, tt := range tests {
		out, errOut := run(t, sb, tt.script, Limits{})
		if !strings.Contains(out, tt.want) || strings.Contains(out, "admin reached") {
			t.Errorf("%s: output %q (stderr %q), want %q", tt.script, out, errOut, tt.want)
		}
	}
}

// TestIsolatedNetwork: the worker's network namespace holds its loopback alone, and the worker
// is handed its listener as descriptor 3 with LISTEN_FDS and its own pid in LISTEN_PID.
func TestIsolatedNetwork(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a network namespace per worker needs root")
	}
	sb, err := New(Options{IsolateNetwork: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	if got := sb.Layers().String(); !strings.Contains(got, "network: "+NetworkIsolated) {
		t.Errorf("layers = %q, want the isolated network named", got)
	}
	out, errOut := run(t, sb, `echo "pid=$$ fds=$LISTEN_FDS listen_pid=$LISTEN_PID"; readlink /proc/self/fd/3; tail -n +3 /proc/net/dev | cut -d: -f1`, Limits{})
	lines := strings.Fields(out)
	if len(lines) != 5 || lines[0] != strings.Replace(lines[2], "listen_pid", "pid", 1) || lines[1] != "fds=1" ||
		!strings.HasPrefix(lines[3], "socket:[") || lines[4] != "lo" {
		t.Fatalf("worker output %q (stderr %q), want its own pid in LISTEN_PID, LISTEN_FDS=1, a socket as descriptor 3 and only lo", out, errOut)
	}
	if got := newSandbox(t).Layers().String(); !strings.Contains(got, "network: "+NetworkHost) {
		t.Errorf("layers = %q, want the host network named", got)
	}
}

// startScratch starts a shell script as a worker with a scratch limit and returns it, its
// scratch folder and its output.
func startScratch(t *testing.T, sb *Sandbox, script string, limit int64, over func(error)) (*Process, string, *testkit.Buffer) {
	t.Helper()
	root := t.TempDir()
	scratch := filepath.Join(root, "scratch")
	var out testkit.Buffer
	p, err := sb.Start(Spec{Argv: []string{"/bin/sh", "-c", script}, Dir: root, Env: []string{"PATH=/usr/bin:/bin", "TMPDIR=" + scratch},
		Scratch: scratch, Limits: Limits{Scratch: limit}, OverScratch: over}, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() })
	return p, scratch, &out
}

// TestScratchTmpfs: as root, a worker's scratch folder is a tmpfs of its own size: writing
// past it fails, the runtime's folder stays empty, and the folder goes with the worker.
func TestScratchTmpfs(t *testing.T) {
	sb := newSandbox(t)
	if sb.Layers().Scratch != ScratchTmpfs {
		t.Skipf("no tmpfs scratch folders here: %v", sb.noTmpfs)
	}
	p, scratch, out := startScratch(t, sb, `dd if=/dev/zero of="$TMPDIR/big" bs=1M count=8 2>&1; echo written; sleep 60`, 2<<20, nil)
	testkit.Eventually(t, "the worker to write", 10*time.Second, func() bool { return strings.Contains(out.String(), "written") })
	if !strings.Contains(out.String(), "No space left on device") {
		t.Errorf("writing 8 MiB into a 2 MiB scratch folder: %s", out)
	}
	if used, err := scratchUsage(scratch, 1<<30); used != 0 || err != nil {
		t.Errorf("the runtime's scratch folder holds %d bytes (%v), want nothing", used, err)
	}
	p.Terminate()
	p.Wait()
	if _, err := os.Lstat(scratch); !os.IsNotExist(err) {
		t.Errorf("the scratch folder outlived its worker: %v", err)
	}
}

// TestScratchWatcher: where no tmpfs can be mounted, as when the runtime does not run as
// root, the watcher stops a worker that fills its scratch folder past its limit, says why,
// and the folder goes with the worker.
func TestScratchWatcher(t *testing.T) {
	sb := newSandbox(t)
	sb.noTmpfs = errors.New("the runtime does not run as root") // what New finds then
	reasons := make(chan error, 2)
	p, scratch, out := startScratch(t, sb, `dd if=/dev/zero of="$TMPDIR/big" bs=1M count=8 2>&1; echo written; sleep 60`, 2<<20,
		func(reason error) { reasons <- reason })
	exited := make(chan struct{})
	go func() { p.Wait(); close(exited) }()
	testkit.Eventually(t, "the watcher to stop the worker", 15*time.Second, func() bool {
		select {
		case <-exited:
			return true
		default:
			return false
		}
	})
	if !strings.Contains(out.String(), "written") {
		t.Fatalf("the worker did not write: %s", out)
	}
	select {
	case reason := <-reasons:
		if !strings.Contains(reason.Error(), "2.0 MiB") {
			t.Errorf("reason %q does not name the limit", reason)
		}
	default:
		t.Fatal("the worker was stopped without a reason")
	}
	if _, err := os.Lstat(scratch); !os.IsNotExist(err) {
		t.Errorf("the scratch folder outlived its worker: %v", err)
	}
}

// TestWorkerCgroup: the worker starts in its own v2 cgroup, which its stage joins before it
// confines itself.
func TestWorkerCgroup(t *testing.T) {
	sb := newSandbox(t)
	if sb.cg.v2 == "" || len(sb.Layers().Seccomp) == 0 {
		t.Skip("no v2 cgroup or no seccomp filter here")
	}
	out, errOut := run(t, sb, "cat /proc/self/cgroup", Limits{})
	if !strings.Contains(out, "0::/") || !strings.Contains(out, "/"+sb.parent+"/w") {
		t.Fatalf("the worker's cgroups:\n%s%s\nwant a leaf of %s", out, errOut, sb.parent)
	}
}

// TestWorkerInheritedDescriptors: a descriptor the runtime holds without close-on-exec does
// not reach the worker, which starts with 0, 1 and 2 only.
func TestWorkerInheritedDescriptors(t *testing.T) {
	sb := newSandbox(t)
	f, err := os.Open(filepath.Join(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	// ls lists its parent's descriptors: the shell's, as the launcher started it.
	out, errOut := run(t, sb, "ls /proc/$$/fd", Limits{})
	if got := strings.Fields(out); !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Fatalf("the worker started with descriptors %v (stderr %q), want 0 1 2", got, errOut)
	}
}

// TestSpareLauncher: a launcher is started ahead of need, holding no environment and no
// descriptor but its spec socket (and /dev/null as 0, 1 and 2), and each worker takes the
// spare and leaves another in its place; one killed while it waited is replaced.
func TestSpareLauncher(t *testing.T) {
	sb := newSandbox(t)
	if out, errOut := run(t, sb, "echo first", Limits{}); strings.TrimSpace(out) != "first" {
		t.Fatalf("first worker: %q %q", out, errOut)
	}
	sp := readySpare(t, sb)
	for _, pid := range []int{sp.cmd.Process.Pid, stagePid(t, sp.cmd.Process.Pid)} {
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || len(environ) != 0 {
			t.Errorf("process %d of the spare has environment %q (%v), want none", pid, environ, err)
		}
		entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
			fd, _ := strconv.Atoi(e.Name())
			if fd < 3 && target != os.DevNull || fd == 3 && !strings.HasPrefix(target, "socket:") {
				t.Errorf("process %d of the spare holds descriptor %d: %s", pid, fd, target)
			}
		}
	}
	if out, _ := run(t, sb, "echo second", Limits{}); strings.TrimSpace(out) != "second" {
		t.Fatalf("second worker: %q", out)
	}
	if err := syscall.Kill(sp.cmd.Process.Pid, 0); err == nil {
		t.Error("the spare was not the one the second worker took")
	}
	next := readySpare(t, sb)
	stage := stagePid(t, next.cmd.Process.Pid)
	_ = syscall.Kill(-next.cmd.Process.Pid, syscall.SIGKILL)
	testkit.Eventually(t, "the spare to die", 10*time.Second, func() bool {
		return !next.alive() && syscall.Kill(stage, 0) != nil
	})
	if out, errOut := run(t, sb, "echo third", Limits{}); strings.TrimSpace(out) != "third" {
		t.Fatalf("a worker after its spare was killed: %q %q", out, errOut)
	}
}

// TestSpareAfterServing: once a worker that took the spare launcher serves (Serving), the
// next worker's spare is started, without waiting for spareDelay (an hour here), so
// back-to-back cold starts each find one ready.
func TestSpareAfterServing(t *testing.T) {
	defer func(d time.Duration) { spareDelay = d }(spareDelay)
	spareDelay = time.Hour
	sb := newSandbox(t)
	root := t.TempDir()
	scratch := filepath.Join(root, "scratch")
	var out, errOut testkit.Buffer
	p, err := sb.Start(Spec{Argv: []string{"/bin/sleep", "30"}, Dir: root, Env: []string{"TMPDIR=" + scratch}, Scratch: scratch}, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.Kill()
		_ = p.Wait()
	}()
	sb.mu.Lock()
	early := len(sb.spares) > 0 || sb.refilling
	sb.mu.Unlock()
	if early {
		t.Fatal("a spare was started before the worker served, with spareDelay an hour")
	}
	p.Serving()
	// Its fallback (an hour away) is stopped: it would otherwise start a spare during a later
	// worker's start, taking that start's CPU.
	if p.fallback.Stop() {
		t.Error("Serving left the worker's fallback refill running")
	}
	readySpare(t, sb)
}

// readySpare waits until the sandbox has its spare launchers ready, and returns the oldest, the
// one the next worker takes.
func readySpare(t *testing.T, sb *Sandbox) *spare {
	var sp *spare
	testkit.Eventually(t, fmt.Sprintf("%d spare launchers", spares), 10*time.Second, func() bool {
		sb.mu.Lock()
		defer sb.mu.Unlock()
		if len(sb.spares) < spares || sb.refilling {
			return false
		}
		sp = sb.spares[0]
		return true
	})
	return sp
}

// stagePid finds the launcher's child, its stage, once started.
func stagePid(t *testing.T, launcher int) int {
	var kids []int
	testkit.Eventually(t, "the launcher's stage", 10*time.Second, func() bool {
		kids = launch.Children(launcher)
		return len(kids) == 1
	})
	return kids[0]
}

// TestListenerHandedOver: a worker of the host's network that asks for it gets a listener as
// descriptor 3, with LISTEN_FDS=1 and its own pid in LISTEN_PID, and the runtime its path.
func TestListenerHandedOver(t *testing.T) {
	sb := newSandbox(t)
	root := t.TempDir()
	var out testkit.Buffer
	p, err := sb.Start(Spec{Argv: []string{"/bin/sh", "-c", `echo "pid=$$ fds=$LISTEN_FDS listen_pid=$LISTEN_PID"; readlink /proc/self/fd/3; ls /proc/$$/fd`},
		Dir: root, Env: []string{"PATH=/usr/bin:/bin", "LISTEN_PID=1"}, Scratch: filepath.Join(root, "scratch"), Listen: true}, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	if p.Socket() == "" {
		t.Error("no socket path for the runtime")
	}
	p.Wait()
	lines := strings.Fields(out.String())
	if len(lines) != 8 || lines[0] != strings.Replace(lines[2], "listen_pid", "pid", 1) || lines[1] != "fds=1" ||
		!strings.HasPrefix(lines[3], "socket:[") || !slices.Equal(lines[4:], []string{"0", "1", "2", "3"}) {
		t.Fatalf("worker output %q, want its own pid in LISTEN_PID, LISTEN_FDS=1, a socket as descriptor 3 and descriptors 0 to 3 only", out.String())
	}
}

// TestSpareYields: a spare started ahead of need runs at spareNice, its stage too, where the
// runtime may give it back its priority (CAP_SYS_NICE); the worker it becomes runs at the
// runtime's.
func TestSpareYields(t *testing.T) {
	sb := newSandbox(t)
	if !sb.niceSpares {
		t.Skip("skipping: the runtime lacks CAP_SYS_NICE, so spares keep its priority")
	}
	if out, errOut := run(t, sb, "echo first", Limits{}); strings.TrimSpace(out) != "first" {
		t.Fatalf("first worker: %q %q", out, errOut)
	}
	sp := readySpare(t, sb)
	for _, pid := range []int{sp.cmd.Process.Pid, stagePid(t, sp.cmd.Process.Pid)} {
		if got := niceOf(t, pid); got != spareNice {
			t.Errorf("process %d of the spare has nice %d, want %d", pid, got, spareNice)
		}
	}
	// The worker reads its own nice value (field 19 of /proc/self/stat).
	out, errOut := run(t, sb, "cut -d' ' -f19 /proc/self/stat", Limits{})
	own, _ := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if got := strings.TrimSpace(out); got != strconv.Itoa(20-own) {
		t.Errorf("the worker runs at nice %q (stderr %q), want the runtime's %d", got, errOut, 20-own)
	}
}

// niceOf is the nice value of process pid.
func niceOf(t *testing.T, pid int) int {
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, pid)
	if err != nil {
		t.Fatal(err)
	}
	return 20 - prio
}
