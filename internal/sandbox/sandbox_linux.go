package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/caddy-runtime/runtime/internal/launch"
	"github.com/caddy-runtime/runtime/internal/troubleshooting"
)

// Sandbox starts confined workers.
type Sandbox struct {
	opts      Options
	abi       int
	cg        *cgroups
	parent    string // the runtime's parent cgroup name
	seq       atomic.Int64
	cred      *launch.Cred // nil: workers keep the runtime's account
	layers    Layers
	nonDump   bool
	seccomp   []launch.Filter // the workers' filter, nil without one
	readRules []Rule
	sockets   string // the folder of the workers' listeners
	isolated  bool   // each worker has a network namespace of its own
	noTmpfs   error  // why workers get no tmpfs scratch folder; nil when they do
	// niceSpares: spare launchers start at spareNice, and are given the workers' priority
	// back when taken (the runtime has CAP_SYS_NICE); without it they keep the runtime's.
	niceSpares bool

	mu        sync.Mutex
	spares    []*spare // launchers ready for the next workers, the oldest first
	refilling bool     // a spare is being started
	refills   sync.WaitGroup
	closed    bool
}

var sandboxes atomic.Int64

// New prepares the sandbox: it closes the runtime's memory and environment to same-user
// processes, resolves the worker account, probes Landlock and tmpfs scratch folders, and
// creates the runtime's cgroups.
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
	if opts.IsolateNetwork && os.Geteuid() != 0 {
		return nil, fmt.Errorf("worker_network isolated: the runtime must run as root to give each worker a network namespace of its own")
	}
	s.isolated = opts.IsolateNetwork
	var err error
	if s.sockets, err = socketFolder(); err != nil {
		return nil, err
	}
	s.readRules = systemRules()
	for _, dir := range opts.ReadDirs {
		s.readRules = append(s.readRules, Rule{Path: dir, Access: llExec})
	}
	s.parent = fmt.Sprintf("%s%d-%d", parentPrefix, os.Getpid(), sandboxes.Add(1))
	s.cg = newCgroups(s.parent)
	s.noTmpfs = probeTmpfs()
	s.layers = s.probe()
	s.niceSpares = canRaisePriority()
	return s, nil
}

// canRaisePriority reports whether the runtime may lower a process's nice value
// (CAP_SYS_NICE), which it does when a spare launcher becomes a worker.
func canRaisePriority() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return false
	}
	return data[unix.CAP_SYS_NICE/32].Effective&(1<<(unix.CAP_SYS_NICE%32)) != 0
}

func lookupCredential(name, group string) (*launch.Cred, error) {
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
	return &launch.Cred{UID: uint32(uid), GID: uint32(gid), Groups: []uint32{}}, nil
}

