// Package cron runs workers' cron triggers: at each tick of a trigger of a worker's active
// version it sends the trigger's request the way an unpinned request is served (through the
// Dispatch the Caddy glue gives it), records the run in the key store and counts it. In a
// cluster the instance holding the lease on the primary runs the ticks, and each tick's row
// is unique, so a tick runs once per cluster; an instance that cannot reach the primary runs
// none. Missed ticks are not replayed, and a tick that comes while the trigger's previous run
// has not ended is skipped and recorded as such.
package cron

import (
	"context"
	"crypto/rand"
	"errors"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/lifecycle"
	"github.com/caddy-runtime/runtime/internal/metrics"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// The lease: taken for LeaseTTL and renewed every LeaseRenew; its holder stops running ticks
// leaseMargin before the lease it last renewed would expire, so two instances never both
// believe they hold it (given clocks in step), and the unique rows of the ticks guard the rest.
const (
	LeaseTTL    = 3 * time.Second
	LeaseRenew  = time.Second
	leaseMargin = 500 * time.Millisecond
	// refreshEvery bounds how long a new version's triggers or a pause made through another
	// instance take to be seen.
	refreshEvery = time.Second
	// recordTimeout bounds the writes of a run's outcome once its request has ended.
	recordTimeout = 5 * time.Second
)

// Request is a tick's request to a worker.
type Request struct {
	Worker, Trigger, Method, Path string
	// RequestID is the request's correlation id (X-Request-Id), kept with the run.
	RequestID string
}

// Dispatch sends a tick's request as an unpinned request to the worker is served, until ctx
// ends, and returns the answer's status, or an error when none came.
type Dispatch func(ctx context.Context, req Request) (status int, err error)

// Options configure a Scheduler.
type Options struct {
	Workers     *packages.Catalog
	Activations *workers.Activations
	// Keys returns the key store, nil while it is not open.
	Keys func() *keystore.Store
	// Instance returns this instance's id, which the lease and the runs name.
	Instance func() string
	// Clustered: instances share the primary, so the lease decides which runs the ticks;
	// otherwise this instance runs them all.
	Clustered bool
	// Dispatch returns how ticks are sent, nil while no site serves workers.
	Dispatch func() Dispatch
	Metrics  *metrics.Set
	Logger   *zap.Logger
}

// Scheduler runs the ticks. Start and Stop make it a lifecycle.Subsystem.
type Scheduler struct {
	opts       Options
	loop, keep lifecycle.Loop
	wake       chan struct{}
	running    sync.WaitGroup
	// undispatched is set once the lack of a site serving workers was logged.
	undispatched atomic.Bool

	mu        sync.Mutex
	heldUntil time.Time                        // the lease is held until then (monotonic); zero: not held
	away      bool                             // the last attempt to take the lease failed
	paused    map[string]bool                  // the workers whose triggers are paused
	entries   map[string]*entry                // by entryKey
	manifests map[uint64][]workers.CronTrigger // the triggers of a read of a version's metadata, by its serial
}

// entry is one trigger of a worker's active version.
type entry struct {
	worker  string
	trigger workers.CronTrigger
	next    time.Time
	busy    bool // its run has not ended; under Scheduler.mu
}

// New returns a Scheduler; Start starts it.
func New(opts Options) *Scheduler {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Scheduler{opts: opts, wake: make(chan struct{}, 1), paused: map[string]bool{},
		entries: map[string]*entry{}, manifests: map[uint64][]workers.CronTrigger{}}
}

// Start starts the lease loop and the ticks.
func (s *Scheduler) Start() error {
	s.keep.Go(s.keepLease)
	s.loop.Go(s.run)
	return nil
}

// Stop stops the ticks, waits for the runs under way (their requests are cancelled) and gives
// the lease up, so another instance takes over at its next attempt.
func (s *Scheduler) Stop() error {
	s.loop.Stop()
	s.running.Wait()
	return s.keep.Stop()
}

// Changed makes the scheduler read the pauses and the workers' triggers again now: a pause or
// resume was just written.
func (s *Scheduler) Changed() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Holds reports whether this instance runs the ticks now.
func (s *Scheduler) Holds() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holdsLocked()
}

func (s *Scheduler) holdsLocked() bool {
	return !s.opts.Clustered || time.Now().Before(s.heldUntil)
}

// keepLease takes and renews the lease (in a cluster) and reads the pauses, until ctx ends;
// then it releases the lease. The holder renews every LeaseRenew; the others try twice as
// often, so a lease given up is taken within about half of it.
func (s *Scheduler) keepLease(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			s.release()
			return
		case <-timer.C:
		}
		s.renew(ctx)
		wait := LeaseRenew
		if s.opts.Clustered && !s.Holds() {
			wait = LeaseRenew / 2
		}
		timer.Reset(wait)
	}
}

