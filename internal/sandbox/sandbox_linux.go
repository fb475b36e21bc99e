package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/caddy-runtime/runtime/internal/troubleshooting"
)

// Sandbox starts confined workers.
type Sandbox struct {
	opts      Options
	abi       int
	cg        *cgroups
	parent    string // the runtime's parent cgroup name
	seq       atomic.Int64
	cred      *syscall.Credential // nil: workers keep the runtime's account
	layers    Layers
	nonDump   bool
	seccomp   bool
	readRules []Rule
	sockets   string // the folder of the workers' listeners; "" when workers share the host's network
	exe       string // the runtime binary, which the socket activation gate runs
	noTmpfs   error  // why workers get no tmpfs scratch folder; nil when they do
}

var sandboxes atomic.Int64

// New prepares the sandbox: it closes the runtime's memory and environment to same-user
// processes, resolves the worker account, probes Landlock and tmpfs scratch folders, and
// creates the runtime's cgroups.
func New(opts Options) (*Sandbox, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the runtime binary, which starts the workers: %v", err)
	}
	s := &Sandbox{opts: opts, abi: landlockABI(), exe: exe}
	s.nonDump = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) == nil
	if opts.User != "" {
		cred, err := lookupCredential(opts.User, opts.Group)
		if err != nil {
			return nil, err
		}
		s.cred = cred
	}
	if opts.IsolateNetwork {
		if err := s.isolateNetwork(); err != nil {
			return nil, err
		}
	}
	s.readRules = systemRules()
	for _, dir := range opts.ReadDirs {
		s.readRules = append(s.readRules, Rule{dir, llExec})
	}
	s.parent = fmt.Sprintf("%s%d-%d", parentPrefix, os.Getpid(), sandboxes.Add(1))
	s.cg = newCgroups(s.parent)
	s.noTmpfs = probeTmpfs()
	s.layers = s.probe()
	return s, nil
}

func lookupCredential(name, group string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if u, err = user.LookupId(name); err != nil {
			return nil, fmt.Errorf("worker_user %q: no such user", name)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if group != "" {
		g, err := user.LookupGroup(group)
		if err != nil {
			if g, err = user.LookupGroupId(group); err != nil {
				return nil, fmt.Errorf("worker_group %q: no such group", group)
			}
		}
		gid, _ = strconv.Atoi(g.Gid)
	}
	if os.Geteuid() != 0 && uid != os.Geteuid() {
		return nil, fmt.Errorf("worker_user %q: the runtime must run as root to start workers as another user", name)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

func (s *Sandbox) probe() Layers {
	l := Layers{Launcher: true, NoNewPrivs: true, Capabilities: true, Landlock: s.abi, Cgroup: s.cg.mode, NonDumpable: s.nonDump,
		Network: NetworkHost}
	if s.sockets != "" {
		l.Network = NetworkIsolated
	}
	if err := probeSeccomp(); err != nil {
		l.Warnings = append(l.Warnings, Warning{"no seccomp filter for process workers (" + err.Error() + "): they can use io_uring, open unix sockets (Caddy's admin socket among them), create namespaces and ptrace", troubleshooting.NoSeccomp})
	} else {
		s.seccomp, l.Seccomp = true, seccompRefusals()
	}
	switch {
	case s.cred != nil:
		l.User = s.opts.User
	default:
		if u, err := user.Current(); err == nil {
			l.User = u.Username
		}
		if os.Geteuid() == 0 {
			l.Warnings = append(l.Warnings, Warning{"process workers run as root (with every capability dropped); set worker_user to run them under an account of their own", troubleshooting.WorkersAsRoot})
		}
	}
	if s.abi == 0 {
		l.Warnings = append(l.Warnings, Warning{"this kernel has no Landlock: process workers can read every file the runtime's account can, state_dir included", troubleshooting.NoLandlock})
	}
	l.Scratch = ScratchTmpfs
	if s.noTmpfs != nil {
		l.Scratch = ScratchWatcher
		if os.Geteuid() == 0 {
			l.Warnings = append(l.Warnings, Warning{fmt.Sprintf("no tmpfs can be mounted for scratch folders (%v): a watcher measures each one every second and stops a worker past worker_scratch", s.noTmpfs), troubleshooting.NoTmpfs})
		}
	}
	if missing := s.cg.missing(); len(missing) > 0 {
		msg := "no cgroup may be created here for " + strings.Join(missing, ", ") + ": those worker limits use rlimits (memory, processes) or none (cpu)"
		if os.Geteuid() == 0 && s.cred == nil {
			msg += ", and the process limit does not hold for workers running as root"
		}
		l.Warnings = append(l.Warnings, Warning{msg, troubleshooting.NoCgroup})
		l.Cgroup = strings.TrimPrefix(l.Cgroup+" + rlimits", " + ")
	}
	for _, private := range s.opts.Private {
		for _, r := range s.readRules {
			if within(private, r.Path) {
				l.Warnings = append(l.Warnings, Warning{fmt.Sprintf("%s lies inside %s, which process workers may read; move it elsewhere", private, r.Path), troubleshooting.PrivateFolderReadable})
			}
		}
	}
	return l
}

func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && (len(rel) < 3 || rel[:3] != "../")
}

// Layers reports the layers in force.
func (s *Sandbox) Layers() Layers { return s.layers }

// IsolatedNetwork reports whether each worker runs in a network of its own and serves on the
// listener the sandbox hands it (Process.Socket).
func (s *Sandbox) IsolatedNetwork() bool { return s.sockets != "" }

// Close removes the runtime's parent cgroups; call it once every worker has stopped.
func (s *Sandbox) Close() {
	dirs := []string{s.cg.v2}
	for _, d := range s.cg.bases {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if d != "" {
			_ = os.Remove(d)
		}
	}
	if s.sockets != "" {
		_ = os.RemoveAll(s.sockets)
	}
}

// Process is a running worker under its launcher.
type Process struct {
	cmd   *exec.Cmd
	group *group
	// The worker's listener in an isolated network: the runtime keeps a copy, to see whether
	// the worker accepts, until the worker exits.
	listener *os.File
	socket   string
	scratch  string
	unwatch  func() // stops the scratch watcher
}

// Start starts the worker of spec under a launcher; its output goes to stdout and stderr.
func (s *Sandbox) Start(spec Spec, stdout, stderr io.Writer) (*Process, error) {
	if err := s.prepareScratch(spec.Scratch); err != nil {
		return nil, err
	}
	p, err := s.start(spec, stdout, stderr)
	if err != nil {
		removeScratch(spec.Scratch)
		return nil, err
	}
	return p, nil
}

func (s *Sandbox) start(spec Spec, stdout, stderr io.Writer) (*Process, error) {
	limits := spec.Limits.Cap(s.opts.Caps)
	l := launch{Argv: spec.Argv, Dir: spec.Dir, Env: spec.Env, ABI: s.abi, Cred: s.cred, Scratch: s.tmpfs(spec.Scratch, limits.Scratch),
		Seccomp: s.seccomp}
	l.Rules = append(append([]Rule{{spec.Dir, llExec}}, s.readRules...), Rule{spec.Scratch, llExec | llWrite | unix.LANDLOCK_ACCESS_FS_TRUNCATE})
	n := s.seq.Add(1)
	g, left, err := s.cg.create(fmt.Sprintf("w%d", n), limits)
	if err != nil {
		return nil, err
	}
	proc := &Process{group: g, scratch: spec.Scratch, unwatch: func() {}}
	if s.sockets != "" {
		l.Network = true
		l.Rules = append(l.Rules, Rule{s.exe, llExec}) // the socket activation gate
		proc.socket = socketPath(s.sockets, n)
		if proc.listener, err = listen(proc.socket); err != nil {
			g.remove()
			return nil, err
		}
	}
	l.Cgroup1 = g.v1
	l.Rlimits = left
	payload, err := json.Marshal(l)
	if err != nil {
		proc.release()
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		proc.release()
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command("/proc/self/exe", launcherArg)
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{r}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// The launcher's own group, so a stop reaches it; killed with the runtime.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if l.Network {
		cmd.ExtraFiles = append(cmd.ExtraFiles, proc.listener) // the launcher's listenerFD
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWNET
	}
	if l.Scratch != nil {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWNS // for the scratch tmpfs
	}
	if g.v2 != "" {
		// The launcher starts in the worker's v2 leaf, so the worker, cloned from it, starts
		// there too: the launcher's seccomp-bound thread could not clone it into a cgroup
		// (clone3). Its few threads and megabytes count against v2 limits with the worker's.
		leaf, err := os.Open(g.v2)
		if err != nil {
			proc.release()
			return nil, fmt.Errorf("opening cgroup %s: %v", g.v2, err)
		}
		defer leaf.Close()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(leaf.Fd())
	}
	// A descendant that outlives the worker and holds its output open must not stall Wait.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		w.Close()
		proc.release()
		return nil, err
	}
	proc.cmd = cmd
	_, werr := w.Write(payload)
	w.Close()
	if werr != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		proc.release()
		return nil, werr
	}
	if l.Scratch == nil {
		proc.unwatch = watch(spec, limits.Scratch, proc.Kill)
	}
	return proc, nil
}

