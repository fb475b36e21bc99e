// Package cluster makes the instances sharing a package store and a key store primary
// behave as one runtime (issue 24): every change to an uploaded unit is written to the
// desired state (package keystore) with its archive in the package store (package
// packagestore), never straight to this instance's disk, and each instance converges its
// folders on it (package reconcile), reports each new failure once, reloads its plugins when
// they changed or a reload was asked of any instance, and writes its heartbeat. It knows
// nothing of HTTP or Caddy: the API calls it through handlers.Cluster, the glue drives Run.
package cluster

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/metrics"
	"github.com/caddy-runtime/runtime/internal/packagestore"
	"github.com/caddy-runtime/runtime/internal/reconcile"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// Options configure a Cluster.
type Options struct {
	// Keys is this instance's key store in sync mode: the desired state and the heartbeats.
	Keys *keystore.Store
	// Store holds the archives.
	Store packagestore.Store
	// Workers and Plugins are this instance's catalogs.
	Workers, Plugins *packages.Catalog
	// Admit admits a unit version about to be installed from the store with this instance's
	// policies (see reconcile.Options.Admit); nil admits every one.
	Admit func(kind string, md packages.Metadata) error
	// Reload reloads this instance's plugins (every handler's table); nil reloads nothing.
	Reload func()
	// Interval is how often a pass runs without a signal and the heartbeat is written; an
	// instance not seen for three intervals is gone. 0 is keystore.DefaultSyncInterval.
	Interval time.Duration
	// ID and Version describe this instance in its heartbeats, with Address, where it is
	// reached (it may change with the config); nil Address says none.
	ID, Version string
	Address     func() string
	// Logger receives what the passes did and each new failure; nil logs nothing.
	Logger *zap.Logger
	// Metrics counts the failures; nil counts nothing.
	Metrics *metrics.Set
	// RetryMin and RetryMax bound the back-off of a failing unit (reconcile's defaults: 0).
	RetryMin, RetryMax time.Duration
	// CollectInterval is the mean time between two collections of the package store's
	// archives no unit version refers to any longer, and CollectGrace how long such an
	// archive stays (see reconcile.Collector); 0 is reconcile.DefaultCollectInterval and
	// reconcile.DefaultGrace. Tests shorten them; a grace shorter than
	// packagestore.RefreshAfter could collect an archive an upload is about to refer to.
	CollectInterval, CollectGrace time.Duration
	// Activity counts the requests this instance has taken in (see
	// reconcile.Options.Activity); nil paces every background install.
	Activity func() uint64
}

// AuditAction is the audit trail's action of a unit version an instance failed to converge.
const AuditAction = "unit.reconcile"

// Cluster is this instance's part of the cluster.
type Cluster struct {
	opts Options
	rec  *reconcile.Reconciler

	mu       sync.Mutex
	reloaded int64  // the latest reload request honoured here
	seen     int64  // the latest change number a pass has seen
	applied  int64  // what the heartbeat says this instance has applied
	health   string // what the heartbeat says of it; "" before the first pass
	stuck    bool   // the last pass could not compare (logged once until one can)
	beat     chan struct{}
}

