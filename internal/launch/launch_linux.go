package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	// path, not path/filepath: Go initialises path/filepath among the last packages of the
	// runtime's binary, and init below, which runs a launcher or a stage, only after it;
	// without it about a hundred packages' inits precede it, not over two hundred.
	"path"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// LauncherArg is the first argument that runs the runtime binary as a worker's launcher, and
// stageArg the one that runs it as the launcher's child that becomes the worker.
const (
	LauncherArg = "__runtime_sandbox_launcher"
	stageArg    = "__runtime_sandbox_worker"
)

// SpecFD is the launcher's descriptor of its spec socket, which it hands to its stage as the
// same number.
const SpecFD = 3

// A launcher's arguments after LauncherArg are the cgroup v1 folders its stage joins as it
// starts, ahead of need: moving a process between cgroups waits for the kernel's RCU grace
// period (milliseconds). The runtime clones the launcher into the worker's v2 cgroup.

// Spec is what the runtime tells a worker's stage, over the spec socket (never the command
// line or the environment, which other processes can read), with the worker's stdout, stderr
// and, with Listen, its listener as descriptors beside it.
type Spec struct {
	Argv []string `json:"argv"`
	Dir  string   `json:"dir"`
	Env  []string `json:"env"`
	// Landlock confines the worker's files; nil without Landlock.
	Landlock *Landlock `json:"landlock"`
	// Seccomp is the filter the worker runs under; empty without one.
	Seccomp []Filter `json:"seccomp"`
	Rlimits []Rlimit `json:"rlimits"`
	Cred    *Cred    `json:"cred"` // nil: the runtime's account
	// Network: the launcher runs in a network namespace of its own, whose loopback the stage
	// brings up (worker_network isolated).
	Network bool `json:"network"`
	// Listen: the worker gets a listener as descriptor 3, announced in LISTEN_FDS and
	// LISTEN_PID (socket activation).
	Listen bool `json:"listen"`
	// Tmpfs is mounted on the worker's scratch folder, in the launcher's mount namespace; nil:
	// none, the runtime watches the folder.
	Tmpfs *Tmpfs `json:"tmpfs"`
	// Bind is bind-mounted in the launcher's mount namespace after the tmpfs: a worker of
	// another account reaches its database folder through it, where the folders above the
	// folder (state_dir) are closed to that account. nil: none.
	Bind *Bind `json:"bind"`
}

// Bind is a folder mounted on a new folder Target (inside the scratch tmpfs), nosuid, nodev
// and noexec.
type Bind struct {
	Source string `json:"source"`
	Target string `json:"target"`
}

// Landlock is a ruleset: the rights it handles (all others are allowed), what it scopes
// (signals, abstract sockets), the rights a rule on a single file may hold, and the rules.
type Landlock struct {
	Handled    uint64 `json:"handled"`
	Scoped     uint64 `json:"scoped"`
	FileAccess uint64 `json:"fileAccess"`
	Rules      []Rule `json:"rules"`
}

// Rule gives access to a path and everything beneath it.
type Rule struct {
	Path   string `json:"path"`
	Access uint64 `json:"access"`
}

// Filter is one instruction of a seccomp program (struct sock_filter).
type Filter struct {
	Code uint16 `json:"c"`
	Jt   uint8  `json:"t"`
	Jf   uint8  `json:"f"`
	K    uint32 `json:"k"`
}

// Rlimit is a resource limit the worker starts under, its soft and hard value.
type Rlimit struct {
	Resource int    `json:"resource"`
	Value    uint64 `json:"value"`
}

// Cred is the account the worker runs as.
type Cred struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups"`
}

// Tmpfs is a tmpfs mounted on Path with Options (size, inodes, mode, owner).
type Tmpfs struct {
	Path    string `json:"path"`
	Options string `json:"options"`
}

// termGrace is how long a worker has to exit after SIGTERM before the launcher kills it; it is
// shorter than the pool's, so the launcher, not the pool, ends the worker's descendants.
const termGrace = 3 * time.Second

func init() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case LauncherArg:
		runtime.LockOSThread()
		os.Exit(runLauncher())
	case stageArg:
		runtime.LockOSThread()
		os.Exit(runStage())
	}
}