// renew takes or renews the lease once and reads the pauses.
func (s *Scheduler) renew(ctx context.Context) {
	store := s.opts.Keys()
	if store == nil {
		return
	}
	if s.opts.Clustered {
		began := time.Now()
		held, err := store.Cron.Acquire(ctx, s.opts.Instance(), LeaseTTL)
		s.mu.Lock()
		// Said once when the primary goes and once when it is back, not at every attempt.
		switch away := err != nil && ctx.Err() == nil; {
		case away && !s.away:
			s.opts.Logger.Warn("cron: the key store primary cannot be reached; this instance runs no cron tick until it is back", zap.Error(err))
		case !away && s.away:
			s.opts.Logger.Info("cron: the key store primary is reached again")
		}
		s.away = err != nil
		was := s.holdsLocked()
		s.heldUntil = time.Time{}
		if held && err == nil {
			s.heldUntil = began.Add(LeaseTTL - leaseMargin)
		}
		now := s.holdsLocked()
		s.mu.Unlock()
		if was != now {
			s.opts.Logger.Info("cron lease", zap.Bool("held", now), zap.String("instance", s.opts.Instance()))
		}
	}
	s.readPauses(ctx, store)
}

// readPauses reads which workers are paused.
func (s *Scheduler) readPauses(ctx context.Context, store *keystore.Store) {
	paused, err := store.Cron.Paused(ctx)
	if err != nil {
		return // kept as they were; a cluster's instance without its primary runs nothing anyway
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.paused)
	for name := range paused {
		s.paused[name] = true
	}
}

// release gives the lease up, if this instance holds it.
func (s *Scheduler) release() {
	store := s.opts.Keys()
	if !s.opts.Clustered || store == nil || !s.Holds() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	if err := store.Cron.Release(ctx, s.opts.Instance()); err != nil {
		s.opts.Logger.Warn("cron: releasing the lease failed; another instance takes it when it expires", zap.Error(err))
	}
	s.mu.Lock()
	s.heldUntil = time.Time{}
	s.mu.Unlock()
}

// run fires the ticks until ctx ends.
func (s *Scheduler) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			if store := s.opts.Keys(); store != nil {
				s.readPauses(ctx, store)
			}
		case <-timer.C:
		}
		now := time.Now()
		s.refresh(now)
		s.fireDue(ctx, now)
		timer.Reset(s.untilNext(time.Now()))
	}
}

// untilNext is how long to wait for the next tick, at most refreshEvery.
func (s *Scheduler) untilNext(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	wait := refreshEvery
	for _, e := range s.entries {
		if !e.next.IsZero() {
			wait = min(wait, e.next.Sub(now))
		}
	}
	return max(wait, 0)
}

// entryKey tells a trigger of a worker apart from every other, and from itself once its
// schedule changed.
func entryKey(worker string, t workers.CronTrigger) string {
	return worker + "\x00" + t.Name + "\x00" + t.Schedule + "\x00" + t.Timezone
}

// refresh makes the entries the triggers of every worker's active version now: a new trigger's
// first tick is the first after now (nothing is replayed), a kept one keeps its next tick.
func (s *Scheduler) refresh(now time.Time) {
	units, err := s.opts.Workers.List()
	if err != nil {
		s.opts.Logger.Warn("cron: listing the workers failed", zap.Error(err))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	serials := map[uint64]bool{}
	for _, u := range units {
		v, ok := workers.ActiveVersion(u, s.opts.Activations.Get(u.Name))
		if !ok {
			continue
		}
		serial := v.Metadata.Serial()
		serials[serial] = true
		triggers, ok := s.manifests[serial]
		if !ok {
			if m, err := workers.ReadManifest(v.Metadata); err == nil {
				triggers = m.Cron
			}
			s.manifests[serial] = triggers
		}
		for _, t := range triggers {
			key := entryKey(u.Name, t)
			seen[key] = true
			e, ok := s.entries[key]
			if !ok {
				e = &entry{worker: u.Name, next: t.Next(now)}
				s.entries[key] = e
			}
			e.trigger = t // the same schedule; the path, method or timeout may be new
		}
	}
	for key := range s.entries {
		if !seen[key] {
			delete(s.entries, key)
		}
	}
	for serial := range s.manifests {
		if !serials[serial] {
			delete(s.manifests, serial)
		}
	}
}

// fireDue fires the entries whose tick has come, in the order of their ticks, and sets each
// one's next tick after now: ticks missed meanwhile are not replayed.
func (s *Scheduler) fireDue(ctx context.Context, now time.Time) {
	s.mu.Lock()
	var due []*entry
	var at []time.Time
	for _, e := range s.entries {
		if !e.next.IsZero() && !e.next.After(now) {
			due = append(due, e)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].next.Before(due[j].next) })
	for _, e := range due {
		at = append(at, e.next)
		e.next = e.trigger.Next(now)
	}
	holds := s.holdsLocked()
	paused := make([]bool, len(due))
	for i, e := range due {
		paused[i] = s.paused[e.worker]
	}
	s.mu.Unlock()
	dispatch := s.dispatch()
	store := s.opts.Keys()
	if holds && dispatch == nil && len(due) > 0 && !s.undispatched.Swap(true) {
		s.opts.Logger.Warn("cron: no site serves workers (serve workers), so no tick is sent; the ticks are not run later")
	}
	if !holds || dispatch == nil || store == nil {
		return
	}
	for i, e := range due {
		if !paused[i] {
			s.fire(ctx, store, dispatch, e, at[i], now)
		}
	}
}