func (s *Sandbox) probe() Layers {
	l := Layers{Launcher: true, NoNewPrivs: true, Capabilities: true, Landlock: s.abi, Cgroup: s.cg.mode, NonDumpable: s.nonDump,
		Network: NetworkHost}
	if s.isolated {
		l.Network = NetworkIsolated
	}
	if err := probeSeccomp(); err != nil {
		l.Warnings = append(l.Warnings, Warning{"no seccomp filter for process workers (" + err.Error() + "): they can use io_uring, open unix sockets (Caddy's admin socket among them), create namespaces and ptrace", troubleshooting.NoSeccomp})
	} else {
		s.seccomp, l.Seccomp = seccompFilter(), seccompRefusals()
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
	if w, ok := descriptorWarning(s.opts.Caps); ok {
		l.Warnings = append(l.Warnings, w)
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

// descriptorWarning warns when one worker may hold more than half the descriptors the runtime
// may open (worker_max_files for each of worker_processes processes): connections to the
// runtime cost it one descriptor each, so such a worker could still fill its limit. Go raised
// the runtime's soft limit to its hard one at start, so the soft limit is what it has.
func descriptorWarning(caps Limits) (Warning, bool) {
	var own unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &own); err != nil || own.Cur == unix.RLIM_INFINITY {
		return Warning{}, false
	}
	files, procs := uint64(caps.Files), uint64(caps.Processes)
	if files > 0 && procs > 0 && files*procs <= own.Cur/2 {
		return Warning{}, false
	}
	worst := "no bound"
	if files > 0 && procs > 0 {
		worst = strconv.FormatUint(files*procs, 10)
	}
	return Warning{fmt.Sprintf("one process worker may hold %s descriptors (worker_max_files %d × worker_processes %d), more than half of the "+
		"runtime's own limit of %d, which its connections to the runtime count against: raise the runtime's limit (LimitNOFILE, ulimit -n) "+
		"or lower worker_max_files", worst, caps.Files, caps.Processes, own.Cur), troubleshooting.DescriptorLimit}, true
}

func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && (len(rel) < 3 || rel[:3] != "../")
}

// Layers reports the layers in force.
func (s *Sandbox) Layers() Layers { return s.layers }

// IsolatedNetwork reports whether each worker runs in a network of its own and serves on the
// listener the sandbox hands it (Process.Socket).
func (s *Sandbox) IsolatedNetwork() bool { return s.isolated }

// SocketActivation reports whether a worker can be handed its listener (Spec.Listen).
func (s *Sandbox) SocketActivation() bool { return true }

// Close stops the spare launcher and removes the runtime's parent cgroups; call it once every
// worker has stopped.
func (s *Sandbox) Close() {
	s.mu.Lock()
	s.closed = true
	spares := s.spares
	s.spares = nil
	s.mu.Unlock()
	for _, sp := range spares {
		sp.discard()
	}
	s.refills.Wait() // a spare being started is discarded, its cgroups removed before their parents
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
	// cgroup is the id of the worker's v2 cgroup, which the kernel names for each socket made
	// in it (CheckListener); 0 without one.
	cgroup uint64
	// The listener the worker was handed (Spec.Listen, an isolated network): the runtime
	// keeps a copy, to see whether the worker accepts, until the worker exits.
	listener *os.File
	socket   string
	endpoint net.Listener // Spec.Endpoint's, closed once the worker has exited
	scratch  string
	unwatch  func() // stops the scratch watcher
	// The read ends of the worker's stdout and stderr, copied to the writers given to Start.
	outputs []*os.File
	copying sync.WaitGroup
	exited  atomic.Bool // Wait saw the launcher exit
	refill  func()      // starts the spare for the next worker (Serving)
	// fallback starts it spareDelay after this worker took its own, should it never serve;
	// Serving stops it, so that it cannot fire during a later worker's start instead.
	fallback *time.Timer
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
	l := launch.Spec{Argv: spec.Argv, Dir: spec.Dir, Env: spec.Env, Cred: s.cred, Tmpfs: s.tmpfs(spec.Scratch, limits.Scratch),
		Seccomp: s.seccomp, Network: s.isolated, Listen: s.isolated || spec.Listen}
	if s.abi > 0 {
		rules := append([]Rule{{Path: spec.Dir, Access: llExec}}, s.readRules...)
		for _, p := range spec.ReadPaths {
			rules = append(rules, Rule{Path: p, Access: llExec})
		}
		rules = append(rules, Rule{Path: spec.Scratch, Access: llExec | llWrite | unix.LANDLOCK_ACCESS_FS_TRUNCATE})
		if spec.Data != "" {
			// Read and write, never execute: no program runs out of a database folder. Files
			// may move and be linked within it (refer): an autoInstall links its cache into
			// node_modules there, and Landlock refuses that with EXDEV otherwise.
			rules = append(rules, Rule{Path: spec.Data, Access: llRead | llWrite | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_REFER})
		}
		l.Landlock = landlockRuleset(s.abi, rules)
	}
	if err := s.prepareData(spec.Data); err != nil {
		return nil, err
	}
	if spec.Data != "" && spec.DataEnv != nil {
		dir := spec.Data
		if s.cred != nil {
			// Another account cannot pass state_dir (0700, the runtime's): the stage, still
			// the runtime's, mounts the folder inside the worker's scratch tmpfs, in the
			// worker's mount namespace alone. A path through a descriptor would not do:
			// SQLite resolves the links of a path, /proc/self/fd's too.
			if l.Tmpfs == nil {
				return nil, errors.New("a worker's database under worker_user needs its scratch folder on a tmpfs (the runtime as root, " +
					"worker_scratch above 0; the start-up log says why there is none), or workers running as the runtime's account")
			}
			dir = filepath.Join(spec.Scratch, ".database")
			l.Bind = &launch.Bind{Source: spec.Data, Target: dir}
		}
		l.Env = append(slices.Clip(l.Env), spec.DataEnv(dir)...)
	}
	sp, fallback, err := s.take()
	if err != nil {
		return nil, err
	}
	// The spare's v2 leaf, which it was cloned into, becomes the worker's, with its limits
	// as the spare has them or written now.
	g, left := sp.group, sp.left
	if sp.limits != limits {
		if g, left, err = s.cg.create(sp.id, limits); err != nil {
			sp.discard()
			return nil, err
		}
	}
	proc := &Process{group: g, cgroup: cgroupID(g.v2), scratch: spec.Scratch, unwatch: func() {}, refill: s.refill, fallback: fallback}
	fail := func(err error) (*Process, error) {
		sp.discard()
		proc.release()
		return nil, err
	}
	if spec.Endpoint != nil {
		if proc.endpoint, err = s.endpointListener(sp.cmd.Process.Pid); err != nil {
			return fail(err)
		}
		l.Env = append(slices.Clip(l.Env), spec.Endpoint(proc.endpoint)...)
	}
	if l.Listen {
		proc.socket = socketPath(s.sockets, sp.id)
		if proc.listener, err = listen(proc.socket); err != nil {
			return fail(err)
		}
	}
	l.Rlimits = rlimits(left)
	payload, err := json.Marshal(l)
	if err != nil {
		return fail(err)
	}
	outR, outW, errR, errW := sp.output[0], sp.output[1], sp.output[2], sp.output[3]
	sp.output = [4]*os.File{} // the worker's from here on
	files := []*os.File{outW, errW}
	if l.Listen {
		files = append(files, proc.listener)
	}
	err = sendLaunch(sp.spec, payload, files)
	sp.spec.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return fail(fmt.Errorf("handing the worker to its launcher: %w", err))
	}
	proc.cmd = sp.cmd
	proc.outputs = []*os.File{outR, errR}
	proc.copying.Add(2)
	go proc.copy(stdout, outR)
	go proc.copy(stderr, errR)
	if l.Tmpfs == nil {
		proc.unwatch = watch(spec, limits.Scratch, proc.Kill)
	}
	proc.unwatch = both(proc.unwatch, watchData(spec, limits.Database, proc.Kill))
	return proc, nil
}