// Prctl options and other values the syscall package does not name.
const (
	prSetPdeathsig       = 1
	prSetDumpable        = 4
	prSetSeccomp         = 22
	prCapbsetDrop        = 24
	prSetChildSubreaper  = 36
	prSetNoNewPrivs      = 38
	prCapAmbient         = 47
	prCapAmbientClearAll = 4
	seccompModeFilter    = 2
	rlimitNproc          = 6
	sysCloseRange        = 436 // the same number on every architecture
	sysLandlockCreate    = 444
	sysLandlockAddRule   = 445
	sysLandlockRestrict  = 446
	closeRangeCloexec    = 1 << 2
	landlockRulePath     = 1
	oPath                = 0x200000 // amd64, arm64, riscv64, 386, arm
)

// fail tells why the launcher or its stage gives up, on the worker's stderr once the stage has
// it, and returns the exit code that says so.
func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "sandbox: "+format+"\n", args...)
	return 125
}

func prctl(option int, arg2 uintptr) error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, uintptr(option), arg2, 0, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

// runLauncher is a worker's launcher, started ahead of need (a spare): it starts the stage at
// once, which waits for the spec, reaps every descendant orphaned on the way, and when the
// worker exits or is told to stop, kills whatever it left behind. It holds nothing but the
// spec socket, which it hands to the stage and closes.
func runLauncher() int {
	_ = prctl(prSetDumpable, 0)
	if err := prctl(prSetChildSubreaper, 1); err != nil {
		return fail("subreaper: %v", err)
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// The main thread starts the stage and lives as long as the launcher: the stage's
	// parent-death signal follows the thread that started it.
	spec := os.NewFile(SpecFD, "spec")
	p, err := os.StartProcess("/proc/self/exe", append([]string{"runtime", stageArg}, os.Args[2:]...), &os.ProcAttr{
		Dir: "/", Env: []string{}, Files: []*os.File{os.Stdin, os.Stdout, os.Stderr, spec},
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	spec.Close()
	if err != nil {
		return fail("starting the worker: %v", err)
	}
	pid := p.Pid

	exited := make(chan int, 1)
	go reap(pid, exited)
	var code int
	select {
	case code = <-exited:
	case <-signals:
		// The worker's group once it runs; the stage alone while it waits for a spec.
		if syscall.Kill(-pid, syscall.SIGTERM) != nil {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
		select {
		case code = <-exited:
		case <-time.After(termGrace):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			code = <-exited
		}
	}
	killDescendants()
	return code
}

// runStage is the process that becomes the worker: it waits for the spec, sets up the
// worker's scratch folder, limits and cgroups, confines itself (no_new_privs, Landlock,
// seccomp, no capabilities, the worker's account) and executes the worker's program in its
// place, so the worker keeps its pid, the one LISTEN_PID names. Everything runs on the main
// thread, the one that executes the program: the others end with the exec.
func runStage() int {
	_ = prctl(prSetDumpable, 0)
	launcher := os.Getppid()
	var joinErr error
	for _, dir := range os.Args[2:] {
		// The whole stage moves, its few threads included; only the main one survives the exec.
		if err := os.WriteFile(path.Join(dir, "cgroup.procs"), []byte("0"), 0); err != nil && joinErr == nil {
			joinErr = fmt.Errorf("joining cgroup %s: %w", dir, err)
		}
	}
	// What needs no spec is readied while the stage waits for it.
	warmDecoder()
	null, err := syscall.Open(os.DevNull, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fail("%v", err)
	}
	lastCap := lastCapability()
	l, files, err := receive(SpecFD)
	if err != nil {
		return fail("reading the launch spec: %v", err)
	}
	// The worker's output from here on, this process's own messages included.
	for i, f := range files[:2] {
		if err := syscall.Dup3(int(f.Fd()), i+1, 0); err != nil {
			return fail("worker output: %v", err)
		}
	}
	if joinErr != nil {
		return fail("%v", joinErr)
	}
	if l.Tmpfs != nil {
		if err := MountTmpfs(l.Tmpfs.Path, l.Tmpfs.Options); err != nil {
			return fail("scratch folder: %v", err)
		}
	}
	if l.Bind != nil {
		if err := mountBind(*l.Bind); err != nil {
			return fail("database folder: %v", err)
		}
	}
	for _, r := range l.Rlimits {
		if err := syscall.Setrlimit(r.Resource, &syscall.Rlimit{Cur: r.Value, Max: r.Value}); err != nil {
			return fail("rlimit %d: %v", r.Resource, err)
		}
	}
	if l.Network {
		if err := LoopbackUp(); err != nil {
			return fail("%v", err)
		}
	}
	var listener *os.File
	if l.Listen {
		listener = files[2]
	}
	err = confineAndExec(l, launcher, listener, null, lastCap)
	return fail("starting %s: %v", l.Argv[0], err)
}

// warmDecoder decodes a spec of about a worker's size, every field set, while the stage waits
// for its own: the first decoding of a type builds its decoder and brings its code in, a
// quarter of a millisecond that the worker's start would wait for otherwise.
func warmDecoder() {
	sample := Spec{Argv: make([]string, 4), Env: make([]string, 20), Landlock: &Landlock{Rules: make([]Rule, 12)}, Seccomp: make([]Filter, 100),
		Rlimits: make([]Rlimit, 4), Cred: &Cred{Groups: []uint32{0}}, Tmpfs: &Tmpfs{}, Bind: &Bind{}}
	if data, err := json.Marshal(sample); err == nil {
		_ = json.Unmarshal(data, &Spec{})
	}
}

// receive reads the spec from the socket fd until the runtime closes it, with the descriptors
// that came with it: stdout, stderr and, with Listen, the listener. The socket stays open,
// close-on-exec, holding its number until the listener takes it.
func receive(fd int) (Spec, []*os.File, error) {
	var l Spec
	var data []byte
	var files []*os.File
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(3*4))
	for {
		n, oobn, _, _, err := syscall.Recvmsg(fd, buf, oob, syscall.MSG_CMSG_CLOEXEC)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return l, nil, err
		}
		if oobn > 0 {
			msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
			if err != nil {
				return l, nil, err
			}
			for _, m := range msgs {
				fds, err := syscall.ParseUnixRights(&m)
				if err != nil {
					return l, nil, err
				}
				for _, f := range fds {
					files = append(files, os.NewFile(uintptr(f), "launch"))
				}
			}
		}
		if n == 0 {
			break
		}
		data = append(data, buf[:n]...)
	}
	if err := json.Unmarshal(data, &l); err != nil {
		return l, nil, err
	}
	if len(l.Argv) == 0 {
		return l, nil, errors.New("no command")
	}
	want := 2
	if l.Listen {
		want = 3
	}
	if len(files) != want {
		return l, nil, fmt.Errorf("%d descriptors, want %d", len(files), want)
	}
	return l, files, nil
}

// confineAndExec confines the calling thread and executes the worker's program on it, null
// (/dev/null) as its standard input; lastCap is the kernel's highest capability. It returns
// only on failure.
func confineAndExec(l Spec, launcher int, listener *os.File, null, lastCap int) error {
	if err := prctl(prSetNoNewPrivs, 1); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	path, err := lookPath(l.Argv[0], l.Dir, l.Env)
	if err != nil {
		return err
	}
	if l.Landlock != nil {
		if err := restrictThread(l.Landlock); err != nil {
			return err
		}
	}
	if len(l.Seccomp) > 0 {
		// From here on this thread may not create namespaces either: the worker's were made
		// before (the launcher's).
		if err := InstallSeccomp(l.Seccomp); err != nil {
			return err
		}
	}
	if err := dropCapabilities(lastCap, l.Cred == nil); err != nil {
		return err
	}
	// A session of its own: no terminal to reach, one group to signal.
	if _, err := syscall.Setsid(); err != nil {
		return fmt.Errorf("setsid: %w", err)
	}
	if l.Cred != nil {
		if err := switchThreadCredential(l.Cred); err != nil {
			return err
		}
	}
	// The switch of account clears the parent-death signal: set it (again) after it, and
	// leave at once if the launcher is gone already.
	if err := prctl(prSetPdeathsig, uintptr(syscall.SIGKILL)); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
	if os.Getppid() != launcher {
		return errors.New("the launcher is gone")
	}
	if err := syscall.Chdir(l.Dir); err != nil {
		return fmt.Errorf("chdir %s: %w", l.Dir, err)
	}
	if err := closeInherited(); err != nil {
		return err
	}
	if err := syscall.Dup3(null, 0, 0); err != nil {
		return err
	}
	env := l.Env
	if listener != nil {
		if err := syscall.Dup3(int(listener.Fd()), 3, 0); err != nil {
			return fmt.Errorf("handing over the listener: %w", err)
		}
		env = listenEnv(env)
	}
	return syscall.Exec(path, l.Argv, env)
}

// mountBind mounts b.Source on the new folder b.Target, then makes the mount nosuid, nodev
// and noexec (a bind mount takes those flags on a remount only).
func mountBind(b Bind) error {
	if err := os.Mkdir(b.Target, 0o700); err != nil {
		return err
	}
	if err := syscall.Mount(b.Source, b.Target, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("mounting %s on %s: %w", b.Source, b.Target, err)
	}
	flags := uintptr(syscall.MS_BIND | syscall.MS_REMOUNT | syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC)
	if err := syscall.Mount("", b.Target, "", flags, ""); err != nil {
		return fmt.Errorf("remounting %s: %w", b.Target, err)
	}
	return nil
}

// listenEnv is env with the listener (descriptor 3) announced in LISTEN_FDS and LISTEN_PID, the
// pid of the calling process, the stage that executes the worker's program and so is the
// worker; any LISTEN_* the manifest set is replaced.
func listenEnv(env []string) []string {
	out := []string{"LISTEN_FDS=1", "LISTEN_PID=" + strconv.Itoa(os.Getpid())}
	for _, kv := range env {
		if !strings.HasPrefix(kv, "LISTEN_") {
			out = append(out, kv)
		}
	}
	return out
}

// switchThreadCredential switches the calling thread, the one that executes the worker, to
// the worker's account. Go's own calls switch every thread, which they cannot do in a binary
// built with cgo; the other threads end with the exec.
func switchThreadCredential(c *Cred) error {
	groups := append([]uint32{}, c.Groups...)
	var ptr uintptr
	if len(groups) > 0 {
		ptr = uintptr(unsafe.Pointer(&groups[0]))
	}
	if _, _, e := syscall.RawSyscall(sysSetgroups, uintptr(len(groups)), ptr, 0); e != 0 {
		return fmt.Errorf("setgroups: %v", e)
	}
	runtime.KeepAlive(groups)
	if _, _, e := syscall.RawSyscall(sysSetresgid, uintptr(c.GID), uintptr(c.GID), uintptr(c.GID)); e != 0 {
		return fmt.Errorf("setresgid: %v", e)
	}
	if _, _, e := syscall.RawSyscall(sysSetresuid, uintptr(c.UID), uintptr(c.UID), uintptr(c.UID)); e != 0 {
		return fmt.Errorf("setresuid: %v", e)
	}
	return nil
}

// closeInherited marks every descriptor from 3 up close-on-exec, so the worker starts with
// only those handed to it on purpose: none the runtime inherited without close-on-exec (a
// redirected file, a service manager's socket, a test harness's pipe) reaches it, which
// Landlock, checking only open(), would not stop.
func closeInherited() error {
	if _, _, e := syscall.RawSyscall(sysCloseRange, 3, uintptr(^uint32(0)), closeRangeCloexec); e == 0 {
		return nil
	}
	return cloexecEach() // before Linux 5.11
}

// cloexecEach marks each open descriptor from 3 up close-on-exec.
func cloexecEach() error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("listing inherited descriptors: %w", err)
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		// EBADF: the listing's own descriptor, closed by now.
		if _, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_SETFD, syscall.FD_CLOEXEC); e != 0 && e != syscall.EBADF {
			return fmt.Errorf("closing inherited descriptor %d: %v", fd, e)
		}
	}
	return nil
}