// dispatch is how ticks are sent now, nil while no site serves workers.
func (s *Scheduler) dispatch() Dispatch {
	if s.opts.Dispatch == nil {
		return nil
	}
	return s.opts.Dispatch()
}

// fire runs the tick of e scheduled at, which fired at now: in a goroutine of its own, unless
// e's previous run has not ended, when the tick is recorded as skipped.
func (s *Scheduler) fire(ctx context.Context, store *keystore.Store, dispatch Dispatch, e *entry, at, now time.Time) {
	run := keystore.CronRun{Worker: e.worker, Trigger: e.trigger.Name, ScheduledAt: at.UnixMilli(), StartedAt: now.UnixMilli(),
		Instance: s.opts.Instance(), Status: keystore.CronRunning, RequestID: "cron-" + rand.Text()}
	s.mu.Lock()
	busy := e.busy
	e.busy = true
	s.mu.Unlock()
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		if busy {
			run.Status = keystore.CronSkipped
			run.Error = "the trigger's previous run had not ended; this tick was skipped"
			if claimed, err := store.Cron.Claim(ctx, &run); err == nil && claimed {
				s.opts.Metrics.CronRun(keystore.CronSkipped, 0)
			}
			return
		}
		defer func() {
			s.mu.Lock()
			e.busy = false
			s.mu.Unlock()
		}()
		s.runTick(ctx, store, dispatch, e.trigger, run)
	}()
}

// runTick claims the tick, sends its request and records the outcome.
func (s *Scheduler) runTick(ctx context.Context, store *keystore.Store, dispatch Dispatch, t workers.CronTrigger, run keystore.CronRun) {
	claimed, err := store.Cron.Claim(ctx, &run)
	if err != nil {
		if ctx.Err() == nil {
			s.opts.Logger.Warn("cron: a tick was not run: recording it failed", zap.String("worker", run.Worker), zap.String("trigger", run.Trigger), zap.Error(err))
		}
		return
	}
	if !claimed {
		return // another instance ran it
	}
	rctx, cancel := context.WithTimeout(ctx, time.Duration(t.Timeout))
	began := time.Now()
	status, err := dispatch(rctx, Request{Worker: run.Worker, Trigger: t.Name, Method: t.Method, Path: t.Path, RequestID: run.RequestID})
	took := time.Since(began)
	timedOut := errors.Is(rctx.Err(), context.DeadlineExceeded)
	cancel()
	run.HTTPStatus, run.DurationMS = status, took.Milliseconds()
	switch {
	case timedOut:
		run.Status, run.Error = keystore.CronTimeout, "no answer within the trigger's timeout "+time.Duration(t.Timeout).String()+"; raise the entry's timeout or make the task shorter"
	case err != nil:
		run.Status, run.Error = keystore.CronFailed, err.Error()
	case status >= 400:
		run.Status, run.Error = keystore.CronFailed, "the worker answered "+strconv.Itoa(status)
	default:
		run.Status = keystore.CronOK
	}
	s.opts.Metrics.CronRun(run.Status, took)
	wctx, cancelWrite := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancelWrite()
	if err := store.Cron.Finish(wctx, run); err != nil {
		s.opts.Logger.Warn("cron: recording a run's outcome failed", zap.String("worker", run.Worker), zap.String("trigger", run.Trigger), zap.Error(err))
	}
}