// copy passes one stream of the worker's output on until every writer has closed it.
func (p *Process) copy(w io.Writer, r *os.File) {
	defer p.copying.Done()
	_, _ = io.Copy(w, r)
}

// spare is a launcher started ahead of need, whose stage waits for its launch spec.
type spare struct {
	cmd  *exec.Cmd
	spec *os.File // the runtime's end of the stage's spec socket
	id   string   // the worker's name among the cgroups and sockets
	leaf string   // the v2 cgroup it was cloned into, "" without one
	// group is its cgroups with limits written, and left what they cannot hold (cgroups.create).
	group  *group
	limits Limits
	left   Limits
	v1     []string // the v1 cgroups its stage joins
	flags  uintptr  // the namespaces it was cloned into
	// output is the worker's stdout and stderr, made ahead too: read and write end of each.
	output [4]*os.File
}

// cloneflags are the namespaces a launcher starts in: they are the same for every worker of
// the sandbox, so a spare can be cloned into them before the worker is known. A worker whose
// scratch folder gets no tmpfs has a mount namespace of its own all the same, a copy of the
// runtime's.
func (s *Sandbox) cloneflags() uintptr {
	var flags uintptr
	if s.isolated {
		flags |= syscall.CLONE_NEWNET
	}
	if s.noTmpfs == nil {
		flags |= syscall.CLONE_NEWNS // for scratch tmpfs folders
	}
	return flags
}

// spareDelay is how long after a spare is taken its replacement is started at the latest:
// starting one (the runtime's binary, executed twice) takes the CPU the worker that took it
// needs for its own start, which its first request waits for (bench's BenchmarkJSColdStart:
// started at once, it made a Bun worker's median cold start on two busy cores about 10 ms
// slower). The pool says when the worker has answered its first request (Process.Serving),
// and the replacement starts then if that is sooner: with a fixed delay alone, back-to-back cold starts (ttl: 0) found no spare ready for
// every other one, and waited for a launcher's start besides their own.
var spareDelay = 100 * time.Millisecond