// lookPath finds a command without a slash on the worker's PATH; one with a slash is taken
// relative to the worker's folder.
func lookPath(name, dir string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if !path.IsAbs(name) {
			name = path.Join(dir, name)
		}
		return name, nil
	}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok && v != "" {
			for _, d := range strings.Split(v, ":") {
				if d == "" || !path.IsAbs(d) {
					continue
				}
				p := path.Join(d, name)
				if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
					return p, nil
				}
			}
		}
	}
	return "", fmt.Errorf("%s: not found on the worker's PATH", name)
}

// lastCapability is the highest capability number the kernel knows, 40 when it does not say.
func lastCapability() int {
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n
		}
	}
	return 40
}

// dropCapabilities empties the thread's capability bounding set (capabilities 0 to last), so
// no program the worker runs can regain one, and, when the worker keeps the runtime's account,
// its own sets too. When it switches to another account, the switch clears them.
func dropCapabilities(last int, clearOwn bool) error {
	for c := 0; c <= last; c++ {
		if err := prctl(prCapbsetDrop, uintptr(c)); err != nil && err != syscall.EINVAL {
			if err != syscall.EPERM {
				return fmt.Errorf("dropping capability %d: %w", c, err)
			}
			break // without CAP_SETPCAP the runtime has no capabilities to hand on
		}
	}
	_, _, _ = syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0)
	if !clearOwn {
		return nil
	}
	hdr := struct {
		version uint32
		pid     int32
	}{version: 0x20080522} // _LINUX_CAPABILITY_VERSION_3
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("dropping capabilities: %v", e)
	}
	return nil
}

