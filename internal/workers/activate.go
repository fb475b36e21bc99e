package workers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/troubleshooting"
	"github.com/caddy-runtime/runtime/packages"
)

// CodeHealthcheckFailed answers an upload or enable whose version was installed or enabled
// but did not pass its check, so it was not activated.
const CodeHealthcheckFailed = "HEALTHCHECK_FAILED"

// CheckError is a version that did not pass its check: why, and the last lines it wrote.
type CheckError struct {
	Name, Version string
	Reason        string
	Output        []LogLine
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("%s@%s was not activated: %s", e.Name, e.Version, e.Reason)
}

// errSuperseded ends a check that a later change of the version made moot.
var errSuperseded = errors.New("a later change of this version ended its check")

// outputTail is how many of a version's last output lines a failed check reports.
const outputTail = 20

// ActivatorOptions configure an Activator.
type ActivatorOptions struct {
	// Workers is the worker catalog whose versions are checked.
	Workers *packages.Catalog
	// Pool starts the processes checked; nil (or returning nil) fails every check of a process
	// worker: the runtime is not running.
	Pool func() *Pool
	// Activations records the outcomes.
	Activations *Activations
	// Logger receives one line per outcome.
	Logger *zap.Logger
	// MaxHeaderSize returns the cap on the head of a health check's answer
	// (worker_max_header_size, the latest config's); nil or 0 is http.Transport's default.
	MaxHeaderSize func() int64
}

// Activator activates new versions of workers on this instance. A version of a process worker
// that is installed or enabled is started at once and takes no unpinned traffic until it
// passes its check: its manifest's healthcheck answering 2xx (asked every HealthcheckInterval
// until its timeout), or without one, listening on PORT within startTimeout. Then it becomes
// the worker's active version; otherwise it is recorded as failed and the version served
// before goes on serving. Static versions have no check: the newest enabled version serves, as
// before health checks.
//
// It hears the catalog's changes (Changed): every instance of a cluster checks the versions
// it installs for itself. The API waits for the outcome (Wait) to answer the upload.
type Activator struct {
	opts ActivatorOptions

	mu     sync.Mutex
	runs   map[string]*checkRun // by name@version: the latest check
	seq    uint64               // checks started
	closed bool
}

// checkRun is one check of a version.
type checkRun struct {
	seq    uint64 // the how-manieth check the Activator started
	done   chan struct{}
	err    error // set before done closes
	cancel context.CancelFunc
}

// NewActivator returns an Activator; hand its Changed to the worker catalog's changes.
func NewActivator(opts ActivatorOptions) *Activator {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Pool == nil {
		opts.Pool = func() *Pool { return nil }
	}
	return &Activator{opts: opts, runs: map[string]*checkRun{}}
}

// Expect records that the version md describes is about to be installed or enabled: a process
// worker's version then takes no unpinned traffic from the moment it is on disk until its
// check passes. Forget undoes it when the change does not happen.
func (a *Activator) Expect(md packages.Metadata) {
	if m, err := ReadManifest(md); err == nil && m.Kind().Runs() && md.Enabled {
		a.opts.Activations.Expect(md.Name, md.Version)
	}
}

// ExpectEnable is Expect for a version about to be enabled: its manifest says enabled: false
// until then.
func (a *Activator) ExpectEnable(md packages.Metadata) {
	md.Enabled = true
	a.Expect(md)
}

// Forget undoes Expect for a change that failed, unless a check of the version runs.
func (a *Activator) Forget(name, version string) {
	a.mu.Lock()
	run := a.runs[name+"@"+version]
	a.mu.Unlock()
	if run != nil {
		select {
		case <-run.done:
		default:
			return
		}
	}
	a.opts.Activations.Unexpect(name, version)
}