// New returns the cluster part of this instance; nothing runs before Run.
func New(o Options) (*Cluster, error) {
	if o.Keys == nil {
		return nil, errors.New("cluster: no key store")
	}
	if _, ok := o.Keys.Sync(); !ok {
		return nil, errors.New("cluster: the key store is local; a package store needs key_store sync")
	}
	if o.Interval <= 0 {
		o.Interval = keystore.DefaultSyncInterval
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Reload == nil {
		o.Reload = func() {}
	}
	if o.Address == nil {
		o.Address = func() string { return "" }
	}
	rec, err := reconcile.New(reconcile.Options{Desired: pulled{o.Keys}, Store: o.Store, Workers: o.Workers, Plugins: o.Plugins,
		Admit: o.Admit, RetryMin: o.RetryMin, RetryMax: o.RetryMax, Activity: o.Activity})
	if err != nil {
		return nil, err
	}
	// No health until the first pass, which then differs and writes the first heartbeat at once.
	c := &Cluster{opts: o, rec: rec, beat: make(chan struct{}, 1)}
	// The plugins load from disk when the instance starts: the requests made before are honoured.
	c.reloaded, _ = o.Keys.Units.ReloadRequested(context.Background(), keystore.UnitPlugin)
	return c, nil
}

// pulled is the desired state once the replica has pulled from the primary: before, an empty
// replica would read as an empty desired state and a pass would remove every tree installed
// from the store.
type pulled struct{ keys *keystore.Store }

func (p pulled) Versions(ctx context.Context) ([]keystore.UnitVersion, error) {
	if st, _ := p.keys.Sync(); !st.Synced {
		return nil, errors.New("the key store's replica has not pulled from its primary yet")
	}
	return p.keys.Units.Versions(ctx)
}

// Ready is closed once the first pass has completed: until then this instance's folders may
// lag the desired state, and it does not say it is ready.
func (c *Cluster) Ready() <-chan struct{} { return c.rec.Ready() }

// Run converges this instance until ctx ends: a pass at once, on every change of the desired
// state, at retries and every interval, each reported (see report); the heartbeat every
// interval, and after a pass that changed what this instance has applied; and a collection of
// the package store every CollectInterval (see collected). Every instance collects, each at
// its own jittered times: a collection is idempotent, and one instance is never needed.
func (c *Cluster) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { c.heartbeats(ctx) })
	wg.Go(func() {
		// The key store itself, not pulled: Collector refuses a replica that has not pulled
		// or cannot reach its primary now, as its rows may be incomplete.
		reconcile.Collector{Desired: c.opts.Keys.Units, Store: c.opts.Store, Grace: c.opts.CollectGrace,
			Interval: c.opts.CollectInterval}.Run(ctx, c.collected)
	})
	changes, unfollow := c.opts.Keys.Feed.Follow(keystore.UnitsTopic)
	defer unfollow()
	c.rec.Run(ctx, changes, c.opts.Interval, func(res reconcile.Result, err error) { c.report(ctx, res, err) })
	wg.Wait()
}

// pass runs a pass now for a request that waits for the unit kind/name (a change made
// through this instance's API answers once it is applied here): that unit's installs run at
// full speed, the others are left to Run's paced passes (reconcile.Hurry).
func (c *Cluster) pass(ctx context.Context, kind, name string) (reconcile.Result, error) {
	res, err := c.rec.Hurry(ctx, func(k, n string) bool { return k == kind && n == name })
	if ctx.Err() == nil {
		c.report(ctx, res, err)
	}
	return res, err
}