// take returns the spare launcher, or starts one now if none is ready, and has another one
// started for the next worker once this one serves (Process.Serving), or has had spareDelay
// for its start: the timer that does the latter, which Serving stops.
func (s *Sandbox) take() (*spare, *time.Timer, error) {
	flags := s.cloneflags()
	fallback := time.AfterFunc(spareDelay, s.refill)
	for {
		s.mu.Lock()
		var sp *spare
		if len(s.spares) > 0 {
			sp = s.spares[0]
			s.spares = s.spares[1:]
		}
		s.mu.Unlock()
		if sp == nil {
			sp, err := s.newSpare(flags, false)
			return sp, fallback, err
		}
		if sp.flags == flags && sp.alive() {
			return sp, fallback, s.prioritise(sp)
		}
		go sp.discard() // killed from outside, or a test changed the sandbox
	}
}

// spares is how many spare launchers the sandbox keeps ready. Readying one (the runtime's
// binary executed twice, then joining its cgroups, a few RCU grace periods under cgroup v1)
// takes tens of milliseconds on a busy machine: back-to-back cold starts (ttl: 0) each found a
// single spare still starting, and waited for it, where a second one has had a whole start
// to get ready. A pair costs two idle processes, no memory of the runtime's own.
const spares = 2

// refill starts spares in the background, one after the other, until spares are ready,
// unless one is being started.
func (s *Sandbox) refill() {
	s.mu.Lock()
	if s.closed || len(s.spares) >= spares || s.refilling {
		s.mu.Unlock()
		return
	}
	s.refilling = true
	s.refills.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.refills.Done()
		for {
			sp, err := s.newSpare(s.cloneflags(), true)
			s.mu.Lock()
			keep := err == nil && !s.closed && len(s.spares) < spares
			if keep {
				s.spares = append(s.spares, sp)
			}
			more := keep && len(s.spares) < spares
			if !more {
				s.refilling = false
			}
			s.mu.Unlock()
			if err == nil && !keep {
				sp.discard()
			}
			if !more {
				return
			}
		}
	}()
}

// newSpare starts a launcher that waits for a launch spec, cloned into the namespaces and
// into a v2 cgroup leaf of its own, which becomes its worker's: moving a process between
// cgroups later waits for the kernel's RCU grace period, milliseconds. It gets no environment,
// the root folder, and no descriptor but its spec socket (and /dev/null as 0, 1 and 2); its
// own group, so a stop reaches it, and it dies with the runtime. One started ahead of need
// yields the CPU (spareNice) until taken.
func (s *Sandbox) newSpare(flags uintptr, ahead bool) (*spare, error) {
	sp := &spare{id: fmt.Sprintf("w%d", s.seq.Add(1)), flags: flags}
	for _, c := range controllers {
		base := s.cg.bases[c]
		if dir := filepath.Join(base, sp.id); base != "" && base != s.cg.v2 && !slices.Contains(sp.v1, dir) {
			if err := os.Mkdir(dir, 0o755); err != nil {
				sp.removeLeaf()
				return nil, fmt.Errorf("cgroup %s: %w", dir, err)
			}
			sp.v1 = append(sp.v1, dir)
		}
	}
	cmd := exec.Command("/proc/self/exe", append([]string{launch.LauncherArg}, sp.v1...)...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: flags}
	if s.cg.v2 != "" {
		dir := filepath.Join(s.cg.v2, sp.id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			sp.removeLeaf()
			return nil, fmt.Errorf("cgroup %s: %w", dir, err)
		}
		sp.leaf = dir
		leaf, err := os.Open(dir)
		if err != nil {
			sp.removeLeaf()
			return nil, fmt.Errorf("opening cgroup %s: %w", sp.leaf, err)
		}
		defer leaf.Close()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(leaf.Fd())
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		sp.removeLeaf()
		return nil, fmt.Errorf("spec socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "spec"), os.NewFile(uintptr(fds[1]), "spec")
	defer theirs.Close()
	cmd.ExtraFiles = []*os.File{theirs} // launch.SpecFD
	// The limits most workers get, those of a manifest that asks for none, are written now
	// rather than on the way of a start (a few cgroup files: a seventh of a millisecond).
	sp.limits = Limits{}.Cap(s.opts.Caps)
	if sp.group, sp.left, err = s.cg.create(sp.id, sp.limits); err == nil {
		err = sp.makeOutput()
	}
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		ours.Close()
		sp.closeOutput()
		sp.removeLeaf()
		return nil, err
	}
	sp.cmd, sp.spec = cmd, ours
	if ahead && s.niceSpares {
		// Readying a spare (the runtime's binary executed twice) takes tens of milliseconds of
		// CPU, which a worker starting meanwhile, its first request waiting, needs more: on
		// two cores it made the next cold start several milliseconds slower. A spare yields
		// to it. Its stage, forked later, inherits the value.
		_ = unix.Setpriority(unix.PRIO_PGRP, cmd.Process.Pid, spareNice)
	}
	return sp, nil
}

// spareNice is the nice value of a spare launcher and its stage until a worker takes them.
const spareNice = 19

// prioritise gives a spare taken for a worker the workers' priority (the runtime's) back:
// its launcher and its stage, and the worker the stage becomes, in its process group until
// the worker's setsid.
func (s *Sandbox) prioritise(sp *spare) error {
	if !s.niceSpares {
		return nil
	}
	own, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		return fmt.Errorf("the runtime's priority: %w", err)
	}
	// getpriority's raw value is 20 - nice.
	if err := unix.Setpriority(unix.PRIO_PGRP, sp.cmd.Process.Pid, 20-own); err != nil {
		sp.discard()
		return fmt.Errorf("giving the worker's launcher its priority: %w", err)
	}
	return nil
}

