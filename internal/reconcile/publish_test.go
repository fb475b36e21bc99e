package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/caddy-runtime/runtime/internal/packagestore"
	"github.com/caddy-runtime/runtime/internal/testkit"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// install installs an archive into the instance's folders as an upload did before the
// cluster: no row, no object, no record.
func (in *instance) install(t *testing.T, kind, filename string, archive []byte) packages.Installed {
	t.Helper()
	got, err := in.catalog(kind).Install(filename, bytes.NewReader(archive), func(packages.Metadata) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (in *instance) publish(t *testing.T, dryRun bool) Published {
	t.Helper()
	return in.publishTo(t, in.keys.Units, dryRun)
}

func (in *instance) publishTo(t *testing.T, desired Publisher, dryRun bool) Published {
	t.Helper()
	res, err := Publish(context.Background(), PublishOptions{Desired: desired, Store: in.w.store,
		Workers: in.workers, Plugins: in.plugins, By: keystore.Root(), DryRun: dryRun})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	return res
}

// objects lists the sums of the store's objects.
func (w *world) objects(t *testing.T) []string {
	t.Helper()
	var out []string
	for o, err := range w.store.List(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%x", o.Sum))
	}
	slices.Sort(out)
	return out
}

func conflicts(cs []Conflict) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s %s@%s vs %s@%s", c.Kind, c.Name, c.Version, c.Existing.Name, c.Existing.Version))
	}
	return out
}

// stale is a desired state read before another instance wrote its rows: Publish meets them
// only when it writes.
type stale struct{ keystore.Units }

func (stale) Versions(context.Context) ([]keystore.UnitVersion, error) { return nil, nil }

