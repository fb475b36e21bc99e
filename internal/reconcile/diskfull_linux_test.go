package reconcile

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/caddy-runtime/runtime/internal/testkit"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// smallDisk mounts a tmpfs of size bytes on dir until the test ends; mounting needs root.
func smallDisk(t *testing.T, dir string, size int64) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a size-limited tmpfs needs root")
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
}

// incompressible is n random bytes, as a string.
func incompressible(n int) string {
	b := make([]byte, n)
	rng := rand.New(rand.NewChaCha8([32]byte{7}))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return string(b)
}

// listing lists a folder's entries.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestDiskFull: B's worker folder is a 4 MiB disk, with v1 installed and a filler leaving
// less than v2 needs (its 1 MiB archive spooled, then unpacked): the pass reports an install
// failure naming the lack of space, leaves no temporary folder and no partial tree, and v1
// keeps its tree and record; once the filler is gone, the retry installs v2.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a, b := w.instance(t, packages.DefaultLimits), w.instance(t, packages.DefaultLimits)
	dir := filepath.Join(b.base, "workers")
	smallDisk(t, dir, 4<<20)
	// A catalog and a reconciler of the mounted folder (the first watched the folder beneath).
	b.workers = packages.NewCatalog(packages.WorkerLayout, []string{filepath.Join(b.base, ".workers"), dir}, packages.DefaultLimits)
	b.workers.SetRetireDelay(0)
	t.Cleanup(b.workers.Close)
	b.rec = b.reconciler(t, b.keys.Units)

	v1 := a.upload(t, keystore.UnitWorker, "w.tgz", worker(t, "app", "1.0.0"))
	b.sees(t, v1.Change)
	if res := b.pass(t); len(res.Installed) != 1 {
		t.Fatalf("v1: %+v", res)
	}
	index := filepath.Join(b.tree(keystore.UnitWorker, "app", "1.0.0"), "index.html")
	before, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 5<<19), 0o644); err != nil { // 2.5 MiB
		t.Fatal(err)
	}

	v2 := a.upload(t, keystore.UnitWorker, "w.tgz", worker(t, "app", "2.0.0", testkit.File{Name: "data.bin", Body: incompressible(1 << 20)}))
	b.sees(t, v2.Change)
	res := b.pass(t)
	want(t, "installed", names(res.Installed))
	want(t, "failed", failures(res.Failed), "install worker app@2.0.0 install new")
	if err := res.Failed[0].Err; !packages.IsCode(err, packages.CodeNoSpace) || !strings.Contains(err.Error(), "disk space") {
		t.Fatalf("the failure %v does not say the disk is full", err)
	}
	if res.Applied != v2.Change-1 {
		t.Fatalf("applied %d, want %d", res.Applied, v2.Change-1)
	}
	want(t, "the worker folder", listing(t, dir), packages.UnitsFolder, "app", "filler")
	want(t, "app's versions", listing(t, filepath.Join(dir, "app")), "1.0.0")
	if after, err := os.ReadFile(index); err != nil || string(after) != string(before) {
		t.Fatalf("v1's index.html = %q, %v; want %q", after, err, before)
	}
	if sum, ok := b.record(t, keystore.UnitWorker, "app", "1.0.0"); !ok || sum != v1.SHA256 {
		t.Fatalf("v1's record = %q, %v; want %s", sum, ok, v1.SHA256)
	}
	if _, ok := b.record(t, keystore.UnitWorker, "app", "2.0.0"); ok {
		t.Fatal("v2 has a record")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	w.clock.add(time.Minute) // the retry is due
	res = b.pass(t)
	want(t, "installed on retry", names(res.Installed), "worker app@2.0.0")
	want(t, "failed on retry", failures(res.Failed))
	if sum, ok := b.record(t, keystore.UnitWorker, "app", "2.0.0"); !ok || sum != v2.SHA256 {
		t.Fatalf("v2's record = %q, %v; want %s", sum, ok, v2.SHA256)
	}
	if got := listing(t, filepath.Join(dir, "app")); !slices.Equal(got, []string{"1.0.0", "2.0.0"}) {
		t.Fatalf("app's versions = %v", got)
	}
}