// alive reports whether the spare's launcher has not exited, without reaping it.
func (sp *spare) alive() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, sp.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && info.Signo == 0
}

// makeOutput makes the pipes of the worker's stdout and stderr.
func (sp *spare) makeOutput() error {
	for i := 0; i < len(sp.output); i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		sp.output[i], sp.output[i+1] = r, w
	}
	return nil
}

// closeOutput closes the pipes of the worker's output that are still the spare's.
func (sp *spare) closeOutput() {
	for _, f := range sp.output {
		if f != nil {
			f.Close()
		}
	}
	sp.output = [4]*os.File{}
}

// discard stops a spare that will not be used, and removes its cgroup.
func (sp *spare) discard() {
	sp.spec.Close()
	sp.closeOutput()
	_ = syscall.Kill(-sp.cmd.Process.Pid, syscall.SIGKILL)
	_ = sp.cmd.Wait()
	sp.removeLeaf()
}

// removeLeaf removes the spare's cgroups once their processes are gone (the stage may outlive
// the launcher by a moment).
func (sp *spare) removeLeaf() {
	g := &group{dirs: sp.v1}
	if sp.leaf != "" {
		g.dirs = append(g.dirs, sp.leaf)
	}
	g.remove()
}

// sendLaunch writes the launch spec to the stage's socket with the descriptors beside it.
func sendLaunch(sock *os.File, payload []byte, files []*os.File) error {
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	rc, err := sock.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		n, err := unix.SendmsgN(int(fd), payload, unix.UnixRights(fds...), nil, unix.MSG_NOSIGNAL)
		for err == nil && n < len(payload) {
			payload = payload[n:]
			n, err = unix.SendmsgN(int(fd), payload, nil, nil, unix.MSG_NOSIGNAL)
		}
		serr = err
	})
	if err != nil {
		return err
	}
	return serr
}

// release removes what Start made for a worker that has exited or never started.
func (p *Process) release() {
	p.group.remove()
	if p.listener != nil {
		p.listener.Close()
		os.Remove(p.socket)
	}
	if p.endpoint != nil {
		p.endpoint.Close()
	}
}

// endpointListener opens a TCP listener on 127.0.0.1 that the worker whose launcher is pid
// can reach (Spec.Endpoint): in an isolated network, inside its network namespace, which a
// thread of the runtime enters for the moment of the bind, its loopback brought up first (the
// stage's own bringing up comes later); elsewhere, on the host's loopback. The socket stays in
// the namespace it was made in, so it serves there alone. The thread goes back to the
// runtime's namespace afterwards rather than ending: it may be the parent of a spare
// launcher, whose Pdeathsig would kill it with the thread.
func (s *Sandbox) endpointListener(pid int) (net.Listener, error) {
	if !s.isolated {
		return net.Listen("tcp", "127.0.0.1:0")
	}
	type result struct {
		ln  net.Listener
		err error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			res <- result{err: fmt.Errorf("the runtime's network namespace: %w", err)}
			return
		}
		defer own.Close()
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			runtime.UnlockOSThread()
			res <- result{err: fmt.Errorf("the worker's network namespace: %w", err)}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			res <- result{err: fmt.Errorf("entering the worker's network namespace: %w", err)}
			return
		}
		var r result
		if r.err = launch.LoopbackUp(); r.err == nil {
			r.ln, r.err = net.Listen("tcp", "127.0.0.1:0")
		}
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread() // else the thread ends with the goroutine, still locked
		}
		res <- r
	}()
	r := <-res
	return r.ln, r.err
}