// Changed hears a change of the worker catalog: an installed or enabled version is checked
// (a check of it still running is ended first), a disabled or removed one's check ends, and a
// removed one is forgotten.
func (a *Activator) Changed(ch packages.Change) {
	switch ch.Op {
	case packages.OpInstalled, packages.OpEnabled:
		if ch.Version != "" {
			a.start(ch.Name, ch.Version)
		}
	case packages.OpDisabled:
		a.end(ch.Name, ch.Version, false)
		a.opts.Activations.Unexpect(ch.Name, ch.Version)
	case packages.OpRemoved:
		a.end(ch.Name, ch.Version, true)
		a.opts.Activations.Drop(ch.Name, ch.Version)
	}
}

// Started counts the checks started so far, for CheckSince.
func (a *Activator) Started() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seq
}

// CheckSince starts a check of the version unless one has started since Started returned
// since: a change that left the files as they were (an enable of an enabled version in a
// cluster, whose desired state did not change) is checked all the same.
func (a *Activator) CheckSince(name, version string, since uint64) {
	a.mu.Lock()
	run := a.runs[name+"@"+version]
	a.mu.Unlock()
	if run == nil || run.seq <= since {
		a.start(name, version)
	}
}

// Wait returns the outcome of the latest check of the version: nil when it passed (or was not
// needed), a *CheckError when it failed. It returns at once when no check was started.
func (a *Activator) Wait(ctx context.Context, name, version string) error {
	a.mu.Lock()
	run := a.runs[name+"@"+version]
	a.mu.Unlock()
	if run == nil {
		return nil
	}
	select {
	case <-run.done:
		return run.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// end ends the running checks of the version, or of every version of the worker (""), and
// forgets them when removed.
func (a *Activator) end(name, version string, removed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, run := range a.runs {
		if key == name+"@"+version || version == "" && strings.HasPrefix(key, name+"@") {
			run.cancel()
			if removed {
				delete(a.runs, key)
			}
		}
	}
}

// Close ends every running check, leaving its version held: the next start records it as
// interrupted (Activations.Load).
func (a *Activator) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for _, run := range a.runs {
		run.cancel()
	}
}

// start begins a check of the version, ending the one running.
func (a *Activator) start(name, version string) {
	ctx, cancel := context.WithCancel(context.Background())
	run := &checkRun{done: make(chan struct{}), cancel: cancel}
	key := name + "@" + version
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		cancel()
		return
	}
	if old := a.runs[key]; old != nil {
		old.cancel()
	}
	a.seq++
	run.seq = a.seq
	a.runs[key] = run
	a.mu.Unlock()
	// Held from now, in the changing goroutine: the check settles it (a static version at once).
	a.opts.Activations.Expect(name, version)
	go func() {
		defer cancel()
		run.err = a.check(ctx, name, version)
		close(run.done)
	}()
}

// check activates the version, or records why not.
func (a *Activator) check(ctx context.Context, name, version string) error {
	acts := a.opts.Activations
	log := a.opts.Logger.With(zap.String("worker", name), zap.String("version", version))
	u, err := a.opts.Workers.Lookup(name)
	v, found := u.Find(version)
	if err != nil || !found || !v.Enabled {
		acts.Unexpect(name, version) // gone or disabled meanwhile: nothing to activate
		return nil
	}
	m, err := ReadVersionAt(v.Metadata, v.Path) // the process it starts serves: its .env too
	if err != nil {
		acts.Unexpect(name, version) // admission refuses such a manifest; serving reports it
		return nil
	}
	if !m.Kind().Runs() {
		acts.SettleStatic(name, version)
		return nil
	}
	acts.Expect(name, version)
	pool := a.opts.Pool()
	if pool == nil {
		acts.Unexpect(name, version)
		return &CheckError{Name: name, Version: version, Reason: "the runtime is shutting down"}
	}
	pool.ResetCrashes(name, version, v.Path) // a new check starts it afresh
	began := time.Now()
	var maxHeader int64
	if a.opts.MaxHeaderSize != nil {
		maxHeader = a.opts.MaxHeaderSize()
	}
	reason := probe(ctx, pool, name, version, v.Path, m, maxHeader)
	if ctx.Err() != nil {
		// Ended by a later change, which records what follows (a new check, or no check).
		return &CheckError{Name: name, Version: version, Reason: errSuperseded.Error()}
	}
	if reason == "" {
		acts.Settle(name, version, "")
		log.Info("worker version activated: it passed its check and is served", zap.String("check", checkName(m)),
			zap.Duration("took", time.Since(began).Round(time.Millisecond)))
		return nil
	}
	acts.Settle(name, version, reason)
	pool.StopUnit(name, version) // pinned requests start it again
	out := lastOutput(pool.Logs(), name, version, began)
	log.Warn("worker version failed its check: installed but not activated; the version served before goes on serving",
		zap.String("check", checkName(m)), zap.String("reason", reason), troubleshooting.CheckFailed.Field())
	return &CheckError{Name: name, Version: version, Reason: reason, Output: out}
}

