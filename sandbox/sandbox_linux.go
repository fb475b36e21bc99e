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
}

var sandboxes atomic.Int64

// New prepares the sandbox: it closes the runtime's memory and environment to same-user
// processes, resolves the worker account, probes Landlock and creates the runtime's cgroups.
func New(opts Options) (*Sandbox, error) {
	s := &Sandbox{opts: opts, abi: landlockABI()}
	s.nonDump = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) == nil
	if opts.User != "" {
		cred, err := lookupCredential(opts.User, opts.Group)
		if err != nil {
			return nil, err
		}
		s.cred = cred
	}
	s.readRules = systemRules()
	for _, dir := range opts.ReadDirs {
		s.readRules = append(s.readRules, Rule{dir, llExec})
	}
	s.parent = fmt.Sprintf("%s%d-%d", parentPrefix, os.Getpid(), sandboxes.Add(1))
	s.cg = newCgroups(s.parent)
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
	l := Layers{Launcher: true, NoNewPrivs: true, Capabilities: true, Landlock: s.abi, Cgroup: s.cg.mode, NonDumpable: s.nonDump}
	if err := probeSeccomp(s.cg.v2 != ""); err != nil {
		l.Warnings = append(l.Warnings, "no seccomp filter for process workers ("+err.Error()+"): they can use io_uring, open unix sockets (Caddy's admin socket among them), create namespaces and ptrace")
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
			l.Warnings = append(l.Warnings, "process workers run as root (with every capability dropped); set worker_user to run them under an account of their own")
		}
	}
	if s.abi == 0 {
		l.Warnings = append(l.Warnings, "this kernel has no Landlock: process workers can read every file the runtime's account can, state_dir included")
	}
	if missing := s.cg.missing(); len(missing) > 0 {
		msg := "no cgroup may be created here for " + strings.Join(missing, ", ") + ": those worker limits use rlimits (memory, processes) or none (cpu)"
		if os.Geteuid() == 0 && s.cred == nil {
			msg += ", and the process limit does not hold for workers running as root"
		}
		l.Warnings = append(l.Warnings, msg)
		l.Cgroup = strings.TrimPrefix(l.Cgroup+" + rlimits", " + ")
	}
	for _, private := range s.opts.Private {
		for _, r := range s.readRules {
			if within(private, r.Path) {
				l.Warnings = append(l.Warnings, fmt.Sprintf("%s lies inside %s, which process workers may read; move it elsewhere", private, r.Path))
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
}

// Process is a running worker under its launcher.
type Process struct {
	cmd   *exec.Cmd
	group *group
}

// Start starts the worker of spec under a launcher; its output goes to stdout and stderr.
func (s *Sandbox) Start(spec Spec, stdout, stderr io.Writer) (*Process, error) {
	if err := s.prepareScratch(spec.Scratch); err != nil {
		return nil, err
	}
	l := launch{Argv: spec.Argv, Dir: spec.Dir, Env: spec.Env, ABI: s.abi, Cred: s.cred, Seccomp: s.seccomp}
	l.Rules = append(append([]Rule{{spec.Dir, llExec}}, s.readRules...), Rule{spec.Scratch, llExec | llWrite | unix.LANDLOCK_ACCESS_FS_TRUNCATE})
	g, left, err := s.cg.create(fmt.Sprintf("w%d", s.seq.Add(1)), spec.Limits.Cap(s.opts.Caps))
	if err != nil {
		return nil, err
	}
	l.Cgroup2, l.Cgroup1 = g.v2, g.v1
	l.Rlimits = left
	payload, err := json.Marshal(l)
	if err != nil {
		g.remove()
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		g.remove()
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
	// A descendant that outlives the worker and holds its output open must not stall Wait.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		w.Close()
		g.remove()
		return nil, err
	}
	_, werr := w.Write(payload)
	w.Close()
	if werr != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		g.remove()
		return nil, werr
	}
	return &Process{cmd: cmd, group: g}, nil
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

// Wait waits for the worker and its launcher to exit, then stops whatever is left of it.
func (p *Process) Wait() error {
	err := p.cmd.Wait()
	p.group.stop()
	p.group.remove()
	return err
}

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