// report logs what a pass did, logs, audits and counts each new failure, reloads the plugins
// when a pass installed one or a reload was asked that this instance has not honoured, and
// updates what the heartbeat says.
func (c *Cluster) report(ctx context.Context, res reconcile.Result, err error) {
	log := c.opts.Logger
	c.mu.Lock()
	applied, was := c.applied, c.stuck // a pass that could not compare changed nothing
	c.stuck = err != nil
	c.mu.Unlock()
	if err != nil {
		if !was {
			log.Warn("cluster: could not compare this instance with the desired state; the folders stay as they are, and it is tried again",
				zap.Error(err))
		}
		c.setState(applied, api.InstanceDegraded, false)
		return
	}
	if was {
		log.Info("cluster: compared with the desired state again")
	}
	for _, done := range []struct {
		what  string
		units []reconcile.Unit
	}{{"installed", res.Installed}, {"removed", res.Removed}, {"enabled", res.Enabled}, {"disabled", res.Disabled}} {
		for _, u := range done.units {
			log.Info("cluster: "+done.what, zap.String("kind", u.Kind), zap.String("unit", u.Name+"@"+u.Version),
				zap.Int64("change", u.Change))
		}
	}
	for _, l := range res.Local {
		if l.New {
			log.Warn("cluster: left alone, installed on this instance only; publish it to the cluster (caddy runtime cluster publish) or remove it",
				zap.String("kind", l.Kind), zap.String("unit", l.Name+"@"+l.Version), zap.String("path", l.Path))
		}
	}
	for _, f := range res.Failed {
		if f.New {
			c.failed(ctx, f)
		}
	}
	requested, rerr := c.opts.Keys.Units.ReloadRequested(ctx, keystore.UnitPlugin)
	if rerr != nil {
		log.Warn("cluster: reading the reload requests", zap.Error(rerr))
	}
	c.mu.Lock()
	reload := requested > c.reloaded
	c.reloaded = max(c.reloaded, requested)
	c.seen = max(c.seen, res.Change, requested)
	c.mu.Unlock()
	// Enables, disables and removals reload through the catalog's events; an install does not.
	if reload || slices.ContainsFunc(res.Installed, func(u reconcile.Unit) bool { return u.Kind == keystore.UnitPlugin }) {
		c.opts.Reload()
	}
	health := api.InstanceOK
	if len(res.Failed) > 0 {
		health = api.InstanceDegraded
	}
	c.setState(res.Applied, health, len(res.Failed) == 0 && len(res.Deferred) == 0)
}

// collected logs what a collection of the package store did: what it deleted, when it
// deleted anything, and each failure; nothing when it deleted nothing. A collection that
// failed is tried again at the next one.
func (c *Cluster) collected(res reconcile.Collected, err error) {
	log := c.opts.Logger
	if len(res.Deleted) > 0 {
		var size int64
		for _, o := range res.Deleted {
			size += o.Size
			log.Debug("cluster: deleted an archive from the package store", zap.String("sha256", hex.EncodeToString(o.Sum[:])),
				zap.Int64("bytes", o.Size), zap.Time("modified", o.Modified))
		}
		log.Info("cluster: deleted the archives no unit version refers to any longer from the package store",
			zap.Int("objects", len(res.Deleted)), zap.Int64("bytes", size))
	}
	for _, f := range res.Failed {
		log.Warn("cluster: could not delete an archive from the package store; the next collection tries again",
			zap.String("sha256", hex.EncodeToString(f.Sum[:])), zap.Error(f.Err))
	}
	if err != nil {
		log.Warn("cluster: could not collect the package store; the next collection tries again", zap.Error(err))
	}
}

// setState records what the heartbeat says, and asks for one when it changed. With clean
// (nothing failed), the reloads honoured count as applied too.
func (c *Cluster) setState(applied int64, health string, clean bool) {
	c.mu.Lock()
	if clean {
		applied = max(applied, min(c.reloaded, c.seen))
	}
	changed := applied != c.applied || health != c.health
	c.applied, c.health = applied, health
	c.mu.Unlock()
	if changed {
		select {
		case c.beat <- struct{}{}:
		default:
		}
	}
}

// failed logs, audits and counts a unit version that failed to converge here, once.
func (c *Cluster) failed(ctx context.Context, f reconcile.Failure) {
	target := f.Name + "@" + f.Version
	c.opts.Logger.Error("cluster: could not converge a unit version; its old tree, if any, keeps serving and it is retried",
		zap.String("kind", f.Kind), zap.String("unit", target), zap.String("op", string(f.Op)), zap.String("class", string(f.Class)),
		zap.Int64("change", f.Change), zap.Time("retry", f.Retry), zap.Error(f.Err))
	c.opts.Metrics.ReconcileFailure(f.Kind, string(f.Class))
	err := c.opts.Keys.Audit.Append(ctx, keystore.AuditEntry{Action: AuditAction, Target: target, Scope: keystore.NamespaceOf(f.Name),
		Outcome: "failed", Details: map[string]any{"kind": f.Kind, "op": string(f.Op), "class": string(f.Class),
			"change": f.Change, "instance": c.opts.ID, "error": f.Err.Error()}})
	if err != nil {
		c.opts.Logger.Warn("cluster: auditing a failure", zap.Error(err))
	}
}

