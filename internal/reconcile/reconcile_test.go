package reconcile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/packagestore"
	"github.com/caddy-runtime/runtime/internal/testkit"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// clock is the back-off's clock, moved by the tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// world is what the instances of a test share: a libSQL primary for the desired state, an
// S3-compatible server for the archives, and the back-off's clock.
type world struct {
	primary *testkit.Sqld
	s3      *testkit.S3
	bucket  string
	store   *packagestore.S3
	clock   *clock
}

const prefix = "cluster"

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{primary: testkit.StartSqld(t), s3: testkit.StartS3(t), clock: &clock{t: time.Unix(1_800_000_000, 0)}}
	w.bucket = w.s3.Bucket(t, "units")
	store, err := packagestore.New(context.Background(), packagestore.Options{Endpoint: w.s3.Endpoint, Bucket: w.bucket,
		Region: w.s3.Region, Prefix: prefix, AccessKeyID: w.s3.AccessKey, SecretAccessKey: w.s3.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	w.store = store
	return w
}

// object is the file the S3 server keeps the archive of sum in.
func (w *world) object(sum string) string { return w.s3.Object(w.bucket, prefix+"/sha256/"+sum) }

// instance is one runtime instance as the reconciler sees it: a replica of the desired state,
// worker and plugin folders (a built-in one and an upload one each), and its reconciler.
type instance struct {
	w                *world
	keys             *keystore.Store
	base             string
	workers, plugins *packages.Catalog
	rec              *Reconciler
}

func (w *world) instance(t *testing.T, limits packages.Limits) *instance {
	t.Helper()
	in := &instance{w: w, base: t.TempDir()}
	keys, err := keystore.OpenSync(context.Background(), filepath.Join(in.base, "keys.db"),
		keystore.SyncOptions{URL: w.primary.URL, Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close() })
	in.keys = keys
	catalog := func(layout packages.Layout, name string) *packages.Catalog {
		dirs := []string{filepath.Join(in.base, "."+name), filepath.Join(in.base, name)}
		for _, d := range dirs {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		c := packages.NewCatalog(layout, dirs, limits)
		c.SetRetireDelay(0)
		t.Cleanup(c.Close)
		return c
	}
	in.workers, in.plugins = catalog(packages.WorkerLayout, "workers"), catalog(packages.PluginLayout, "plugins")
	in.rec = in.reconciler(t, keys.Units)
	return in
}

func (in *instance) reconciler(t *testing.T, desired Desired, admit ...func(string, packages.Metadata) error) *Reconciler {
	t.Helper()
	o := Options{Desired: desired, Store: in.w.store, Workers: in.workers, Plugins: in.plugins,
		Now: in.w.clock.now, RetryMin: time.Second, RetryMax: time.Minute}
	if len(admit) > 0 {
		o.Admit = admit[0]
	}
	rec, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func (in *instance) catalog(kind string) *packages.Catalog {
	if kind == keystore.UnitPlugin {
		return in.plugins
	}
	return in.workers
}

// upload does what an upload on this instance does with a package store: stage the archive
// (every check of an upload), put it in the store, write its row, install it here.
func (in *instance) upload(t *testing.T, kind, filename string, archive []byte) keystore.UnitVersion {
	t.Helper()
	s, err := in.catalog(kind).Stage(filename, bytes.NewReader(archive), func(packages.Metadata) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Discard()
	row := in.put(t, kind, s.Name, s.Version, s.Metadata.Enabled, archive)
	if _, err := in.rec.Commit(row, s); err != nil {
		t.Fatal(err)
	}
	return row
}

// put puts archive in the store and writes a row for it, as name@version, without checking
// what the archive holds: what a faulty or hostile instance could publish.
func (in *instance) put(t *testing.T, kind, name, version string, enabled bool, archive []byte) keystore.UnitVersion {
	t.Helper()
	ctx := context.Background()
	sum := sha256.Sum256(archive)
	if err := in.w.store.Put(ctx, sum, int64(len(archive)), bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	row := keystore.UnitVersion{UnitRef: keystore.UnitRef{Kind: kind, Name: name, Version: version},
		SHA256: hex.EncodeToString(sum[:]), Size: int64(len(archive)), Enabled: enabled}
	change, err := in.keys.Units.Put(ctx, row, keystore.Root())
	if err != nil {
		t.Fatal(err)
	}
	row.Change = change
	return row
}

// sees waits until the instance's replica holds change.
func (in *instance) sees(t *testing.T, change int64) {
	t.Helper()
	testkit.EventuallyNil(t, 10*time.Second, func() error {
		if n, err := in.keys.Units.LatestChange(context.Background()); err != nil || n < change {
			return fmt.Errorf("the replica holds change %d (%v), want %d", n, err, change)
		}
		return nil
	})
}

func (in *instance) pass(t *testing.T) Result {
	t.Helper()
	res, err := in.rec.Reconcile(context.Background())
	if err != nil {
		t.Fatalf("pass: %v", err)
	}
	return res
}

// tree is the path of a unit's tree in the instance's upload folder.
func (in *instance) tree(kind, name, version string) string {
	if kind == keystore.UnitPlugin {
		return filepath.Join(in.base, "plugins", filepath.FromSlash(name))
	}
	return filepath.Join(in.base, "workers", filepath.FromSlash(name), version)
}

// record returns the instance's record of a unit's tree, and whether there is one.
func (in *instance) record(t *testing.T, kind, name, version string) (string, bool) {
	t.Helper()
	dir, layout := filepath.Join(in.base, "workers"), packages.WorkerLayout
	if kind == keystore.UnitPlugin {
		dir, layout = filepath.Join(in.base, "plugins"), packages.PluginLayout
	}
	var sum string
	var ok bool
	if err := withRoot(dir, func(root *os.Root) (err error) {
		sum, ok, err = readRecord(root, layout.RelPath(name, version))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return sum, ok
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// names lists units as "kind name@version".
func names(units []Unit) []string {
	out := []string{}
	for _, u := range units {
		out = append(out, u.Kind+" "+u.Name+"@"+u.Version)
	}
	return out
}

// failures lists failures as "op kind name@version class", with " new" on new ones.
func failures(fs []Failure) []string {
	out := []string{}
	for _, f := range fs {
		s := fmt.Sprintf("%s %s %s@%s %s", f.Op, f.Kind, f.Name, f.Version, f.Class)
		if f.New {
			s += " new"
		}
		out = append(out, s)
	}
	return out
}

func want[T comparable](t *testing.T, what string, got []T, want ...T) {
	t.Helper()
	if want == nil {
		want = []T{}
	}
	if got == nil {
		got = []T{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// worker builds a worker archive of name@version with a few files, a folder and a link.
func worker(t *testing.T, name, version string, extra ...testkit.File) []byte {
	return testkit.TarGz(t, append([]testkit.File{
		{Name: "manifest.yaml", Body: fmt.Sprintf("name: %q\nversion: %s\n", name, version)},
		{Name: "index.html", Body: "<h1>" + name + " " + version + "</h1>"},
		{Name: "bin/", Type: '5'},
		{Name: "bin/run.sh", Body: "#!/bin/sh\necho " + version, Mode: 0o755},
		{Name: "home.html", Type: '2', Linkname: "index.html"},
	}, extra...)...)
}

// plugin builds a plugin archive (a zip) of name@version.
func plugin(t *testing.T, name, version string) []byte {
	return testkit.Zip(t,
		testkit.File{Name: "manifest.yaml", Body: fmt.Sprintf("name: %q\nversion: %s\n# plugin %s\n", name, version, version)},
		testkit.File{Name: "assets/app.js", Body: "console.log('" + version + "')"})
}

// TestTwoInstances: an upload on A reaches B as the same tree, recorded with its archive;
// A's own pass finds nothing to do; a disable, a plugin change and a removal made as rows
// reach B's folders; a tree removed by hand or left half-installed is put right.
func TestTwoInstances(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a, b := w.instance(t, packages.DefaultLimits), w.instance(t, packages.DefaultLimits)

	app := a.upload(t, keystore.UnitWorker, "app.tgz", worker(t, "@team/app", "1.0.0"))
	hello := a.upload(t, keystore.UnitPlugin, "hello.zip", plugin(t, "hello", "1.0.0"))
	res := a.pass(t)
	if res.Changed() || len(res.Failed) > 0 || res.Applied != hello.Change {
		t.Fatalf("A's pass after its own uploads = %+v, want nothing to do, applied %d", res, hello.Change)
	}

	b.sees(t, hello.Change)
	res = b.pass(t)
	want(t, "B installed", names(res.Installed), "plugin hello@1.0.0", "worker @team/app@1.0.0")
	want(t, "B failed", failures(res.Failed))
	if !res.PluginsChanged() || res.Change != hello.Change || res.Applied != hello.Change {
		t.Fatalf("B's pass: plugins changed %v, change %d, applied %d; want true, %d, %d", res.PluginsChanged(), res.Change, res.Applied, hello.Change, hello.Change)
	}
	for _, u := range []keystore.UnitVersion{app, hello} {
		ta, tb := testkit.Tree(t, a.tree(u.Kind, u.Name, u.Version)), testkit.Tree(t, b.tree(u.Kind, u.Name, u.Version))
		if !maps.Equal(ta, tb) {
			t.Fatalf("%s on B = %v, want A's %v", u.Name, tb, ta)
		}
		if sum, ok := b.record(t, u.Kind, u.Name, u.Version); !ok || sum != u.SHA256 {
			t.Fatalf("B's record of %s = %q, %v; want %s", u.Name, sum, ok, u.SHA256)
		}
	}
	tree := b.tree(keystore.UnitWorker, "@team/app", "1.0.0")
	if info, err := os.Stat(filepath.Join(tree, "bin", "run.sh")); err != nil || info.Mode().Perm() != 0o755 || testkit.Tree(t, tree)["home.html"] != "-> index.html" {
		t.Fatalf("B's tree lost a link or a mode: %v, %v", testkit.Tree(t, tree), err)
	}
	if res := b.pass(t); res.Changed() || len(res.Failed) > 0 {
		t.Fatalf("B's second pass = %+v, want nothing to do", res)
	}
	// An upload's Commit that a pass has overtaken leaves the pass's tree in place.
	before, _ := os.Stat(tree)
	s, err := b.workers.Stage("app.tgz", bytes.NewReader(worker(t, "@team/app", "1.0.0")), func(packages.Metadata) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if in, err := b.rec.Commit(app, s); err != nil || in.SHA256 != app.SHA256 {
		t.Fatalf("commit of an installed row = %+v, %v", in, err)
	}
	s.Discard()
	if after, _ := os.Stat(tree); !os.SameFile(before, after) {
		t.Fatal("commit replaced the tree a pass installed from the same archive")
	}

	// Disabled as a row: B's manifest says so.
	change, err := a.keys.Units.SetEnabled(context.Background(), app.UnitRef, false, keystore.Root())
	if err != nil {
		t.Fatal(err)
	}
	b.sees(t, change)
	res = b.pass(t)
	want(t, "B disabled", names(res.Disabled), "worker @team/app@1.0.0")
	if res.PluginsChanged() || res.Applied != change {
		t.Fatalf("a worker's disable: plugins changed %v, applied %d (want %d)", res.PluginsChanged(), res.Applied, change)
	}
	manifest, _ := os.ReadFile(filepath.Join(b.tree(keystore.UnitWorker, "@team/app", "1.0.0"), "manifest.yaml"))
	if u, err := b.workers.Lookup("@team/app"); err != nil || u.Versions[0].Enabled || !strings.Contains(string(manifest), "enabled: false") {
		t.Fatalf("B's manifest after the disable:\n%s", manifest)
	}
	if sum, _ := b.record(t, keystore.UnitWorker, "@team/app", "1.0.0"); sum != app.SHA256 {
		t.Fatalf("the disable changed B's record to %q", sum)
	}
	res = a.pass(t)
	want(t, "A disabled", names(res.Disabled), "worker @team/app@1.0.0")

	// A plugin's disable is a plugin change.
	change, err = a.keys.Units.SetEnabled(context.Background(), hello.UnitRef, false, keystore.Root())
	if err != nil {
		t.Fatal(err)
	}
	b.sees(t, change)
	if res := b.pass(t); !res.PluginsChanged() || !slices.Equal(names(res.Disabled), []string{"plugin hello@1.0.0"}) {
		t.Fatalf("plugin disable on B = %+v", res)
	}

	// A tree deleted by hand, and one whose install never finished, are installed again.
	if err := os.RemoveAll(b.tree(keystore.UnitPlugin, "hello", "")); err != nil {
		t.Fatal(err)
	}
	b.plugins.Forget()
	if err := withRoot(filepath.Join(b.base, "workers"), func(root *os.Root) error { return writeRecord(root, "@team/app/1.0.0", "") }); err != nil {
		t.Fatal(err)
	}
	res = b.pass(t)
	want(t, "B reinstalled", names(res.Installed), "plugin hello@1.0.0", "worker @team/app@1.0.0")
	if u, err := b.plugins.Lookup("hello"); err != nil || u.Versions[0].Enabled {
		t.Fatalf("the reinstalled plugin is not disabled as its row says: %+v, %v", u, err)
	}

	// Removed as a row: the tree and its record go, on both.
	change, err = a.keys.Units.Remove(context.Background(), app.UnitRef, keystore.Root())
	if err != nil {
		t.Fatal(err)
	}
	b.sees(t, change)
	res = b.pass(t)
	want(t, "B removed", names(res.Removed), "worker @team/app@1.0.0")
	if res.Applied != change {
		t.Fatalf("applied %d after the removal, want %d", res.Applied, change)
	}
	for _, in := range []*instance{a, b} {
		if in == a {
			want(t, "A removed", names(a.pass(t).Removed), "worker @team/app@1.0.0")
		}
		if exists(filepath.Join(in.base, "workers", "@team")) {
			t.Fatal("the removed worker's folders are still there")
		}
		if _, ok := in.record(t, keystore.UnitWorker, "@team/app", "1.0.0"); ok || exists(filepath.Join(in.base, "workers", packages.UnitsFolder, "@team")) {
			t.Fatal("the removed worker's record is still there")
		}
	}
}

// TestBadObject alters a plugin's new archive in the store, then removes it: B installs
// nothing, keeps serving the version it has, reports the failure once, and retries with
// back-off; once the object is repaired a pass after the back-off installs it.
func TestBadObject(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a, b := w.instance(t, packages.DefaultLimits), w.instance(t, packages.DefaultLimits)
	for _, tc := range []struct {
		name   string
		break_ func(path string, body []byte) error
		class  Class
	}{
		{"altered", func(path string, body []byte) error {
			altered := bytes.Clone(body)
			altered[len(altered)/2] ^= 0xff
			return os.WriteFile(path, altered, 0o644)
		}, ClassCorrupt},
		{"missing", func(path string, _ []byte) error { return os.Remove(path) }, ClassMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "p-" + tc.name
			v1 := a.upload(t, keystore.UnitPlugin, "p.zip", plugin(t, name, "1.0.0"))
			b.sees(t, v1.Change)
			want(t, "installed", names(b.pass(t).Installed), "plugin "+name+"@1.0.0")
			before := testkit.Tree(t, b.tree(keystore.UnitPlugin, name, ""))

			body := plugin(t, name, "2.0.0")
			v2 := a.upload(t, keystore.UnitPlugin, "p.zip", body)
			if err := tc.break_(w.object(v2.SHA256), body); err != nil {
				t.Fatal(err)
			}
			b.sees(t, v2.Change)
			res := b.pass(t)
			want(t, "installed", names(res.Installed))
			want(t, "failed", failures(res.Failed), "install plugin "+name+"@2.0.0 "+string(tc.class)+" new")
			f := res.Failed[0]
			if f.SHA256 != v2.SHA256 || f.Change != v2.Change || !strings.Contains(f.Err.Error(), v2.SHA256) || f.Attempts != 1 || !f.Retry.Equal(w.clock.now().Add(time.Second)) {
				t.Fatalf("failure = %+v (%v)", f, f.Err)
			}
			if res.Applied != v2.Change-1 || res.Change != v2.Change {
				t.Fatalf("applied %d of %d, want %d: B has not converged on the new version", res.Applied, res.Change, v2.Change-1)
			}
			if got := testkit.Tree(t, b.tree(keystore.UnitPlugin, name, "")); !maps.Equal(got, before) {
				t.Fatalf("B's tree changed: %v, was %v", got, before)
			}
			if sum, _ := b.record(t, keystore.UnitPlugin, name, ""); sum != v1.SHA256 {
				t.Fatalf("B's record = %s, want v1's %s", sum, v1.SHA256)
			}
			if leftovers, _ := filepath.Glob(filepath.Join(b.base, "plugins", packages.TempPrefix+"*")); len(leftovers) > 0 {
				t.Fatalf("the failed install left %v", leftovers)
			}

			// Before the retry is due the unit waits; after, it is tried again, reported
			// as known.
			res = b.pass(t)
			want(t, "waiting", failures(res.Failed), "install plugin "+name+"@2.0.0 "+string(tc.class))
			if res.Failed[0].Attempts != 1 {
				t.Fatalf("a pass before the retry was due tried again: %+v", res.Failed[0])
			}
			w.clock.add(time.Second)
			res = b.pass(t)
			want(t, "retried", failures(res.Failed), "install plugin "+name+"@2.0.0 "+string(tc.class))
			if f := res.Failed[0]; f.Attempts != 2 || !f.Retry.Equal(w.clock.now().Add(2*time.Second)) {
				t.Fatalf("second attempt = %+v, want attempt 2, retried 2s later", f)
			}

			if err := os.WriteFile(w.object(v2.SHA256), body, 0o644); err != nil {
				t.Fatal(err)
			}
			w.clock.add(2 * time.Second)
			res = b.pass(t)
			want(t, "installed after the repair", names(res.Installed), "plugin "+name+"@2.0.0")
			want(t, "failed after the repair", failures(res.Failed))
			if res.Applied != v2.Change {
				t.Fatalf("applied %d, want %d", res.Applied, v2.Change)
			}
			if got, wantTree := testkit.Tree(t, b.tree(keystore.UnitPlugin, name, "")), testkit.Tree(t, a.tree(keystore.UnitPlugin, name, "")); !maps.Equal(got, wantTree) {
				t.Fatalf("B's tree = %v, want A's %v", got, wantTree)
			}
		})
	}
}

// TestStoreDown stops the S3 server: B's pass installs nothing, tries one download (the
// others wait for the store), reports each unit as unavailable, and still applies what needs
// no store (a disable); after the store is back and the back-off has passed it converges.
func TestStoreDown(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a, b := w.instance(t, packages.DefaultLimits), w.instance(t, packages.DefaultLimits)
	w0 := a.upload(t, keystore.UnitWorker, "w.tgz", worker(t, "w0", "1.0.0"))
	b.sees(t, w0.Change)
	want(t, "installed", names(b.pass(t).Installed), "worker w0@1.0.0")

	w1 := a.upload(t, keystore.UnitWorker, "w.tgz", worker(t, "w1", "1.0.0"))
	w2 := a.upload(t, keystore.UnitWorker, "w.tgz", worker(t, "w2", "1.0.0"))
	change, err := a.keys.Units.SetEnabled(context.Background(), w0.UnitRef, false, keystore.Root())
	if err != nil {
		t.Fatal(err)
	}
	b.sees(t, change)
	w.s3.Stop()
	res := b.pass(t)
	want(t, "installed", names(res.Installed))
	want(t, "disabled", names(res.Disabled), "worker w0@1.0.0")
	want(t, "failed", failures(res.Failed), "install worker w1@1.0.0 unavailable new", "install worker w2@1.0.0 unavailable new")
	notTried := 0
	for _, f := range res.Failed {
		if !errors.Is(f.Err, packagestore.ErrUnavailable) {
			t.Fatalf("%s: %v, want ErrUnavailable", f.Name, f.Err)
		}
		if strings.Contains(f.Err.Error(), "not tried") {
			notTried++
		}
	}
	if notTried != 1 {
		t.Fatalf("%d of the 2 downloads were not tried, want 1: an outage costs one attempt per pass", notTried)
	}
	if res.Applied != w1.Change-1 {
		t.Fatalf("applied %d, want %d", res.Applied, w1.Change-1)
	}
	if entries, _ := os.ReadDir(filepath.Join(b.base, "workers")); len(entries) != 2 { // w0 and the records
		t.Fatalf("B's worker folder holds %v during the outage", entries)
	}

	w.s3.Restart(t)
	w.clock.add(time.Second)
	res = b.pass(t)
	want(t, "installed after the outage", names(res.Installed), "worker w1@1.0.0", "worker w2@1.0.0")
	want(t, "failed after the outage", failures(res.Failed))
	if res.Applied != change || w2.Change > change {
		t.Fatalf("applied %d, want %d", res.Applied, change)
	}
}

// TestFreshInstance: an instance with empty folders converges on 20 unit versions of both
// kinds in one pass, each in the state its row says (disabled ones installed disabled, the
// removed one not at all), and is ready after that pass, not before.
func TestFreshInstance(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.instance(t, packages.DefaultLimits)
	var rows []keystore.UnitVersion
	for i := range 8 {
		for _, v := range []string{"1.0.0", "1.1.0"} {
			rows = append(rows, a.upload(t, keystore.UnitWorker, "w.tgz", worker(t, fmt.Sprintf("@s%d/w%d", i%3, i), v)))
		}
	}
	for i := range 4 {
		rows = append(rows, a.upload(t, keystore.UnitPlugin, "p.zip", plugin(t, fmt.Sprintf("p%d", i), "1.0.0")))
	}
	ctx := context.Background()
	if _, err := a.keys.Units.SetEnabled(ctx, rows[1].UnitRef, false, keystore.Root()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.keys.Units.SetEnabled(ctx, rows[16].UnitRef, false, keystore.Root()); err != nil {
		t.Fatal(err)
	}
	last, err := a.keys.Units.Remove(ctx, rows[2].UnitRef, keystore.Root())
	if err != nil {
		t.Fatal(err)
	}
	want(t, "A's own pass disabled", names(a.pass(t).Disabled), "plugin p0@1.0.0", "worker @s0/w0@1.1.0")

	c := w.instance(t, packages.DefaultLimits)
	c.sees(t, last)
	select {
	case <-c.rec.Ready():
		t.Fatal("ready before any pass")
	default:
	}
	res := c.pass(t)
	select {
	case <-c.rec.Ready():
	default:
		t.Fatal("not ready after a complete pass")
	}
	if len(res.Installed) != 19 || len(res.Failed) > 0 || len(res.Disabled)+len(res.Enabled)+len(res.Removed) > 0 || res.Applied != last {
		t.Fatalf("fresh pass: %d installed %v, failed %v, applied %d (want 19, none, %d)", len(res.Installed), names(res.Installed), failures(res.Failed), res.Applied, last)
	}
	for i, row := range rows {
		path := c.tree(row.Kind, row.Name, row.Version)
		if i == 2 {
			if exists(path) {
				t.Fatalf("the removed %s@%s was installed", row.Name, row.Version)
			}
			continue
		}
		if got, wantTree := testkit.Tree(t, path), testkit.Tree(t, a.tree(row.Kind, row.Name, row.Version)); !maps.Equal(got, wantTree) {
			t.Fatalf("%s@%s on C = %v, want A's %v", row.Name, row.Version, got, wantTree)
		}
		u, err := c.catalog(row.Kind).Lookup(row.Name)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := u.Find(row.Version)
		if enabled := i != 1 && i != 16; v.Enabled != enabled {
			t.Fatalf("%s@%s enabled = %v, want %v", row.Name, row.Version, v.Enabled, enabled)
		}
	}
	if res := c.pass(t); res.Changed() || len(res.Failed) > 0 {
		t.Fatalf("second pass = %+v", res)
	}
}

// fixed is a desired state given as rows.
type fixed []keystore.UnitVersion

func (f *fixed) Versions(context.Context) ([]keystore.UnitVersion, error) {
	return slices.Clone(*f), nil
}

// TestLocalTrees: trees installed on this instance outside the cluster are left alone and
// reported (once as new), unless a row names the same version, which then replaces the local
// tree; a name a built-in folder holds is never installed over; a recorded tree no row names
// any longer (published once, gone from the desired state) is removed.
func TestLocalTrees(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a, b := w.instance(t, packages.DefaultLimits), w.instance(t, packages.DefaultLimits)
	install := func(c *packages.Catalog, name string, archive []byte) {
		t.Helper()
		if _, err := c.Install(name, bytes.NewReader(archive), func(packages.Metadata) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	install(b.workers, "w.tgz", worker(t, "mine", "1.0.0"))
	install(b.workers, "w.tgz", worker(t, "shared", "1.0.0", testkit.File{Name: "local.txt", Body: "B's own"}))
	install(b.plugins, "p.zip", plugin(t, "local-plugin", "1.0.0"))
	builtin := filepath.Join(b.base, ".workers", "core", "1.0.0")
	os.MkdirAll(builtin, 0o755)
	os.WriteFile(filepath.Join(builtin, "manifest.yaml"), []byte("name: core\nversion: 1.0.0\n"), 0o644)
	mine := testkit.Tree(t, b.tree(keystore.UnitWorker, "mine", "1.0.0"))

	shared := a.upload(t, keystore.UnitWorker, "w.tgz", worker(t, "shared", "1.0.0"))
	core := a.upload(t, keystore.UnitWorker, "w.tgz", worker(t, "core", "1.0.0"))
	b.sees(t, core.Change)
	res := b.pass(t)
	want(t, "installed", names(res.Installed), "worker shared@1.0.0")
	want(t, "failed", failures(res.Failed), "install worker core@1.0.0 install new")
	if !strings.Contains(res.Failed[0].Err.Error(), "built-in") {
		t.Fatalf("core: %v, want a refusal naming the built-in folder", res.Failed[0].Err)
	}
	var local []string
	for _, l := range res.Local {
		local = append(local, fmt.Sprintf("%s %s@%s %v", l.Kind, l.Name, l.Version, l.New))
	}
	want(t, "local", local, "plugin local-plugin@1.0.0 true", "worker mine@1.0.0 true")
	if got := testkit.Tree(t, b.tree(keystore.UnitWorker, "mine", "1.0.0")); !maps.Equal(got, mine) {
		t.Fatal("a local tree changed")
	}
	if exists(filepath.Join(b.tree(keystore.UnitWorker, "shared", "1.0.0"), "local.txt")) {
		t.Fatal("the row's version did not replace the local tree of the same version")
	}
	if _, ok := b.record(t, keystore.UnitWorker, "mine", "1.0.0"); ok {
		t.Fatal("a local tree got a record")
	}
	if got := testkit.Tree(t, filepath.Join(b.base, ".workers")); len(got) != 3 { // core, 1.0.0, manifest.yaml
		t.Fatalf("the built-in folder changed: %v", got)
	}
	if res := b.pass(t); len(res.Local) != 2 || res.Local[0].New || res.Local[1].New {
		t.Fatalf("second pass reports the local trees as new again: %+v", res.Local)
	}

	// A recorded tree whose row is gone from the desired state goes.
	rows := fixed{shared}
	c := w.instance(t, packages.DefaultLimits)
	c.rec = c.reconciler(t, &rows)
	want(t, "installed", names(c.pass(t).Installed), "worker shared@1.0.0")
	rows = nil
	want(t, "removed", names(c.pass(t).Removed), "worker shared@1.0.0")
	if got := testkit.Tree(t, filepath.Join(c.base, "workers")); len(got) != 0 { // no tree, no record
		t.Fatalf("C's worker folder after the removal holds %v", got)
	}
}

// TestInstallChecks: an archive in the store is installed only through the checks of an
// upload, with this instance's limits and admission: one larger unpacked than B allows, one
// that writes outside its folder, one whose name is not its row's, one that is no archive and
// one B's admission refuses are refused, nothing of them is left, and the other units install.
func TestInstallChecks(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.instance(t, packages.DefaultLimits)
	small := packages.DefaultLimits
	small.Unpacked = 4 << 10
	b := w.instance(t, small)
	b.rec = b.reconciler(t, b.keys.Units, func(kind string, md packages.Metadata) error {
		if kind == keystore.UnitPlugin && md.Name == "refused" {
			return errors.New("not admitted here")
		}
		return nil
	})

	big := a.upload(t, keystore.UnitWorker, "w.tgz", worker(t, "big", "1.0.0", testkit.File{Name: "data.bin", Body: strings.Repeat("x", 8<<10)}))
	a.put(t, keystore.UnitWorker, "evil", "1.0.0", true, testkit.TarGz(t,
		testkit.File{Name: "manifest.yaml", Body: "name: evil\nversion: 1.0.0\n"}, testkit.File{Name: "../../escaped.txt", Body: "x"}))
	a.put(t, keystore.UnitWorker, "liar", "1.0.0", true, worker(t, "other", "1.0.0"))
	a.put(t, keystore.UnitWorker, "text", "1.0.0", true, []byte("not an archive"))
	a.upload(t, keystore.UnitPlugin, "p.zip", plugin(t, "refused", "1.0.0"))
	ok := a.upload(t, keystore.UnitWorker, "w.tgz", worker(t, "ok", "1.0.0"))
	b.sees(t, ok.Change)
	res := b.pass(t)
	want(t, "installed", names(res.Installed), "worker ok@1.0.0")
	want(t, "failed", failures(res.Failed), "install plugin refused@1.0.0 install new", "install worker big@1.0.0 install new",
		"install worker evil@1.0.0 install new", "install worker liar@1.0.0 install new", "install worker text@1.0.0 install new")
	for i, code := range []string{"", packages.CodeTooLarge, packages.CodePathTraversal, "", ""} {
		if code != "" && !packages.IsCode(res.Failed[i].Err, code) {
			t.Errorf("%s: %v, want %s", res.Failed[i].Name, res.Failed[i].Err, code)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(b.base, "plugins")); len(entries) > 0 {
		t.Fatalf("B's plugin folder holds %v", entries)
	}
	if res.Applied != big.Change-1 {
		t.Fatalf("applied %d, want %d", res.Applied, big.Change-1)
	}
	entries, _ := os.ReadDir(filepath.Join(b.base, "workers"))
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want(t, "B's worker folder", left, packages.UnitsFolder, "ok")
	if exists(filepath.Join(b.base, "escaped.txt")) || exists(filepath.Join(filepath.Dir(b.base), "escaped.txt")) {
		t.Fatal("an entry escaped")
	}
}

// TestRun: the loop passes at start (then Ready), at once on a change pulled from the primary
// with an interval far away, and reports each pass; it ends with its context.
func TestRun(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a, b := w.instance(t, packages.DefaultLimits), w.instance(t, packages.DefaultLimits)
	ctx, cancel := context.WithCancel(context.Background())
	results := make(chan Result, 100)
	done := make(chan struct{})
	changes, unfollow := b.keys.Feed.Follow(keystore.UnitsTopic)
	defer unfollow()
	go func() {
		defer close(done)
		b.rec.Run(ctx, changes, time.Hour, func(res Result, err error) {
			if err != nil {
				t.Errorf("pass: %v", err)
			}
			results <- res
		})
	}()
	<-b.rec.Ready()
	if res := <-results; res.Changed() {
		t.Fatalf("first pass on empty state = %+v", res)
	}
	row := a.upload(t, keystore.UnitPlugin, "p.zip", plugin(t, "live", "1.0.0"))
	for res := range results {
		if res.PluginsChanged() {
			want(t, "installed", names(res.Installed), "plugin live@1.0.0")
			if res.Applied != row.Change {
				t.Fatalf("applied %d, want %d", res.Applied, row.Change)
			}
			break
		}
	}
	cancel()
	<-done
}