// isolateNetwork prepares worker_network isolated: creating network namespaces takes root.
func (s *Sandbox) isolateNetwork() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("worker_network isolated: the runtime must run as root to give each worker a network namespace of its own")
	}
	var err error
	s.sockets, err = socketFolder()
	return err
}

// release removes what Start made for a worker that has exited or never started.
func (p *Process) release() {
	p.group.remove()
	if p.listener != nil {
		p.listener.Close()
		os.Remove(p.socket)
	}
}

// tmpfs returns the tmpfs to mount on a worker's scratch folder, nil when a watcher bounds it
// instead.
func (s *Sandbox) tmpfs(dir string, size int64) *scratchTmpfs {
	if s.noTmpfs != nil || size <= 0 || dir == "" {
		return nil
	}
	t := &scratchTmpfs{Path: dir, Size: size}
	if s.cred != nil {
		t.UID, t.GID = s.cred.Uid, s.cred.Gid
	}
	return t
}

// prepareScratch empties the worker's scratch folder, owned by the worker's account.
func (s *Sandbox) prepareScratch(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("scratch folder: %v", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("scratch folder: %v", err)
	}
	if s.cred != nil {
		return os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid))
	}
	return nil
}

// Pid is the launcher's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// State describes how the worker exited, once Wait has returned.
func (p *Process) State() string { return p.cmd.ProcessState.String() }

// Wait waits for the worker and its launcher to exit, then stops whatever is left of it and
// removes its scratch folder.
func (p *Process) Wait() error {
	err := p.cmd.Wait()
	p.unwatch()
	p.group.stop()
	p.release()
	removeScratch(p.scratch)
	return err
}

// Socket is the path of the worker's listener in an isolated network, "" otherwise.
func (p *Process) Socket() string { return p.socket }

// Pending reports whether connections wait on the worker's listener that it has not
// accepted; always false without one.
func (p *Process) Pending() bool { return p.listener != nil && pending(p.listener) }

// Terminate asks the worker to stop; its launcher ends every descendant after a grace period.
func (p *Process) Terminate() { _ = p.cmd.Process.Signal(syscall.SIGTERM) }

// Kill stops the worker and everything it started at once.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.group.stop()
}

func killPID(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// syscallAlive reports whether a process exists.
func syscallAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }
