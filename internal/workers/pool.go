package workers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/databases"
	"github.com/caddy-runtime/runtime/internal/sandbox"
	"github.com/caddy-runtime/runtime/internal/troubleshooting"
)

// PoolOptions configure a Pool.
type PoolOptions struct {
	// Size caps the processes running at once; past it, the least recently used is stopped.
	Size int
	// Logger receives the workers' output and lifecycle.
	Logger *zap.Logger
	// Path is the PATH workers get; nothing else of the runtime's environment reaches them.
	Path string
	// Sandbox confines the processes; nil starts them in a sandbox with default options.
	Sandbox *sandbox.Sandbox
	// ScratchDir holds each process's scratch folder, its TMPDIR, removed when it exits.
	ScratchDir string
	// Allowed tells whether a worker may run as a process; nil allows every worker.
	Allowed func(name string) bool
	// LogRate caps the output lines per second logged for one process (0: DefaultLogRate).
	LogRate int
	// Logs keeps the workers' recent output; nil keeps DefaultLogLines per worker.
	Logs *LogBook
	// Events hears of process starts, crashes and restarts, e.g. to count them; nil hears none.
	Events Events
	// Secrets returns a worker's secrets, by variable name, when a process of it starts: they
	// join its environment, and its logged output shows each value replaced. Nil: none.
	Secrets func(ctx context.Context, worker string) (map[string]string, error)
	// FreshConcurrency caps the fresh processes (workers with ttl: 0, one process a request)
	// running at once, over all workers (worker_fresh_concurrency); 0 is
	// DefaultFreshConcurrency.
	FreshConcurrency int
	// FreshQueue caps the requests waiting for one of them (worker_fresh_queue); 0 is
	// DefaultFreshQueue. Past it a request is refused with a *GateFullError.
	FreshQueue int
	// Databases gives a worker whose manifest says database: true its database when a
	// process of it starts; nil: such a worker cannot start.
	Databases *databases.Manager
	// JS runs JavaScript workers; nil runs none (their start fails).
	JS *JSHost
}

// secretsTimeout bounds the reading of a worker's secrets at its start.
const secretsTimeout = 10 * time.Second

// Events hears of the lifecycle of worker processes. Its methods are called with the pool's
// lock held: they must be quick and must not call back into the pool.
type Events interface {
	ProcessStarted(worker string)
	ProcessCrashed(worker string)
	ProcessRestarted(worker string)
}

// noEvents is the Events of a pool that was given none.
type noEvents struct{}

func (noEvents) ProcessStarted(string)   {}
func (noEvents) ProcessCrashed(string)   {}
func (noEvents) ProcessRestarted(string) {}

// DefaultLogRate is the default cap on logged output lines per second and process.
const DefaultLogRate = 100

// DefaultPoolSize is the default cap on running worker processes.
const DefaultPoolSize = 16

// Pool runs process workers: one process per worker version, started on its first request,
// stopped when idle past its ttl, recycled after maxRequests, restarted with back-off after a
// crash, and drained and stopped when its version is disabled, replaced or removed.
//
// A request to a running process takes no lock: it finds the process in an immutable copy of
// the table, published whole on the rare change (a start, a stop), and counts itself in the
// process's atomic counters. The lock serialises the changes.
type Pool struct {
	opts PoolOptions

	running atomic.Pointer[map[string]*proc] // a copy of procs, for requests

	mu       sync.Mutex
	procs    map[string]*proc    // processes taking requests, by version folder
	live     map[*proc]struct{}  // every process not yet exited, draining ones too
	crashes  map[string]*backoff // recent crashes by version folder
	restarts map[string]int      // restarts after a crash or on request, by version folder
	stopped  sync.WaitGroup      // every process until it has exited
	closed   bool
	quit     chan struct{}
	fresh    *freshGate  // the processes of workers with ttl: 0
	starts   uint64      // processes started, ever
	releaser *time.Timer // runs releaseMemory once the pool has been empty a while (armReleaseLocked)
}

type backoff struct {
	count int
	until time.Time
	// looping is set once the version crash-loops (crashloop.go), whose name and version
	// the pool status then gives.
	looping       bool
	name, version string
}

// ErrPoolClosed means the runtime is shutting down.
var ErrPoolClosed = errors.New("the runtime is shutting down")

// UnavailableError means a worker cannot take requests now: it failed to start, or crashed and
// waits before the next start.
type UnavailableError struct {
	Reason     string
	RetryAfter time.Duration // 0 unless waiting for a restart
}

func (e *UnavailableError) Error() string { return e.Reason }

// ErrNotAllowed means process workers are turned off for the worker's namespace.
var ErrNotAllowed = errors.New("process workers are not allowed for this worker's namespace (setting process_workers)")

// NewPool returns a pool; Close stops its processes.
func NewPool(opts PoolOptions) (*Pool, error) {
	if opts.Size <= 0 {
		opts.Size = DefaultPoolSize
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.LogRate <= 0 {
		opts.LogRate = DefaultLogRate
	}
	if opts.Logs == nil {
		opts.Logs = NewLogBook(0)
	}
	if opts.Events == nil {
		opts.Events = noEvents{}
	}
	if opts.Sandbox == nil {
		sb, err := sandbox.New(sandbox.Options{})
		if err != nil {
			return nil, err
		}
		opts.Sandbox = sb
	}
	sweepScratch(opts.ScratchDir, opts.Logger)
	p := &Pool{opts: opts, procs: map[string]*proc{}, live: map[*proc]struct{}{}, crashes: map[string]*backoff{},
		restarts: map[string]int{}, quit: make(chan struct{}), fresh: newFreshGate(opts.FreshConcurrency, opts.FreshQueue)}
	p.publishLocked()
	go p.reap()
	return p, nil
}

// proc is one worker process.
type proc struct {
	pool    *Pool
	key     string
	name    string
	version string
	dir     string
	m       Manifest
	logger  *zap.Logger
	secrets map[string]string        // its environment's secrets, set by launch
	public  func() map[string]string // PublicEnv, computed once

	network, addr string                   // "tcp" and host:port, or "unix" and the path of the socket it was handed
	port          int                      // its PORT, with network "tcp"
	listeners     atomic.Pointer[[]uint64] // its sockets listening on port (sandbox's CheckListener)
	lostPort      atomic.Bool              // a connection found another listener on its port
	firstConn     atomic.Pointer[net.Conn] // the readiness probe's connection, checked, until a request takes it (Lease.TakeConn)
	pid           atomic.Int64             // set once started, for its output lines
	cmd           *sandbox.Process
	ready         chan struct{}         // closed when started or failed
	err           error                 // why the start failed, set before ready closes
	lateErr       atomic.Pointer[error] // why a process handed its listener never served
	accepted      atomic.Bool           // it was handed its listener and was seen accepting
	exited        chan struct{}         // closed when the process has exited

	// A request changes these without the pool's lock. retiring is set with the lock held,
	// once the process is out of the table; a request that counted itself in inflight and then
	// sees it set leaves (see enter), so the process stops when inflight drops to 0 afterwards.
	inflight atomic.Int64
	served   atomic.Int64
	lastUsed atomic.Int64 // Unix nanoseconds of the last request
	retiring atomic.Bool  // out of the pool: stops once idle
	stopping atomic.Bool  // being stopped on purpose; set once, by whoever stops it

	started time.Time // guarded by pool.mu
}

// Lease is a request's hold on a running process.
type Lease struct {
	p    *proc
	once sync.Once
}

// Network is how to reach the process: "tcp", or "unix" when it runs in a network of its own.
func (l *Lease) Network() string { return l.p.network }

// Addr is the process's host:port, or the path of its unix socket.
func (l *Lease) Addr() string { return l.p.addr }

// Exited is closed once the process has exited.
func (l *Lease) Exited() <-chan struct{} { return l.p.exited }

// TakeConn returns, once, the connection the pool made to the process's port to see it listen,
// checked as CheckConn checks a new one; nil after it was taken, or for a process handed its
// listener. The first request's proxy uses it rather than dialling again.
func (l *Lease) TakeConn() net.Conn {
	if c := l.p.firstConn.Swap(nil); c != nil {
		return *c
	}
	return nil
}

// Err tells, after a request to the process failed, why the process never served: it was
// handed its listener and took the request before it had accepted a connection, then exited
// or passed its startTimeout. It is nil for a process seen accepting.
func (l *Lease) Err() error {
	pr := l.p
	if pr.network != "unix" || pr.accepted.Load() {
		return nil
	}
	// A request waiting in the queue fails when the listener closes, just after the process
	// has exited: the pool hears of the exit right after.
	select {
	case <-pr.exited:
	case <-time.After(time.Second):
		return nil
	}
	if err := pr.lateErr.Load(); err != nil {
		return *err
	}
	if pr.accepted.Load() {
		return nil
	}
	return fmt.Errorf("worker %s@%s did not start: it exited before accepting a connection on its listener, descriptor 3 (%s)",
		pr.name, pr.version, pr.cmd.State())
}

// Serving waits, for a process handed its listener, until it has accepted a connection
// (watchAccept), and tells why it never will when it exits first or passes its startTimeout;
// a process on a port served once it listened, and passes at once.
func (l *Lease) Serving(ctx context.Context) error {
	pr := l.p
	for wait := readyPoll; pr.network == "unix" && !pr.accepted.Load(); wait = min(wait*3/2, readyPollMax) {
		select {
		case <-pr.exited:
			return l.Err()
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	return nil
}

// PID is the process id.
func (l *Lease) PID() int { return l.p.cmd.Pid() }

// CheckConn tells, right after a new connection to the process's port, whether the connection
// reached the process: the sockets listening there must be those it listened on when it
// started, or others it holds (sandbox's StillListens). One that closed its listener, or exited before the pool
// heard of it, left the port to whoever bound it next: the connection must then be closed
// unused, and the process is stopped, the next request starting it on another port.
func (l *Lease) CheckConn() error {
	pr := l.p
	if pr.network != "tcp" {
		return nil
	}
	known := *pr.listeners.Load()
	held, err := pr.cmd.StillListens(pr.port, known)
	if err == nil && len(held) != len(known) {
		pr.listeners.Store(&held)
	}
	select {
	case <-pr.exited:
		if err == nil {
			err = errors.New("it exited")
		}
	default:
	}
	if err == nil {
		return nil
	}
	if pr.lostPort.CompareAndSwap(false, true) {
		var taken *sandbox.PortTakenError
		owner := ""
		if errors.As(err, &taken) {
			owner = taken.Owner
		}
		pr.logger.Warn("the worker's port is no longer its own listener's; stopping the worker, the next request starts it on another port",
			zap.Int("port", pr.port), zap.String("owner", owner), zap.Error(err), troubleshooting.PortTaken.Field())
		p := pr.pool
		p.mu.Lock()
		p.retireLocked(pr)
		p.mu.Unlock()
	}
	return fmt.Errorf("worker %s@%s cannot take requests: %w", pr.name, pr.version, err)
}

// Release ends the request; the process counts it towards maxRequests.
func (l *Lease) Release() { l.once.Do(func() { l.p.pool.release(l.p, true) }) }

// PublicEnv is what an HTML answer of the process may show as window.__env__: the variables
// of its env (the manifest's, its .env merged) named with one of its envPrefix, but for its
// secrets, whatever their name.
func (l *Lease) PublicEnv() map[string]string { return l.p.public() }

// Acquire returns a lease on the running process of the version, starting the process if it is
// not running; concurrent first requests share one start. A worker with ttl: 0 gets a process
// of its own for each request (acquireFresh).
func (p *Pool) Acquire(ctx context.Context, name, version, dir string, m Manifest) (*Lease, error) {
	if p.opts.Allowed != nil && !p.opts.Allowed(name) {
		return nil, ErrNotAllowed
	}
	if m.TTL.Fresh {
		return p.acquireFresh(ctx, name, version, dir, m)
	}
	pr := (*p.running.Load())[dir]
	if pr == nil || !pr.enter() {
		var err error
		if pr, err = p.admit(name, version, dir, m); err != nil {
			return nil, err
		}
	}
	return p.await(ctx, pr)
}

// await waits until pr, on which a request is counted, has started, and leases it.
func (p *Pool) await(ctx context.Context, pr *proc) (*Lease, error) {
	select {
	case <-pr.ready:
	case <-ctx.Done():
		p.release(pr, false)
		return nil, ctx.Err()
	}
	if pr.err != nil {
		p.release(pr, false)
		return nil, &UnavailableError{Reason: pr.err.Error()}
	}
	return &Lease{p: pr}, nil
}

// enter counts a request on pr, unless pr is retiring: then it returns false and the request
// goes to admit.
func (pr *proc) enter() bool {
	pr.inflight.Add(1)
	if pr.retiring.Load() {
		pr.leave()
		return false
	}
	pr.lastUsed.Store(time.Now().UnixNano())
	return true
}

// leave ends a request on pr; the last one out of a retiring process stops it.
func (pr *proc) leave() {
	if pr.inflight.Add(-1) == 0 && pr.retiring.Load() {
		pr.stopOnce()
	}
}

// stopOnce stops pr unless someone already does.
func (pr *proc) stopOnce() {
	if pr.stopping.CompareAndSwap(false, true) {
		go pr.stop()
	}
}

// admit counts a request on the version's process, starting one when there is none, with the
// pool's lock held: a process in the table is not retiring while it is held.
func (p *Pool) admit(name, version, dir string, m Manifest) (*proc, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrPoolClosed
	}
	pr := p.procs[dir]
	var evicted []*proc
	if pr == nil {
		if err := p.refuseLocked(name, version, dir); err != nil {
			p.mu.Unlock()
			return nil, err
		}
		pr = p.newProc(name, version, dir, m)
		p.live[pr] = struct{}{}
		p.putLocked(pr)
		evicted = p.evictLocked(pr)
		p.stopped.Add(1)
		go pr.start()
	}
	pr.inflight.Add(1)
	pr.lastUsed.Store(time.Now().UnixNano())
	p.mu.Unlock()
	for _, e := range evicted {
		e.logger.Info("stopping the least recently used worker: the pool is full", zap.Int("pool_size", p.opts.Size))
	}
	return pr, nil
}

// refuseLocked tells why no process of the version may start now: the pool is closed, or the
// version crashed and waits before its next start.
func (p *Pool) refuseLocked(name, version, dir string) error {
	if p.closed {
		return ErrPoolClosed
	}
	if b := p.crashes[dir]; b != nil && time.Now().Before(b.until) {
		wait := time.Until(b.until)
		return &UnavailableError{Reason: fmt.Sprintf("worker %s@%s crashed; it restarts in %s", name, version, wait.Round(time.Second)), RetryAfter: wait}
	}
	return nil
}

// putLocked makes pr the process of its version and publishes the table.
func (p *Pool) putLocked(pr *proc) {
	p.procs[pr.key] = pr
	p.publishLocked()
}

// dropLocked takes pr out of the table, if it is there, and publishes the table.
func (p *Pool) dropLocked(pr *proc) {
	if p.procs[pr.key] == pr {
		delete(p.procs, pr.key)
		p.publishLocked()
	}
}

// publishLocked hands requests a copy of the table.
func (p *Pool) publishLocked() {
	running := maps.Clone(p.procs)
	p.running.Store(&running)
}

// newProc makes the proc of a process about to start, counted in p.starts. Called with p.mu held.
func (p *Pool) newProc(name, version, dir string, m Manifest) *proc {
	p.starts++
	pr := &proc{
		pool: p, key: dir, name: name, version: version, dir: dir, m: m,
		logger: p.opts.Logger.With(zap.String("worker", name), zap.String("version", version)),
		ready:  make(chan struct{}), exited: make(chan struct{}),
	}
	// Asked only of a leased process, once its start has read its secrets.
	pr.public = sync.OnceValue(func() map[string]string {
		return PublicEnv(pr.m.Env, pr.m.EnvPrefix, func(name string) bool { _, ok := pr.secrets[name]; return ok })
	})
	return pr
}

// release ends a request on pr; served requests count towards maxRequests, and the one that
// reaches it takes the process out of the pool (the lock is taken then only).
func (p *Pool) release(pr *proc, served bool) {
	if served {
		n, max := pr.served.Add(1), int64(pr.m.MaxRequests)
		if n == 1 {
			// Its first answer is out: the spare launcher for the next worker may start now,
			// taking the CPU from no first byte (see sandbox's spareDelay).
			pr.cmd.Serving()
		}
		if max > 0 && n == max {
			p.mu.Lock()
			recycle := !pr.retiring.Load()
			if recycle {
				p.retireLocked(pr)
			}
			p.mu.Unlock()
			if recycle {
				pr.logger.Info("worker served its maxRequests; recycling", zap.Int64("max_requests", max))
			}
		}
	}
	pr.leave()
}

// retireLocked takes pr out of the pool; it stops once its requests are done.
func (p *Pool) retireLocked(pr *proc) {
	p.dropLocked(pr)
	pr.retiring.Store(true)
	if pr.inflight.Load() == 0 {
		pr.stopOnce()
	}
}

// evictLocked stops the least recently used processes past the pool size, sparing keep, and
// returns them.
func (p *Pool) evictLocked(keep *proc) []*proc {
	var evicted []*proc
	for len(p.procs) > p.opts.Size {
		var lru *proc
		for _, pr := range p.procs {
			if pr != keep && (lru == nil || pr.lastUsed.Load() < lru.lastUsed.Load()) {
				lru = pr
			}
		}
		if lru == nil {
			break
		}
		p.retireLocked(lru)
		evicted = append(evicted, lru)
	}
	return evicted
}

// StopUnit drains and stops the processes of a worker's version, or of all its versions when
// version is "": its files changed, or it was disabled or removed.
func (p *Pool) StopUnit(name, version string) {
	p.mu.Lock()
	var stopped []*proc
	for _, pr := range p.procs {
		if pr.name == name && (version == "" || pr.version == version) {
			p.retireLocked(pr)
			stopped = append(stopped, pr)
		}
	}
	p.mu.Unlock()
	for _, pr := range stopped {
		pr.logger.Info("worker changed; draining and stopping its process")
	}
}

// reap stops processes idle past their ttl.
func (p *Pool) reap() {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.quit:
			return
		case now := <-tick.C:
			p.mu.Lock()
			var idle []*proc
			for _, pr := range p.procs {
				if pr.inflight.Load() == 0 && now.UnixNano()-pr.lastUsed.Load() > int64(pr.m.TTL.Duration) {
					p.retireLocked(pr)
					idle = append(idle, pr)
				}
			}
			p.recoverLocked(now)
			p.mu.Unlock()
			for _, pr := range idle {
				pr.logger.Info("worker idle past its ttl; stopping", zap.Duration("ttl", time.Duration(pr.m.TTL.Duration)))
			}
		}
	}
}

// Logs is the log book of the workers' output.
func (p *Pool) Logs() *LogBook { return p.opts.Logs }

// Running returns how many processes are live.
func (p *Pool) Running() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.procs)
}

// Close drains and stops every process and waits for them to exit.
func (p *Pool) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		if p.releaser != nil {
			p.releaser.Stop()
		}
		close(p.quit)
		for _, pr := range p.procs {
			p.retireLocked(pr)
		}
	}
	p.mu.Unlock()
	p.stopped.Wait()
	p.opts.Logs.CloseFollowers()
	p.opts.Sandbox.Close()
}

// start launches the process and waits until it accepts connections; one handed its listener
// is ready at once (see watchAccept).
func (pr *proc) start() {
	defer close(pr.ready)
	var err error
	sb := pr.pool.opts.Sandbox
	if sb.IsolatedNetwork() || pr.m.Listen == ListenSocket && sb.SocketActivation() {
		// The sandbox hands the worker a listener, whose path it tells once started.
		pr.network = "unix"
		var r *run
		if r, err = pr.launch(0, true); err == nil {
			pr.keep(r)
			pr.addr = pr.cmd.Socket()
			err = pr.queueProbe()
		}
	} else {
		pr.network = "tcp"
		err = pr.startOnPort()
	}
	if err != nil {
		pr.err = fmt.Errorf("worker %s@%s did not start: %w", pr.name, pr.version, err)
		pr.logger.Error("worker did not start", zap.Error(err))
		p := pr.pool
		p.mu.Lock()
		p.dropLocked(pr)
		pr.stopping.Store(true)
		pr.retiring.Store(true)
		p.noteCrashLocked(pr)
		p.mu.Unlock()
		if pr.cmd != nil {
			pr.kill() // exitedWith releases it
		} else {
			close(pr.exited)
			p.mu.Lock()
			delete(p.live, pr)
			p.armReleaseLocked()
			p.mu.Unlock()
			p.stopped.Done()
		}
		return
	}
	pr.pool.mu.Lock()
	pr.started = time.Now()
	pr.pool.opts.Events.ProcessStarted(pr.name)
	pr.pool.mu.Unlock()
	pr.logger.Info("worker started", zap.Int("pid", pr.cmd.Pid()), zap.String("addr", pr.addr))
	if pr.network == "unix" {
		go pr.watchAccept()
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portAttempts bounds the ports a start tries when another process listens on the one picked.
const portAttempts = 3

// startOnPort launches the process on a free port and waits until it listens there. Between
// the pick and the worker's bind any process of the host may bind the port; one that did is
// seen (sandbox's CheckListener), and the worker is stopped and started again on another port,
// so no request reaches the other process.
func (pr *proc) startOnPort() error {
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		pr.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		r, err := pr.launch(port, false)
		if err != nil {
			return err
		}
		err = pr.awaitReady(r, port)
		var taken *sandbox.PortTakenError
		if !errors.As(err, &taken) || attempt == portAttempts {
			pr.keep(r)
			return err
		}
		pr.logger.Warn("another process listens on the port picked for the worker; stopping the worker and starting it on another port",
			zap.Int("port", port), zap.String("owner", taken.Owner), zap.Int("attempt", attempt), troubleshooting.PortTaken.Field())
		r.cmd.Kill()
		<-r.exited
	}
}

// run is one launch of a process: start keeps the one that serves, after which its exit is
// the proc's.
type run struct {
	cmd    *sandbox.Process
	exited chan struct{} // closed once it has exited
	err    error         // how it exited, set before exited closes
}

// keep makes r the proc's process: its exit is the proc's exit from now on.
func (pr *proc) keep(r *run) {
	pr.cmd = r.cmd
	go func() {
		<-r.exited
		pr.exitedWith(r.err)
	}()
}

// launch starts the process, confined, in its version folder with a minimal environment.
func (pr *proc) launch(port int, listen bool) (*run, error) {
	var start jsStart
	var err error
	if pr.m.Kind() == JS {
		start, err = pr.pool.opts.JS.start(pr.dir, pr.m)
	} else {
		start.argv, err = pr.argv()
	}
	if err != nil {
		return nil, err
	}
	if src := pr.pool.opts.Secrets; src != nil && pr.secrets == nil {
		ctx, cancel := context.WithTimeout(context.Background(), secretsTimeout)
		pr.secrets, err = src(ctx, pr.name)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("its secrets cannot be read: %w", err)
		}
	}
	scratch := scratchFolder(pr.pool.opts.ScratchDir, pr.name, pr.version)
	limit := newRateLimit(pr.logger, pr.pool.opts.LogRate)
	redact := redactor(pr.secrets)
	output := func(stream string) *lineLog {
		return &lineLog{logger: pr.logger, stream: stream, limit: limit, book: pr.pool.opts.Logs, worker: pr.name, version: pr.version, pid: &pr.pid,
			redact: redact}
	}
	stdout, stderr := output("stdout"), output("stderr")
	spec := sandbox.Spec{Argv: start.argv, Dir: pr.dir, ReadPaths: start.reads, Env: pr.environ(port, scratch, start), Scratch: scratch,
		Limits: pr.m.Limits.sandbox(), OverScratch: pr.overScratch, Listen: listen}
	if pr.m.Database {
		if err := pr.attachDatabase(&spec); err != nil {
			return nil, err
		}
	}
	cmd, err := pr.pool.opts.Sandbox.Start(spec, stdout, stderr)
	if err != nil {
		return nil, err
	}
	pr.pid.Store(int64(cmd.Pid()))
	r := &run{cmd: cmd, exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		stdout.flush()
		stderr.flush()
		r.err = err
		close(r.exited)
	}()
	return r, nil
}