// TestPublish grows a single instance into a cluster: a dry run writes nothing; Publish
// stores one archive per uploaded tree, writes its row enabled as the manifest says and
// records it, leaving the built-in folders alone; the instance's own pass finds nothing to do,
// a second instance installs exactly the same trees, and publishing again does nothing; a
// publish interrupted before its records completes them; trees whose version the cluster
// holds already (another archive, a removed version, another plugin version) are conflicts,
// never written over, whether read at the start or met at the write.
func TestPublish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	a := w.instance(t, packages.DefaultLimits)
	a.install(t, keystore.UnitWorker, "app.tgz", worker(t, "@team/app", "1.0.0"))
	a.install(t, keystore.UnitWorker, "app.tgz", worker(t, "@team/app", "2.0.0"))
	a.install(t, keystore.UnitPlugin, "hello.zip", plugin(t, "hello", "1.0.0"))
	if err := a.workers.SetEnabled("@team/app", "2.0.0", false); err != nil {
		t.Fatal(err)
	}
	builtIn := filepath.Join(a.base, ".workers", "docs", "1.0.0")
	if err := os.MkdirAll(builtIn, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(builtIn, "manifest.yaml"), []byte("name: docs\nversion: 1.0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.workers.Forget()

	all := []string{"plugin hello@1.0.0", "worker @team/app@1.0.0", "worker @team/app@2.0.0"}
	dry := a.publish(t, true)
	want(t, "dry run", names(dry.Published), all...)
	if latest, _ := a.keys.Units.LatestChange(ctx); latest != 0 || len(w.objects(t)) != 0 {
		t.Fatalf("the dry run wrote: change %d, objects %v", latest, w.objects(t))
	}
	if _, ok := a.record(t, keystore.UnitWorker, "@team/app", "1.0.0"); ok {
		t.Fatal("the dry run recorded a tree")
	}

	res := a.publish(t, false)
	want(t, "published", names(res.Published), all...)
	if len(res.Conflicts)+len(res.Failed)+len(res.Recorded) > 0 {
		t.Fatalf("publish = %+v", res)
	}
	var sums []string
	for i, u := range res.Published {
		if u.SHA256 != dry.Published[i].SHA256 {
			t.Errorf("%s: published archive %s, the dry run packed %s", u.Name, u.SHA256, dry.Published[i].SHA256)
		}
		if sum, ok := a.record(t, u.Kind, u.Name, u.Version); !ok || sum != u.SHA256 {
			t.Errorf("%s@%s recorded as %q, %v", u.Name, u.Version, sum, ok)
		}
		sums = append(sums, u.SHA256)
	}
	slices.Sort(sums)
	want(t, "objects", w.objects(t), sums...)
	rows, err := a.keys.Units.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	enabled := map[string]bool{}
	for _, r := range rows {
		enabled[r.Name+"@"+r.Version] = r.Enabled
		if r.ChangedByID != 0 || !r.Live() {
			t.Errorf("row %+v: want live, by the root key", r)
		}
	}
	if !maps.Equal(enabled, map[string]bool{"@team/app@1.0.0": true, "@team/app@2.0.0": false, "hello@1.0.0": true}) {
		t.Fatalf("rows enabled: %v", enabled)
	}

	if res := a.pass(t); res.Changed() || len(res.Failed)+len(res.Local) > 0 {
		t.Fatalf("the publishing instance's pass = %+v, want nothing to do", res)
	}
	b := w.instance(t, packages.DefaultLimits)
	latest, _ := a.keys.Units.LatestChange(ctx)
	b.sees(t, latest)
	got := b.pass(t)
	want(t, "B installed", names(got.Installed), all...)
	want(t, "B failed", failures(got.Failed))
	for _, u := range res.Published {
		ta, tb := testkit.Tree(t, a.tree(u.Kind, u.Name, u.Version)), testkit.Tree(t, b.tree(u.Kind, u.Name, u.Version))
		if !maps.Equal(ta, tb) {
			t.Fatalf("%s@%s on B = %v, want A's %v", u.Name, u.Version, tb, ta)
		}
	}
	if u, _ := b.workers.Lookup("@team/app"); len(u.Versions) != 2 || !u.Versions[0].Enabled || u.Versions[1].Enabled {
		t.Fatalf("B's versions of @team/app: %+v", u.Versions)
	}
	if _, err := b.workers.Lookup("docs"); err == nil {
		t.Fatal("a built-in worker was published")
	}

	if again := a.publish(t, false); len(again.Published)+len(again.Recorded)+len(again.Conflicts)+len(again.Failed) > 0 {
		t.Fatalf("publishing again = %+v, want nothing", again)
	}
	// Interrupted before the record: the row is found with the same archive, and recorded.
	if err := withRoot(filepath.Join(a.base, "plugins"), func(root *os.Root) error { return removeRecord(root, "hello") }); err != nil {
		t.Fatal(err)
	}
	for _, desired := range []Publisher{a.keys.Units, stale{a.keys.Units}} {
		again := a.publishTo(t, desired, false)
		want(t, "recorded", names(again.Recorded), "plugin hello@1.0.0")
		if len(again.Published)+len(again.Conflicts)+len(again.Failed) > 0 {
			t.Fatalf("publish after an interruption = %+v", again)
		}
		if n, _ := a.keys.Units.LatestChange(ctx); n != latest {
			t.Fatalf("publish after an interruption wrote change %d", n)
		}
		if err := withRoot(filepath.Join(a.base, "plugins"), func(root *os.Root) error { return removeRecord(root, "hello") }); err != nil {
			t.Fatal(err)
		}
	}

	// Another single instance with trees of its own under versions the cluster holds.
	if _, err := a.keys.Units.Remove(ctx, keystore.UnitRef{Kind: keystore.UnitWorker, Name: "@team/app", Version: "2.0.0"}, keystore.Root()); err != nil {
		t.Fatal(err)
	}
	c := w.instance(t, packages.DefaultLimits)
	c.install(t, keystore.UnitWorker, "app.tgz", worker(t, "@team/app", "1.0.0", testkit.File{Name: "c.txt", Body: "C's own"}))
	c.install(t, keystore.UnitWorker, "app.tgz", worker(t, "@team/app", "2.0.0"))
	c.install(t, keystore.UnitPlugin, "hello.zip", plugin(t, "hello", "2.0.0"))
	c.install(t, keystore.UnitWorker, "new.tgz", worker(t, "new", "1.0.0"))
	latest, _ = a.keys.Units.LatestChange(ctx)
	c.sees(t, latest)
	objects := w.objects(t)
	wantConflicts := []string{"worker @team/app@1.0.0 vs @team/app@1.0.0", "worker @team/app@2.0.0 vs @team/app@2.0.0", "plugin hello@2.0.0 vs hello@1.0.0"}
	res = c.publish(t, true)
	want(t, "dry run's conflicts", conflicts(res.Conflicts), wantConflicts...)
	want(t, "dry run", names(res.Published), "worker new@1.0.0")
	res = c.publish(t, false)
	want(t, "conflicts", conflicts(res.Conflicts), wantConflicts...)
	want(t, "published", names(res.Published), "worker new@1.0.0")
	if len(w.objects(t)) != len(objects)+1 {
		t.Fatalf("objects after a publish of conflicts: %v, want one more than %v", w.objects(t), objects)
	}
	// The same met at the write, by a publisher that read the desired state too early.
	if err := withRoot(filepath.Join(c.base, "workers"), func(root *os.Root) error { return removeRecord(root, "new/1.0.0") }); err != nil {
		t.Fatal(err)
	}
	latest, _ = c.keys.Units.LatestChange(ctx)
	res = c.publishTo(t, stale{c.keys.Units}, false)
	want(t, "conflicts at the write", conflicts(res.Conflicts), wantConflicts...)
	want(t, "recorded at the write", names(res.Recorded), "worker new@1.0.0")
	if n, _ := c.keys.Units.LatestChange(ctx); n != latest {
		t.Fatalf("conflicts wrote change %d", n)
	}
	for _, cf := range res.Conflicts {
		if _, ok := c.record(t, cf.Kind, cf.Name, cf.Version); ok {
			t.Errorf("conflicting %s@%s was recorded", cf.Name, cf.Version)
		}
	}
	rows, _ = a.keys.Units.Versions(ctx)
	for _, r := range rows {
		if r.Name == "@team/app" && r.Version == "1.0.0" && r.SHA256 != a.recordOf(t, r) {
			t.Fatalf("the cluster's row of @team/app@1.0.0 was overwritten: %+v", r)
		}
	}
}

// recordOf is the instance's record of a row's tree.
func (in *instance) recordOf(t *testing.T, r keystore.UnitVersion) string {
	sum, _ := in.record(t, r.Kind, r.Name, r.Version)
	return sum
}

// TestPublishStoreDown: with the store unreachable nothing is written to the desired state
// or recorded, one put is tried and the others are reported as not tried.
func TestPublishStoreDown(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.instance(t, packages.DefaultLimits)
	a.install(t, keystore.UnitWorker, "a.tgz", worker(t, "a", "1.0.0"))
	a.install(t, keystore.UnitWorker, "b.tgz", worker(t, "b", "1.0.0"))
	w.s3.Stop()
	res := a.publish(t, false)
	if len(res.Published) > 0 || len(res.Failed) != 2 || !errors.Is(res.Failed[0].Err, packagestore.ErrUnavailable) || !errors.Is(res.Failed[1].Err, packagestore.ErrUnavailable) {
		t.Fatalf("publish with the store down = %+v", res)
	}
	if latest, _ := a.keys.Units.LatestChange(context.Background()); latest != 0 {
		t.Fatalf("rows written with the store down: change %d", latest)
	}
	if _, ok := a.record(t, keystore.UnitWorker, "a", "1.0.0"); ok {
		t.Fatal("a tree was recorded with the store down")
	}
}