// restrictThread confines the calling OS thread, and every process it starts from now on, to
// the ruleset. The caller must hold the thread (runtime.LockOSThread) and have set
// no_new_privs.
func restrictThread(ll *Landlock) error {
	attr := struct{ fs, net, scoped uint64 }{fs: ll.Handled, scoped: ll.Scoped}
	size := unsafe.Sizeof(attr.fs)
	if ll.Scoped != 0 {
		size = unsafe.Sizeof(attr)
	}
	fd, _, e := syscall.RawSyscall(sysLandlockCreate, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return fmt.Errorf("landlock ruleset: %v", e)
	}
	defer syscall.Close(int(fd))
	for _, r := range ll.Rules {
		if err := addRule(int(fd), r, ll); err != nil {
			return err
		}
	}
	if _, _, e := syscall.RawSyscall(sysLandlockRestrict, fd, 0, 0); e != 0 {
		return fmt.Errorf("landlock restrict: %v", e)
	}
	return nil
}

func addRule(ruleset int, r Rule, ll *Landlock) error {
	fd, err := syscall.Open(r.Path, oPath|syscall.O_CLOEXEC, 0)
	if err != nil {
		if err == syscall.ENOENT {
			return nil // a system folder this machine lacks
		}
		return fmt.Errorf("landlock rule for %s: %w", r.Path, err)
	}
	defer syscall.Close(fd)
	access := r.Access & ll.Handled
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		access &= ll.FileAccess
	}
	// struct landlock_path_beneath_attr is packed: the descriptor follows the rights at once.
	var attr [12]byte
	*(*uint64)(unsafe.Pointer(&attr[0])) = access
	*(*int32)(unsafe.Pointer(&attr[8])) = int32(fd)
	if _, _, e := syscall.RawSyscall6(sysLandlockAddRule, uintptr(ruleset), landlockRulePath, uintptr(unsafe.Pointer(&attr[0])), 0, 0, 0); e != 0 {
		return fmt.Errorf("landlock rule for %s: %v", r.Path, e)
	}
	return nil
}

// InstallSeccomp puts the filter on the calling thread, which must hold no_new_privs; the
// program it executes next runs under it, and so does everything that program starts.
func InstallSeccomp(prog []Filter) error {
	fprog := struct {
		len    uint16
		filter *Filter
	}{uint16(len(prog)), &prog[0]}
	_, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetSeccomp, seccompModeFilter, uintptr(unsafe.Pointer(&fprog)), 0, 0, 0)
	runtime.KeepAlive(prog)
	if e != 0 {
		return fmt.Errorf("seccomp: %v", e)
	}
	return nil
}

// MountTmpfs makes the mount namespace's mounts private, so nothing mounted here reaches the
// runtime's namespace, and mounts a tmpfs on path. The stage calls it before Landlock rules
// are added: a rule holds the folder it was opened on, which must be the tmpfs.
func MountTmpfs(path, options string) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mounts private: %w", err)
	}
	if err := syscall.Mount("tmpfs", path, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, options); err != nil {
		return fmt.Errorf("mounting a tmpfs on %s: %w", path, err)
	}
	return nil
}

// LoopbackUp brings up the loopback interface of the calling thread's network namespace (the
// launcher's new one, or a worker's where the runtime opens a listener for it), where
// it starts down; it needs CAP_NET_ADMIN, so it runs before any confinement.
func LoopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bringing up the loopback: %w", err)
	}
	defer syscall.Close(fd)
	var ifr [40]byte // struct ifreq: the name, then the flags
	copy(ifr[:], "lo")
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return fmt.Errorf("bringing up the loopback: %v", e)
	}
	*(*uint16)(unsafe.Pointer(&ifr[16])) |= syscall.IFF_UP
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return fmt.Errorf("bringing up the loopback: %v", e)
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
		kids := Children(os.Getpid())
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

// Children lists the processes whose parent is pid.
func Children(pid int) []int { return processTree()[pid] }

// Descendants lists pid and every process below it, from one reading of /proc.
func Descendants(pid int) []int {
	tree := processTree()
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, tree[out[i]]...)
	}
	return out
}

// processTree maps each process's pid to its live children's (zombies left out), from /proc.
func processTree() map[int][]int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	tree := map[int][]int{}
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
		if len(fields) < 2 || fields[0] == "Z" {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil {
			tree[ppid] = append(tree[ppid], child)
		}
	}
	return tree
}