// argv is the command line: the manifest's command, or the executable entrypoint.
func (pr *proc) argv() ([]string, error) {
	if len(pr.m.Command) > 0 {
		return pr.m.Command, nil
	}
	entry := filepath.Clean(filepath.FromSlash(pr.m.Entrypoint))
	if filepath.IsAbs(entry) || entry == ".." || strings.HasPrefix(entry, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("entrypoint %q must be a path inside the worker", pr.m.Entrypoint)
	}
	return []string{filepath.Join(pr.dir, entry)}, nil
}

// environ is all a worker gets: the variables of runtimeVars (PATH, HOME, its PORT and HOST,
// none in an isolated network, port 0, where it serves on the listener it is handed, and
// TMPDIR), a JavaScript engine's defaults (start), the manifest's env, which may set PATH,
// HOME and those defaults, and the worker's secrets. No runtime setting or credential
// reaches it.
func (pr *proc) environ(port int, scratch string, start jsStart) []string {
	env := map[string]string{}
	for _, v := range runtimeVars {
		if v.beforeManifest {
			env[v.name] = v.value(pr, port, scratch)
		}
	}
	maps.Copy(env, start.env)
	for k, sub := range start.scratch {
		env[k] = filepath.Join(scratch, sub)
	}
	for k, v := range pr.m.Env {
		env[k] = v
	}
	// The secrets API refuses the runtime's names, but a secret stored before may hold one:
	// the runtime's value wins (the launcher writes LISTEN_* over any).
	for k, v := range pr.secrets {
		if !processVariable(k) {
			env[k] = v
		}
	}
	for _, v := range runtimeVars {
		if value := v.value(pr, port, scratch); !v.beforeManifest && value != "" {
			env[v.name] = value
		}
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// runtimeVars are the variables the runtime sets for a process worker, the one list that
// environ writes and RuntimeVariable reads. beforeManifest ones are defaults the manifest's
// env may change; the others are written over it, and left out when their value is "".
var runtimeVars = []runtimeVar{
	{"PATH", true, func(pr *proc, _ int, _ string) string { return pr.pool.opts.Path }},
	{"HOME", true, func(pr *proc, _ int, _ string) string { return pr.dir }},
	{"PORT", false, func(_ *proc, port int, _ string) string { return listenPort(port) }},
	{"HOST", false, func(_ *proc, port int, _ string) string { return map[bool]string{true: "127.0.0.1"}[port > 0] }},
	{"TMPDIR", false, func(_ *proc, _ int, scratch string) string { return scratch }},
}

// runtimeVar is a variable the runtime sets for a process worker.
type runtimeVar struct {
	name           string
	beforeManifest bool
	value          func(pr *proc, port int, scratch string) string
}

// listenPort is the PORT of a worker told to listen on port, "" for none (isolated network).
func listenPort(port int) string {
	if port <= 0 {
		return ""
	}
	return strconv.Itoa(port)
}

// RuntimeVariable reports whether the runtime sets the environment variable name for a worker
// of some kind: for a process worker the variables of runtimeVars and LISTEN_* (socket
// activation), for a WebAssembly instance the CGI meta-variables of each request (see
// CGIVariable). A secret of that name is refused for every kind, as the runtime would write
// over it, or it over the runtime, or a visitor's header over it (HTTP_*): one list, whatever
// kind the worker is or becomes with its next version.
func RuntimeVariable(name string) bool {
	return processVariable(name) || CGIVariable(name)
}

// processVariable reports whether the runtime sets name for a process worker.
func processVariable(name string) bool {
	return slices.ContainsFunc(runtimeVars, func(v runtimeVar) bool { return v.name == name }) || strings.HasPrefix(name, sandbox.ListenPrefix)
}

// manifestVariable reports whether a manifest's env may set name: any but those the runtime
// sets (RuntimeVariable), except the defaults runtimeVars lets the manifest change (PATH,
// HOME).
func manifestVariable(name string) bool {
	return !RuntimeVariable(name) || slices.ContainsFunc(runtimeVars, func(v runtimeVar) bool { return v.name == name && v.beforeManifest })
}

// cgiVariables are the meta-variables of RFC 3875 (section 4.1) and those a WebAssembly
// instance gets from the runtime besides (REQUEST_URI, REMOTE_PORT, HTTPS, WORKER_NAME,
// WORKER_VERSION; see serving's wasmEnv), but for HTTP_* (cgiHeaderPrefix). The SERVER_ ones
// are named one by one, so an app's SERVER_URL stays its own.
var cgiVariables = []string{
	"AUTH_TYPE", "CONTENT_LENGTH", "CONTENT_TYPE", "GATEWAY_INTERFACE", "HTTPS", "PATH_INFO", "PATH_TRANSLATED",
	"QUERY_STRING", "REMOTE_ADDR", "REMOTE_HOST", "REMOTE_IDENT", "REMOTE_PORT", "REMOTE_USER", "REQUEST_METHOD",
	"REQUEST_URI", "SCRIPT_NAME", "SERVER_NAME", "SERVER_PORT", "SERVER_PROTOCOL", "SERVER_SOFTWARE",
	"WORKER_NAME", "WORKER_VERSION",
}

// cgiHeaderPrefix starts the variable of each request header line.
const cgiHeaderPrefix = "HTTP_"

// CGIVariable reports whether name is one of CGI's variables, which a WebAssembly instance gets
// from the runtime, as the runtime writes them (in upper case; a lower-case http_proxy is
// nobody's but the worker's).
func CGIVariable(name string) bool {
	return slices.Contains(cgiVariables, name) || strings.HasPrefix(name, cgiHeaderPrefix)
}

// awaitReady waits until the process listens on port, exits, or startTimeout passes. It
// tries again soon at first, a program's start often takes a few milliseconds, then less and
// less often. A port that accepts is the worker's only once CheckListener finds every listener
// on it held by the worker: else it answers a *sandbox.PortTakenError.
func (pr *proc) awaitReady(r *run, port int) error {
	deadline := time.Now().Add(time.Duration(pr.m.StartTimeout))
	for {
		conn, err := net.DialTimeout("tcp", pr.addr, 100*time.Millisecond)
		if err == nil {
			held, err := r.cmd.CheckListener(port)
			if err != nil {
				conn.Close()
				return err
			}
			if len(held) > 0 {
				pr.port = port
				pr.listeners.Store(&held)
				// The first request goes over it: no second connection, nor its check, on
				// the way of a cold start.
				pr.firstConn.Store(&conn)
				return nil
			}
			conn.Close()
		}
		select {
		case <-r.exited:
			return fmt.Errorf("it exited before listening on PORT (%s)", r.cmd.State())
		default:
		}
		pollSleep(readyPoll)
		if time.Now().After(deadline) {
			return fmt.Errorf("it did not listen on PORT %s within startTimeout %s", pr.addr, time.Duration(pr.m.StartTimeout))
		}
	}
}

// The waits between two looks at a starting process: every readyPoll at one starting on PORT,
// from readyPoll growing to readyPollMax at one handed its listener (whose requests wait in
// its queue meanwhile). They are short: a start is seen at most that late, where growing waits
// up to 20 ms, as before, saw a start of 15 ms, Bun's, up to 5 ms late; a look costs a connect
// (a refused one, microseconds: 60 over a 15 ms start) or an atomic load.
const (
	readyPoll    = 250 * time.Microsecond
	readyPollMax = time.Millisecond
)

// queueProbe makes one connection to the listener the process was handed, and closes it: it
// waits in the listener's queue, where the listener takes connections from the start, until
// the process accepts it (see watchAccept).
func (pr *proc) queueProbe() error {
	conn, err := net.DialTimeout("unix", pr.addr, time.Duration(pr.m.StartTimeout))
	if err != nil {
		return err
	}
	return conn.Close()
}

// watchAccept watches a process handed its listener, which takes requests from the moment it
// starts (they wait in the listener's queue): once it has accepted the probe, it is known to
// serve; one that exits before, or has not accepted within startTimeout, is stopped and the
// requests that waited for it answer why (Lease.Err).
func (pr *proc) watchAccept() {
	timeout := time.Duration(pr.m.StartTimeout)
	deadline := time.Now().Add(timeout)
	wait := readyPoll
	for pr.cmd.Pending() {
		select {
		case <-pr.exited:
			return // a crash, counted already; Lease.Err says why

		case <-time.After(wait):
		}
		wait = min(wait*3/2, readyPollMax)
		if time.Now().After(deadline) {
			pr.failLate(fmt.Errorf("it did not accept connections on its listener within startTimeout %s: a worker with listen: socket, "+
				"or under worker_network isolated, gets no PORT and must serve on descriptor 3 (LISTEN_FDS, socket activation)", timeout))
			return
		}
	}
	pr.accepted.Store(true)
}

// failLate records why a process that was taking requests never served, and stops it.
func (pr *proc) failLate(err error) {
	err = fmt.Errorf("worker %s@%s did not start: %w", pr.name, pr.version, err)
	pr.lateErr.Store(&err)
	pr.logger.Error("worker did not start", zap.Error(err))
	p := pr.pool
	p.mu.Lock()
	p.dropLocked(pr)
	pr.retiring.Store(true)
	stop := pr.stopping.CompareAndSwap(false, true)
	if stop {
		p.noteCrashLocked(pr)
	}
	p.mu.Unlock()
	if stop {
		pr.kill()
	}
}

// exitedWith records the process's exit; an exit nobody asked for is a crash.
func (pr *proc) exitedWith(err error) {
	if c := pr.firstConn.Swap(nil); c != nil {
		(*c).Close() // no request took it
	}
	close(pr.exited)
	p := pr.pool
	p.mu.Lock()
	delete(p.live, pr)
	p.armReleaseLocked()
	// A fresh process (ttl: 0) may end by itself once it has answered its one request.
	crashed := !pr.stopping.Load() && !pr.m.TTL.Fresh
	if crashed {
		p.dropLocked(pr)
		pr.retiring.Store(true)
		p.noteCrashLocked(pr)
	}
	p.mu.Unlock()
	if crashed {
		select {
		case <-pr.ready:
			pr.logger.Error("worker crashed; it restarts on a later request", zap.Error(err))
		default: // still starting: start reports it
		}
	}
	p.stopped.Done()
}

// noteCrashLocked backs off restarts of a version that keeps failing; a process that ran for
// a while resets the count.
func (p *Pool) noteCrashLocked(pr *proc) {
	b := p.crashes[pr.key]
	if b == nil || !pr.started.IsZero() && time.Since(pr.started) > stableAfter {
		b = &backoff{}
		p.crashes[pr.key] = b
	}
	b.count++
	p.restarts[pr.key]++ // its next start is a restart
	p.opts.Events.ProcessCrashed(pr.name)
	wait := time.Duration(1<<min(b.count-1, 5)) * time.Second
	b.until = time.Now().Add(min(wait, 30*time.Second))
	p.crashLoopLocked(pr, b)
}

// stop asks the process to terminate, and kills it and its descendants after a grace period.
func (pr *proc) stop() {
	<-pr.ready
	if pr.cmd == nil {
		return
	}
	pr.cmd.Terminate()
	select {
	case <-pr.exited:
	case <-time.After(5 * time.Second):
		pr.kill()
	}
	pr.logger.Info("worker stopped", zap.Int("pid", pr.cmd.Pid()))
}

func (pr *proc) kill() {
	pr.cmd.Kill()
	<-pr.exited
}
