package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// launcherArg is the first argument that runs the runtime binary as a worker's launcher.
const launcherArg = "__runtime_sandbox_launcher"

// launch is what the runtime tells a launcher, over an inherited pipe (never the command line
// or the environment, which other processes can read).
type launch struct {
	Argv    []string            `json:"argv"`
	Dir     string              `json:"dir"`
	Env     []string            `json:"env"`
	Rules   []Rule              `json:"rules"`
	ABI     int                 `json:"abi"`
	Cgroup1 []string            `json:"cgroup1"` // v1 leaves the worker starts in
	Rlimits Limits              `json:"rlimits"`
	Cred    *syscall.Credential `json:"cred"`
	// Network: the launcher runs in a network namespace of its own and holds the worker's
	// listener as listenerFD (worker_network isolated).
	Network bool          `json:"network"`
	Scratch *scratchTmpfs `json:"scratch"` // nil: no tmpfs, the runtime watches the folder
	Seccomp bool          `json:"seccomp"` // the filter works here (probed at start-up)
}

// termGrace is how long a worker has to exit after SIGTERM before the launcher kills it; it is
// shorter than the pool's, so the launcher, not the pool, ends the worker's descendants.
const termGrace = 3 * time.Second

func init() {
	if len(os.Args) < 2 || os.Args[1] != launcherArg {
		return
	}
	runtime.LockOSThread()
	os.Exit(runLauncher())
}

// runLauncher starts the worker confined, reaps every descendant that is orphaned on the way,
// and when the worker exits or is told to stop, kills whatever it left behind.
func runLauncher() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "sandbox: "+format+"\n", args...)
		return 125
	}
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail("subreaper: %v", err)
	}
	var l launch
	spec := os.NewFile(3, "spec")
	err := json.NewDecoder(spec).Decode(&l)
	spec.Close()
	if err != nil || len(l.Argv) == 0 {
		return fail("reading the launch spec: %v", err)
	}
	if l.Scratch != nil {
		if err := l.Scratch.mount(); err != nil {
			return fail("scratch folder: %v", err)
		}
	}
	if err := setRlimits(l.Rlimits); err != nil {
		return fail("%v", err)
	}
	if l.Network {
		if err := loopbackUp(); err != nil {
			return fail("%v", err)
		}
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	started := make(chan startResult, 1)
	go startConfined(l, started)
	res := <-started
	if res.err != nil {
		return fail("starting %s: %v", l.Argv[0], res.err)
	}
	pid := res.pid

	exited := make(chan int, 1)
	go reap(pid, exited)
	var code int
	select {
	case code = <-exited:
	case <-signals:
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case code = <-exited:
		case <-time.After(termGrace):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			code = <-exited
		}
	}
	killDescendants()
	return code
}

type startResult struct {
	pid int
	err error
}

// startConfined confines its own OS thread and starts the worker from it, so the worker
// inherits every restriction while the launcher stays free to clean up. The thread is kept
// for the launcher's life: the worker's parent-death signal follows the thread that started it.
func startConfined(l launch, done chan<- startResult) {
	runtime.LockOSThread()
	pid, err := confineAndStart(l)
	done <- startResult{pid, err}
	select {}
}

func confineAndStart(l launch) (int, error) {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("no_new_privs: %v", err)
	}
	path, err := lookPath(l.Argv[0], l.Dir, l.Env)
	if err != nil {
		return 0, err
	}
	// Only this thread joins the v1 cgroups, so the launcher's other threads never count
	// against the worker's limits there; the runtime started the whole launcher in the v2 leaf.
	tid := []byte(strconv.Itoa(unix.Gettid()))
	for _, dir := range l.Cgroup1 {
		if err := os.WriteFile(filepath.Join(dir, "tasks"), tid, 0); err != nil {
			return 0, fmt.Errorf("joining cgroup %s: %v", dir, err)
		}
	}
	sys := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL, Credential: l.Cred}
	if l.ABI > 0 {
		if err := restrictThread(l.ABI, l.Rules); err != nil {
			return 0, err
		}
	}
	if l.Seccomp {
		// From here on this thread may not create namespaces either: any the worker gets are
		// made before. It starts the worker with plain clone, which the filter lets through
		// (clone3, which it refuses, would only be needed to clone into a cgroup: the worker
		// is in the launcher's v2 leaf already).
		if err := installSeccomp(); err != nil {
			return 0, err
		}
	}
	if err := dropCapabilities(l.Cred == nil); err != nil {
		return 0, err
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	if err := closeInherited(); err != nil {
		return 0, err
	}
	argv, files := l.Argv, []*os.File{null, os.Stdout, os.Stderr}
	if l.Network {
		path, argv, files = throughGate(path, argv, files)
	}
	p, err := os.StartProcess(path, argv, &os.ProcAttr{
		Dir: l.Dir, Env: l.Env, Files: files,
		// A session of its own: no terminal to reach, one group to signal.
		Sys: sys,
	})
	if err != nil {
		return 0, err
	}
	return p.Pid, nil
}

// closeInherited marks every descriptor from 3 up close-on-exec, so the worker starts with
// only those the launcher hands it on purpose (os.StartProcess puts them in place afresh):
// none the runtime inherited without close-on-exec (a redirected file, a service manager's
// socket, a test harness's pipe) reaches it, which Landlock, checking only open(), would not
// stop. The launcher keeps its own descriptors.
func closeInherited() error {
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	return cloexecEach() // before Linux 5.11
}

// cloexecEach marks each open descriptor from 3 up close-on-exec.
func cloexecEach() error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("listing inherited descriptors: %v", err)
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		// EBADF: the listing's own descriptor, closed by now.
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("closing inherited descriptor %d: %v", fd, err)
		}
	}
	return nil
}

// lookPath finds a command without a slash on the worker's PATH; one with a slash is taken
// relative to the worker's folder.
func lookPath(name, dir string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return name, nil
	}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, d := range filepath.SplitList(v) {
				if d == "" || !filepath.IsAbs(d) {
					continue
				}
				p := filepath.Join(d, name)
				if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
					return p, nil
				}
			}
		}
	}
	return "", fmt.Errorf("%s: not found on the worker's PATH", name)
}

// setRlimits applies the limits no cgroup holds, and turns off core dumps.
func setRlimits(l Limits) error {
	set := func(res int, v uint64) error {
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("rlimit %d: %v", res, err)
		}
		return nil
	}
	if err := set(unix.RLIMIT_CORE, 0); err != nil {
		return err
	}
	if l.Memory > 0 {
		if err := set(unix.RLIMIT_DATA, uint64(l.Memory)); err != nil {
			return err
		}
	}
	if l.Processes > 0 {
		return set(unix.RLIMIT_NPROC, uint64(l.Processes))
	}
	return nil
}

// dropCapabilities empties the thread's capability bounding set, so no program the worker
// runs can regain one, and, when the worker keeps the runtime's account, its own sets too.
// When it switches to another account, the switch clears them.
func dropCapabilities(clearOwn bool) error {
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			if !errors.Is(err, unix.EPERM) {
				return fmt.Errorf("dropping capability %d: %v", c, err)
			}
			break // without CAP_SETPCAP the runtime has no capabilities to hand on
		}
	}
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	if !clearOwn {
		return nil
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("dropping capabilities: %v", err)
	}
	return nil
}

// reap waits for every child, the orphans handed to the launcher included, and reports the
// worker's exit code.
func reap(worker int, exited chan<- int) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		if pid == worker {
			code := ws.ExitStatus()
			if ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
			exited <- code
		}
	}
}

// killDescendants kills every process left under the launcher: the worker's group and each
// orphan handed to the launcher, round after round, until none is left.
func killDescendants() {
	for range 200 {
		kids := children(os.Getpid())
		if len(kids) == 0 {
			return
		}
		for _, k := range kids {
			_ = syscall.Kill(-k, syscall.SIGKILL)
			_ = syscall.Kill(k, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name in parentheses may hold spaces; the fields after it do not.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) > 2 && fields[0] != "Z" && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}