// heartbeats writes this instance's heartbeat every interval and when its state changed,
// until ctx ends; a primary that is away misses some.
func (c *Cluster) heartbeats(ctx context.Context) {
	tick := time.NewTicker(c.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-c.beat:
		}
		c.mu.Lock()
		in := keystore.Instance{ID: c.opts.ID, Address: c.opts.Address(), Version: c.opts.Version, AppliedChange: c.applied, Health: c.health}
		c.mu.Unlock()
		// Not cut short by the end of ctx: a heartbeat under way completes (the key store would
		// take a canceled one for a primary that is away).
		if err := c.opts.Keys.Heartbeat(context.WithoutCancel(ctx), in); err != nil {
			c.opts.Logger.Debug("cluster: heartbeat not written", zap.Error(err))
		}
	}
}

// Publish puts an upload staged on this instance into the cluster: its archive into the
// package store (the object before the row, so no instance sees a row whose object is
// missing), its live row on the primary with the manifest's enabled state, then the staged
// tree installed here without a download. It returns the install and the change number. A
// store that cannot take the archive fails it with the store's error class and writes no
// row; a row written is in the desired state even when this instance fails to install it
// (its passes retry).
func (c *Cluster) Publish(ctx context.Context, kind string, s *packages.Staged, by keystore.Principal) (packages.Installed, int64, error) {
	sum, err := packagestore.ParseSum(s.SHA256)
	if err != nil {
		return packages.Installed{}, 0, err
	}
	f, err := s.Archive()
	if err != nil {
		return packages.Installed{}, 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return packages.Installed{}, 0, err
	}
	if err := c.opts.Store.Put(ctx, sum, info.Size(), f); err != nil {
		return packages.Installed{}, 0, fmt.Errorf("storing the archive of %s@%s: %w", s.Name, s.Version, err)
	}
	row, in, err := c.rec.WriteAndCommit(func() (keystore.UnitVersion, error) {
		row := keystore.UnitVersion{UnitRef: keystore.UnitRef{Kind: kind, Name: s.Name, Version: s.Version},
			SHA256: s.SHA256, Size: info.Size(), Enabled: s.Metadata.Enabled}
		var err error
		row.Change, err = c.opts.Keys.Units.Put(ctx, row, by)
		return row, err
	}, s)
	if err != nil {
		return packages.Installed{}, row.Change, err
	}
	change := row.Change
	if kind == keystore.UnitPlugin {
		c.opts.Reload() // as every other instance does once its pass installed it
	}
	return in, change, nil
}

// SetEnabled writes the enabled state of a unit version (every live version when ref.Version
// is empty) into the desired state and applies it here before it returns the change number.
func (c *Cluster) SetEnabled(ctx context.Context, ref keystore.UnitRef, enabled bool, by keystore.Principal) (int64, error) {
	return c.change(ctx, ref, func() (int64, error) { return c.opts.Keys.Units.SetEnabled(ctx, ref, enabled, by) })
}

// Remove removes a unit version (every version when ref.Version is empty) from the desired
// state and from this instance before it returns the change number.
func (c *Cluster) Remove(ctx context.Context, ref keystore.UnitRef, by keystore.Principal) (int64, error) {
	return c.change(ctx, ref, func() (int64, error) { return c.opts.Keys.Units.Remove(ctx, ref, by) })
}

// change writes a change to the unit of ref to the desired state, then runs a pass, so the
// change is applied here when it returns. A unit version that fails to converge is reported
// by the pass and retried; the change stands.
func (c *Cluster) change(ctx context.Context, ref keystore.UnitRef, write func() (int64, error)) (int64, error) {
	change, err := write()
	if err != nil {
		return 0, err
	}
	if _, err := c.pass(ctx, ref.Kind, ref.Name); err != nil && ctx.Err() == nil {
		c.opts.Logger.Warn("cluster: a change was written but not applied here yet; the next pass applies it",
			zap.Int64("change", change), zap.Error(err))
	}
	return change, nil
}

