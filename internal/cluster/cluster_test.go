package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/metrics"
	"github.com/caddy-runtime/runtime/internal/packagestore"
	"github.com/caddy-runtime/runtime/internal/reconcile"
	"github.com/caddy-runtime/runtime/internal/testkit"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// world is what the instances of a test share: a libSQL primary for the desired state and an
// S3-compatible server for the archives.
type world struct {
	primary *testkit.Sqld
	s3      *testkit.S3
	bucket  string
	store   *packagestore.S3
}

const prefix = "units"

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{primary: testkit.StartSqld(t), s3: testkit.StartS3(t)}
	w.bucket = w.s3.Bucket(t, "runtime")
	store, err := packagestore.New(context.Background(), packagestore.Options{Endpoint: w.s3.Endpoint, Bucket: w.bucket,
		Region: w.s3.Region, Prefix: prefix, AccessKeyID: w.s3.AccessKey, SecretAccessKey: w.s3.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	w.store = store
	return w
}

// instance is one runtime instance: a replica of the key store, worker and plugin folders,
// its cluster part, and how often it reloaded its plugins.
type instance struct {
	id               string
	keys             *keystore.Store
	workers, plugins *packages.Catalog
	c                *Cluster
	metrics          *metrics.Set
	reloads          atomic.Int32
	logs             *observer.ObservedLogs
}

// instance starts an instance whose replica pulls every pull (an hour: only when asked);
// adjust changes its options.
func (w *world) instance(t *testing.T, id string, pull time.Duration, adjust ...func(*Options)) *instance {
	t.Helper()
	base := t.TempDir()
	core, logs := observer.New(zapcore.InfoLevel)
	in := &instance{id: id, metrics: metrics.New(), logs: logs}
	keys, err := keystore.OpenSync(context.Background(), filepath.Join(base, "keys.db"),
		keystore.SyncOptions{URL: w.primary.URL, Interval: pull})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close() })
	in.keys = keys
	catalog := func(layout packages.Layout, name string) *packages.Catalog {
		dir := filepath.Join(base, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		c := packages.NewCatalog(layout, []string{dir}, packages.DefaultLimits)
		c.SetRetireDelay(0)
		t.Cleanup(c.Close)
		return c
	}
	in.workers, in.plugins = catalog(packages.WorkerLayout, "workers"), catalog(packages.PluginLayout, "plugins")
	o := Options{Keys: keys, Store: w.store, Workers: in.workers, Plugins: in.plugins,
		Reload: func() { in.reloads.Add(1) }, Interval: 50 * time.Millisecond, ID: id, Address: func() string { return "http://" + id }, Version: "test",
		Metrics: in.metrics, Logger: zap.New(core), RetryMin: time.Nanosecond, RetryMax: time.Nanosecond}
	for _, f := range adjust {
		f(&o)
	}
	in.c, err = New(o)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// run runs the instance's loop until the test ends.
func (in *instance) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); in.c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// publish stages an archive on the instance as an upload does and publishes it.
func (in *instance) publish(t *testing.T, kind string, archive []byte) (packages.Installed, int64, error) {
	t.Helper()
	cat := in.workers
	if kind == keystore.UnitPlugin {
		cat = in.plugins
	}
	s, err := cat.StageWith("unit.tgz", bytes.NewReader(archive), func(packages.Metadata) error { return nil }, packages.StageOptions{KeepArchive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Discard()
	return in.c.Publish(context.Background(), kind, s, keystore.Root())
}

// version returns the installed version of a unit, and whether it is there.
func version(c *packages.Catalog, name, v string) (packages.Version, bool) {
	u, err := c.Lookup(name)
	if err != nil {
		return packages.Version{}, false
	}
	return u.Find(v)
}

func unit(t *testing.T, name, v string, extra ...string) []byte {
	return testkit.TarGz(t, testkit.File{Name: "manifest.yaml", Body: fmt.Sprintf("name: %q\nversion: %s\n%s", name, v, strings.Join(extra, ""))},
		testkit.File{Name: "index.html", Body: name + " " + v})
}

// TestTwoInstances: an upload published on A is installed on A at once and reaches B; a
// disable on B reaches A; a plugin reaches B and is loaded there; a reload asked of A
// reloads B; a removal on A reaches B; both instances list each other with what they applied.
func TestTwoInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	a, b := w.instance(t, "a", 20*time.Millisecond), w.instance(t, "b", 20*time.Millisecond)
	a.run(t)
	b.run(t)

	in, c1, err := a.publish(t, keystore.UnitWorker, unit(t, "app", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := version(a.workers, "app", "1.0.0"); !ok || !v.Enabled || in.Path != v.Path || c1 == 0 {
		t.Fatalf("on A after its publish: %+v %v, installed %+v, change %d", v, ok, in, c1)
	}
	testkit.Eventually(t, "B installs app@1.0.0", 10*time.Second, func() bool {
		v, ok := version(b.workers, "app", "1.0.0")
		return ok && v.Enabled
	})
	if n := a.logs.FilterMessage("cluster: installed").Len(); n != 0 {
		t.Errorf("A downloaded its own upload again (%d installs by its passes)", n)
	}

	c2, err := b.c.SetEnabled(ctx, keystore.UnitRef{Kind: keystore.UnitWorker, Name: "app", Version: "1.0.0"}, false, keystore.Root())
	if err != nil || c2 <= c1 {
		t.Fatalf("disable on B: %d, %v", c2, err)
	}
	if v, _ := version(b.workers, "app", "1.0.0"); v.Enabled {
		t.Fatal("B answered its disable before applying it")
	}
	testkit.Eventually(t, "A disables app@1.0.0", 10*time.Second, func() bool {
		v, ok := version(a.workers, "app", "1.0.0")
		return ok && !v.Enabled
	})

	reloads := b.reloads.Load()
	if _, _, err := a.publish(t, keystore.UnitPlugin, unit(t, "hello", "1.0.0", "base: /hello\n")); err != nil {
		t.Fatal(err)
	}
	if a.reloads.Load() == 0 {
		t.Error("A did not reload after publishing a plugin")
	}
	testkit.Eventually(t, "B installs and loads the plugin", 10*time.Second, func() bool {
		_, ok := version(b.plugins, "hello", "1.0.0")
		return ok && b.reloads.Load() > reloads
	})

	reloads = b.reloads.Load()
	c3, err := a.c.ReloadPlugins(ctx, keystore.Root())
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "B reloads after A's reload request", 10*time.Second, func() bool { return b.reloads.Load() > reloads })

	c4, err := a.c.Remove(ctx, keystore.UnitRef{Kind: keystore.UnitWorker, Name: "app"}, keystore.Root())
	if err != nil || c4 <= c3 {
		t.Fatalf("remove on A: %d, %v", c4, err)
	}
	if _, ok := version(a.workers, "app", "1.0.0"); ok {
		t.Fatal("A answered its removal before applying it")
	}
	testkit.Eventually(t, "B removes app", 10*time.Second, func() bool {
		_, err := b.workers.Lookup("app")
		return err != nil
	})

	testkit.Eventually(t, "each lists both, converged on the removal", 10*time.Second, func() bool {
		for _, in := range []*instance{a, b} {
			got, err := in.c.Instances(ctx)
			if err != nil || got.Change != c4 || len(got.Instances) != 2 {
				return false
			}
			for _, i := range got.Instances {
				if i.AppliedChange != c4 || i.Health != api.InstanceOK || i.Self != (i.ID == in.id) || i.Address != "http://"+i.ID {
					return false
				}
			}
		}
		return true
	})
}

// TestCollectsTheStore: the loop collects the package store. An archive no row refers to,
// older than the grace period, is deleted, and the deletion logged with its count and bytes;
// an archive a live row refers to, as old, stays. With the store away, a collection's
// failure is logged as a warning that holds no secret.
func TestCollectsTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	core, debug := observer.New(zapcore.DebugLevel)
	a := w.instance(t, "a", 20*time.Millisecond, func(o *Options) {
		o.CollectInterval, o.CollectGrace, o.Logger = 20*time.Millisecond, time.Hour, zap.New(core)
	})
	in, _, err := a.publish(t, keystore.UnitWorker, unit(t, "app", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	orphan := unit(t, "never", "1.0.0")
	sum := sha256.Sum256(orphan)
	if err := w.store.Put(ctx, sum, int64(len(orphan)), bytes.NewReader(orphan)); err != nil {
		t.Fatal(err)
	}
	live, dead := w.s3.Object(w.bucket, prefix+"/sha256/"+in.SHA256), w.s3.Object(w.bucket, prefix+"/sha256/"+hex.EncodeToString(sum[:]))
	old := time.Now().Add(-2 * time.Hour)
	for _, f := range []string{live, dead} {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	a.run(t)
	testkit.Eventually(t, "the orphan is collected", 10*time.Second, func() bool {
		_, err := os.Stat(dead)
		return errors.Is(err, os.ErrNotExist)
	})
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("the archive of app@1.0.0 was collected: %v", err)
	}
	testkit.Eventually(t, "the collection is logged", 10*time.Second, func() bool {
		return debug.FilterMessage("cluster: deleted the archives no unit version refers to any longer from the package store").
			FilterLevelExact(zapcore.InfoLevel).FilterField(zap.Int("objects", 1)).FilterField(zap.Int64("bytes", int64(len(orphan)))).Len() == 1
	})
	if got := debug.FilterMessage("cluster: deleted an archive from the package store").
		FilterField(zap.String("sha256", hex.EncodeToString(sum[:]))).Len(); got != 1 {
		t.Errorf("%d debug lines for the deleted archive, want 1", got)
	}

	deletions := func() int {
		return debug.FilterMessage("cluster: deleted the archives no unit version refers to any longer from the package store").Len()
	}
	a.c.collected(reconcile.Collected{Kept: []reconcile.KeptObject{{Reason: reconcile.KeptLive}}}, nil)
	if n := deletions(); n != 1 {
		t.Errorf("%d collections logged a deletion; only the first deleted anything", n)
	}

	w.s3.Stop()
	failed := func() []observer.LoggedEntry {
		return debug.FilterMessage("cluster: could not collect the package store; the next collection tries again").
			FilterLevelExact(zapcore.WarnLevel).All()
	}
	testkit.Eventually(t, "a failed collection is logged", 10*time.Second, func() bool { return len(failed()) > 0 })
	for _, e := range failed() {
		if line := fmt.Sprint(e.Message, e.ContextMap()); strings.Contains(line, w.s3.SecretKey) || !strings.Contains(line, "unavailable") {
			t.Fatalf("the failure's warning: %s", line)
		}
	}
	if n := deletions(); n != 1 {
		t.Errorf("%d collections logged a deletion; only the first deleted anything", n)
	}
}

// TestPublishStoreDown: with the package store stopped, Publish fails with the store's
// class and writes nothing: no row, no tree.
func TestPublishStoreDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	a := w.instance(t, "a", time.Hour)
	w.s3.Stop()
	_, _, err := a.publish(t, keystore.UnitWorker, unit(t, "app", "1.0.0"))
	if !errors.Is(err, packagestore.ErrUnavailable) {
		t.Fatalf("publish with the store down = %v, want ErrUnavailable", err)
	}
	if rows, err := a.keys.Units.Versions(ctx); err != nil || len(rows) != 0 {
		t.Errorf("rows after the refused publish: %+v, %v", rows, err)
	}
	if units, err := a.workers.List(); err != nil || len(units) != 0 {
		t.Errorf("installed after the refused publish: %+v, %v", units, err)
	}
}

// TestAlteredObject: an object altered in the store is refused by B: the version it already
// has keeps serving, the failure is logged, audited and counted once however often it is
// retried, and B says it is degraded and has not applied the change.
func TestAlteredObject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	a, b := w.instance(t, "a", time.Hour), w.instance(t, "b", time.Hour)
	if _, _, err := a.publish(t, keystore.UnitWorker, unit(t, "app", "1.0.0")); err != nil {
		t.Fatal(err)
	}
	if !b.keys.Units.Refresh(ctx) {
		t.Fatal("B could not pull")
	}
	if res, err := b.c.pass(ctx, keystore.UnitWorker, "app"); err != nil || len(res.Installed) != 1 {
		t.Fatalf("B's first pass: %+v, %v", res, err)
	}
	in, c2, err := a.publish(t, keystore.UnitWorker, unit(t, "app", "2.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	object := w.s3.Object(w.bucket, prefix+"/sha256/"+in.SHA256)
	body, err := os.ReadFile(object)
	if err != nil {
		t.Fatal(err)
	}
	body[len(body)/2] ^= 0xff
	if err := os.WriteFile(object, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if !b.keys.Units.Refresh(ctx) {
		t.Fatal("B could not pull")
	}
	for i := range 3 {
		res, err := b.c.pass(ctx, keystore.UnitWorker, "app")
		if err != nil || len(res.Failed) != 1 || res.Failed[0].Class != "corrupt" || res.Failed[0].Attempts != i+1 || res.Applied >= c2 {
			t.Fatalf("B's pass %d: %+v, %v", i+1, res, err)
		}
	}
	if _, ok := version(b.workers, "app", "2.0.0"); ok {
		t.Fatal("B installed the altered archive")
	}
	if v, ok := version(b.workers, "app", "1.0.0"); !ok || !v.Enabled {
		t.Fatal("B's version 1.0.0 no longer serves")
	}
	entries, _, err := b.keys.Audit.List(ctx, keystore.AuditQuery{Action: AuditAction})
	if err != nil || len(entries) != 1 || entries[0].Target != "app@2.0.0" || entries[0].Outcome != "failed" ||
		entries[0].Details["class"] != "corrupt" || entries[0].Details["instance"] != "b" {
		t.Fatalf("audit entries: %+v, %v", entries, err)
	}
	if err := testutil.CollectAndCompare(b.metrics, strings.NewReader(`
# HELP runtime_reconcile_failures_total Cluster mode: unit versions this instance failed to converge, by kind and class (missing, corrupt, unavailable, store, install); once per unit version and failure, not per retry.
# TYPE runtime_reconcile_failures_total counter
runtime_reconcile_failures_total{class="corrupt",kind="worker"} 1
`), "runtime_reconcile_failures_total"); err != nil {
		t.Fatal(err)
	}
	b.c.mu.Lock()
	health, applied := b.c.health, b.c.applied
	b.c.mu.Unlock()
	if health != api.InstanceDegraded || applied >= c2 {
		t.Errorf("B says %s, applied %d; want degraded, below %d", health, applied, c2)
	}
}

// TestReadyAfterFirstPass: an instance is not ready before its first pass, and is after it.
func TestReadyAfterFirstPass(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.instance(t, "a", time.Hour)
	select {
	case <-a.c.Ready():
		t.Fatal("ready before any pass")
	default:
	}
	a.run(t)
	select {
	case <-a.c.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("not ready 10s after Run began")
	}
}

// TestMissingWorker: a worker uploaded elsewhere is installed here when a request names it,
// before the next pull, though the pull it asks for also starts a pass of the loop; a name
// nobody uploaded runs no pass.
func TestMissingWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	a, b := w.instance(t, "a", time.Hour), w.instance(t, "b", time.Hour)
	b.run(t)
	testkit.Eventually(t, "B's first pass", 10*time.Second, func() bool {
		select {
		case <-b.c.Ready():
			return true
		default:
			return false
		}
	})
	if _, _, err := a.publish(t, keystore.UnitWorker, unit(t, "app", "1.0.0")); err != nil {
		t.Fatal(err)
	}
	if !b.c.Missing(ctx, "app") {
		t.Fatal("Missing did not install the worker")
	}
	if _, ok := version(b.workers, "app", "1.0.0"); !ok {
		t.Fatal("app@1.0.0 is not installed on B")
	}
	if b.c.Missing(ctx, "nothing") {
		t.Error("Missing of a name nobody uploaded ran a pass")
	}
}

// TestNoPassBeforeFirstPull: an instance whose replica has never pulled (the primary away at
// its start) runs no pass, which would take the empty replica for an empty desired state and
// remove what the store installed, and is not ready; once the primary is back it is.
func TestNoPassBeforeFirstPull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	w.primary.Stop()
	c := w.instance(t, "c", 20*time.Millisecond)
	if res, err := c.c.pass(ctx, keystore.UnitWorker, "app"); err == nil {
		t.Fatalf("a pass before the first pull: %+v", res)
	}
	select {
	case <-c.c.Ready():
		t.Fatal("ready before the first pull")
	default:
	}
	w.primary.Restart(t)
	testkit.Eventually(t, "a pass once the replica has pulled", 10*time.Second, func() bool {
		_, err := c.c.pass(ctx, keystore.UnitWorker, "app")
		return err == nil
	})
	select {
	case <-c.c.Ready():
	default:
		t.Fatal("not ready after a complete pass")
	}
}