// checkName describes the check a manifest asks for, for logs.
func checkName(m Manifest) string {
	if m.Healthcheck == nil {
		return "listening on PORT"
	}
	return "GET " + m.Healthcheck.Path
}

// probe starts the version's process and checks it; it returns why it failed, "" when it
// passed.
func probe(ctx context.Context, pool *Pool, name, version, dir string, m Manifest, maxHeader int64) string {
	if m.Healthcheck == nil {
		// Acquire waits startTimeout for the process to listen.
		lease, err := pool.Acquire(ctx, name, version, dir, m)
		if err != nil {
			return err.Error()
		}
		defer lease.Release()
		// A JavaScript worker handed its listener is ready at once, yet its module may still
		// fail to load (no fetch, a throw at the top): it passes once it accepts.
		if m.Kind() == JS {
			if err := lease.Serving(ctx); err != nil {
				return err.Error()
			}
		}
		return ""
	}
	hc := m.Healthcheck
	timeout := time.Duration(hc.Timeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	reason := ""
	for {
		if reason = askHealth(ctx, pool, name, version, dir, m, maxHeader); reason == "" {
			return ""
		}
		select {
		case <-ctx.Done():
			return fmt.Sprintf("its health check GET %s did not answer 2xx within %s; the last attempt: %s", hc.Path, timeout, reason)
		case <-time.After(HealthcheckInterval):
		}
	}
}

// HeadTooLarge tells whether err is http.Transport's refusal of an answer head past its
// MaxResponseHeaderBytes, which only its words tell.
func HeadTooLarge(err error) bool {
	return err != nil && strings.Contains(err.Error(), "server response headers exceeded")
}

// askHealth asks the version's healthcheck once, starting its process when it is not running;
// it returns why the answer does not pass, "" when it does. Its head is read within maxHeader.
func askHealth(ctx context.Context, pool *Pool, name, version, dir string, m Manifest, maxHeader int64) string {
	lease, err := pool.Acquire(ctx, name, version, dir, m)
	if err != nil {
		return err.Error()
	}
	defer lease.Release()
	network, addr := lease.Network(), lease.Addr()
	client := &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
			DisableKeepAlives:      true,
			MaxResponseHeaderBytes: maxHeader,
		},
		// A redirect is an answer of its own: a 3xx does not pass.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       min(time.Duration(m.Timeout), 10*time.Second),
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost"+m.Healthcheck.Path, nil)
	if err != nil {
		return err.Error()
	}
	req.Header.Set("User-Agent", "caddy-runtime-healthcheck")
	resp, err := client.Do(req)
	switch {
	case HeadTooLarge(err):
		return fmt.Sprintf("GET %s answered headers larger than %d bytes, the limit worker_max_header_size sets", m.Healthcheck.Path, maxHeader)
	case err != nil:
		return fmt.Sprintf("GET %s: %v", m.Healthcheck.Path, errors.Unwrap(err))
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Sprintf("GET %s answered %s", m.Healthcheck.Path, resp.Status)
	}
	return ""
}

// lastOutput is the last lines the version wrote since since.
func lastOutput(book *LogBook, name, version string, since time.Time) []LogLine {
	var out []LogLine
	for _, l := range book.Lines(name, LogQuery{Since: since.Add(-time.Millisecond)}) {
		if l.Version == version {
			out = append(out, l)
		}
	}
	if len(out) > outputTail {
		out = out[len(out)-outputTail:]
	}
	return out
}