// ReloadPlugins asks every instance to reload its plugins and reloads them here before it
// returns the change number of the request.
func (c *Cluster) ReloadPlugins(ctx context.Context, by keystore.Principal) (int64, error) {
	change, err := c.opts.Keys.Units.RequestReload(ctx, keystore.UnitPlugin, by)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.reloaded = max(c.reloaded, change)
	c.mu.Unlock()
	c.opts.Reload()
	return change, nil
}

// Missing is told that a request named a worker this instance does not serve: it may have
// been uploaded or enabled elsewhere since the last pull. It asks for a pull (rate-limited
// as for unknown credentials) and, when that brought a change no pass had seen before the
// call, runs a pass (after the one the pull may have started) that installs this worker at
// full speed, the request waiting for it, and leaves the other installs to Run's paced
// passes; it reports whether it did, so the request is resolved again. A worker a paced pass
// has planned or deferred (reconcile.Pending) gets that pass at once, without a pull.
func (c *Cluster) Missing(ctx context.Context, name string) bool {
	// A worker a paced pass has yet to install is in the desired state already: no pull.
	if !c.rec.Pending(keystore.UnitWorker, name) {
		c.mu.Lock()
		seen := c.seen
		c.mu.Unlock()
		if !c.opts.Keys.Units.Refresh(ctx) {
			return false
		}
		latest, err := c.opts.Keys.Units.LatestChange(ctx)
		if err != nil || latest <= seen {
			return false
		}
		c.mu.Lock()
		done := c.seen >= latest // a pass since has seen it: the requests of a burst share it
		c.mu.Unlock()
		if done && !c.rec.Pending(keystore.UnitWorker, name) {
			return true
		}
	}
	_, err := c.pass(ctx, keystore.UnitWorker, name)
	return err == nil
}

// Instances answers GET cluster (handlers.Instances): every instance's last heartbeat as
// this instance holds it, this one's current state, and the desired state's latest change
// number. When the heartbeats cannot be read it returns the error with this instance alone.
func (c *Cluster) Instances(ctx context.Context) (api.Cluster, error) {
	now := time.Now()
	c.mu.Lock()
	self := keystore.Instance{ID: c.opts.ID, Address: c.opts.Address(), Version: c.opts.Version, AppliedChange: c.applied,
		Health: c.health, LastSeen: now.Unix()}
	c.mu.Unlock()
	if st, _ := c.opts.Keys.Sync(); !st.Reachable {
		self.Health = api.InstanceDegraded
	}
	list, err := c.opts.Keys.Instances(ctx)
	change, cerr := c.opts.Keys.Units.LatestChange(ctx)
	if err = errors.Join(err, cerr); err != nil {
		list = nil
	}
	out := api.Cluster{Instances: []api.ClusterInstance{}, Change: change}
	list = append(slices.DeleteFunc(list, func(in keystore.Instance) bool { return in.ID == self.ID }), self)
	slices.SortFunc(list, func(a, b keystore.Instance) int { return strings.Compare(a.ID, b.ID) })
	for _, in := range list {
		health := in.Health
		// last_seen holds whole seconds: a heartbeat at 12:00:00.9 reads as 12:00:00, so up to a
		// second more may have passed without the instance missing one.
		if now.Sub(time.Unix(in.LastSeen, 0)) > 3*c.opts.Interval+time.Second {
			health = api.InstanceGone
		}
		if health != api.InstanceOK && health != api.InstanceGone {
			health = api.InstanceDegraded // "" too: not converged yet
		}
		out.Instances = append(out.Instances, api.ClusterInstance{ID: in.ID, Address: in.Address, Version: in.Version,
			AppliedChange: in.AppliedChange, LastSeen: time.Unix(in.LastSeen, 0).UTC().Format(time.RFC3339),
			Health: health, Self: in.ID == self.ID})
	}
	return out, err
}