// prepareData creates the worker's data folder if it has none yet, owned by the worker's
// account; what it holds is kept.
func (s *Sandbox) prepareData(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("database folder: %w", err)
	}
	if s.cred != nil {
		return os.Chown(dir, int(s.cred.UID), int(s.cred.GID))
	}
	return nil
}

// tmpfs returns the tmpfs to mount on a worker's scratch folder, nil when a watcher bounds it
// instead.
func (s *Sandbox) tmpfs(dir string, size int64) *launch.Tmpfs {
	if s.noTmpfs != nil || size <= 0 || dir == "" {
		return nil
	}
	var uid, gid uint32
	if s.cred != nil {
		uid, gid = s.cred.UID, s.cred.GID
	}
	return &launch.Tmpfs{Path: dir, Options: tmpfsOptions(size, uid, gid)}
}

// rlimits are the limits no cgroup holds, no core dumps, and the open descriptors, which no
// cgroup bounds.
func rlimits(l Limits) []launch.Rlimit {
	out := []launch.Rlimit{{Resource: unix.RLIMIT_CORE, Value: 0}}
	if l.Files > 0 {
		out = append(out, launch.Rlimit{Resource: unix.RLIMIT_NOFILE, Value: uint64(l.Files)})
	}
	if l.Memory > 0 {
		out = append(out, launch.Rlimit{Resource: unix.RLIMIT_DATA, Value: uint64(l.Memory)})
	}
	if l.Processes > 0 {
		out = append(out, launch.Rlimit{Resource: unix.RLIMIT_NPROC, Value: uint64(l.Processes)})
	}
	return out
}

// prepareScratch empties the worker's scratch folder, owned by the worker's account.
func (s *Sandbox) prepareScratch(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("scratch folder: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("scratch folder: %w", err)
	}
	if s.cred != nil {
		return os.Chown(dir, int(s.cred.UID), int(s.cred.GID))
	}
	return nil
}

// Pid is the launcher's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Serving tells the sandbox that the worker serves (the pool calls it once its first answer is
// out): its start needs the CPU no more, so the spare launcher for the next worker starts now
// rather than spareDelay after this one took its own. Calling it again, or for a worker that has exited, costs nothing.
func (p *Process) Serving() {
	if p.fallback != nil {
		p.fallback.Stop()
	}
	if p.refill != nil {
		p.refill()
	}
}

// State describes how the worker exited, once Wait has returned.
func (p *Process) State() string { return p.cmd.ProcessState.String() }

// Wait waits for the worker and its launcher to exit, then stops whatever is left of it and
// removes its scratch folder.
func (p *Process) Wait() error {
	awaitExit(p.cmd.Process.Pid)
	err := p.cmd.Wait()
	p.exited.Store(true)
	// A descendant that outlives the worker and holds its output open must not stall Wait.
	copied := make(chan struct{})
	go func() { p.copying.Wait(); close(copied) }()
	select {
	case <-copied:
	case <-time.After(2 * time.Second):
		for _, f := range p.outputs {
			f.Close()
		}
		<-copied
	}
	for _, f := range p.outputs {
		f.Close()
	}
	p.unwatch()
	p.group.stop()
	p.release()
	removeScratch(p.scratch)
	return err
}

// Socket is the path of the listener the worker was handed (Spec.Listen, or an isolated
// network), "" otherwise.
func (p *Process) Socket() string { return p.socket }

// Pending reports whether connections wait on the worker's listener that it has not
// accepted, or that it never will: it has exited (its listener is closed then); always false
// without one.
func (p *Process) Pending() bool {
	return p.listener != nil && (p.exited.Load() || pending(p.listener))
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
