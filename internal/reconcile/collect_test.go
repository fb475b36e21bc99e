package reconcile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"os"
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

// putObject puts body in the store as an object last changed at modified (the S3 server
// reports its file's time).
func (w *world) putObject(t *testing.T, body string, modified time.Time) string {
	t.Helper()
	sum := sha256.Sum256([]byte(body))
	if err := w.store.Put(context.Background(), sum, int64(len(body)), bytes.NewReader([]byte(body))); err != nil {
		t.Fatal(err)
	}
	hexSum := hex.EncodeToString(sum[:])
	if err := os.Chtimes(w.object(hexSum), modified, modified); err != nil {
		t.Fatal(err)
	}
	return hexSum
}

func row(kind, name, version, sum string, removedAt time.Time) keystore.UnitVersion {
	r := keystore.UnitVersion{UnitRef: keystore.UnitRef{Kind: kind, Name: name, Version: version}, SHA256: sum}
	if !removedAt.IsZero() {
		r.RemovedAt = removedAt.Unix()
	}
	return r
}

func sums(objs []packagestore.Object) []string {
	out := []string{}
	for _, o := range objs {
		out = append(out, hex.EncodeToString(o.Sum[:]))
	}
	slices.Sort(out)
	return out
}

func kept(objs []KeptObject) []string {
	out := []string{}
	for _, o := range objs {
		out = append(out, hex.EncodeToString(o.Sum[:])+" "+o.Reason)
	}
	slices.Sort(out)
	return out
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

// TestCollect: an object no live row refers to goes once its own time and its last removal
// are older than the grace period; one a live row refers to stays however old, one put
// within the grace period stays (an upload about to write its row), one whose removal is
// recent stays until the grace period after it is over. Collectors running together are
// harmless, and a failed delete stops nothing but its object.
func TestCollect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	now := time.Now().Truncate(time.Second)
	old := now.Add(-48 * time.Hour)
	live := w.putObject(t, "live", old)
	orphan := w.putObject(t, "orphan", old)
	recent := w.putObject(t, "recent", now.Add(-time.Hour))
	removedRecently := w.putObject(t, "removed recently", old)
	removedLongAgo := w.putObject(t, "removed long ago", old)
	rows := []keystore.UnitVersion{
		row(keystore.UnitWorker, "app", "1.0.0", live, time.Time{}),
		row(keystore.UnitWorker, "app", "0.9.0", live, old), // removed, but another live row refers to it
		row(keystore.UnitWorker, "app", "0.8.0", removedRecently, now.Add(-30*time.Hour)),
		row(keystore.UnitPlugin, "hello", "1.0.0", removedRecently, now.Add(-time.Hour)), // the last removal counts
		row(keystore.UnitWorker, "gone", "1.0.0", removedLongAgo, now.Add(-25*time.Hour)),
		row(keystore.UnitWorker, "bad", "1.0.0", "not a sum", time.Time{}),
	}

	res, err := Collect(ctx, w.store, rows, DefaultGrace, now)
	if err != nil {
		t.Fatal(err)
	}
	want(t, "deleted", sums(res.Deleted), sorted(orphan, removedLongAgo)...)
	want(t, "kept", kept(res.Kept), sorted(live+" "+KeptLive, recent+" "+KeptRecent, removedRecently+" "+KeptRemoved)...)
	if len(res.Failed) > 0 {
		t.Fatalf("failed: %+v", res.Failed)
	}
	want(t, "objects", w.objects(t), sorted(live, recent, removedRecently)...)

	// A day later: the recent object's row never came, the removal's grace is over.
	res, err = Collect(ctx, w.store, rows, DefaultGrace, now.Add(DefaultGrace))
	if err != nil {
		t.Fatal(err)
	}
	want(t, "deleted a day later", sums(res.Deleted), sorted(recent, removedRecently)...)
	want(t, "objects a day later", w.objects(t), live)

	// Collectors together: each object deleted once or found gone, never a failure.
	var objs []string
	for i := range 6 {
		objs = append(objs, w.putObject(t, fmt.Sprint("orphan ", i), old))
	}
	var wg sync.WaitGroup
	results := make([]Collected, 3)
	errs := make([]error, 3)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = Collect(ctx, w.store, rows, DefaultGrace, now) })
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil || len(results[i].Failed) > 0 {
			t.Fatalf("collector %d: %v, %+v", i, errs[i], results[i].Failed)
		}
	}
	want(t, "objects after collectors together", w.objects(t), live)

	// A delete that fails is reported; the others go on.
	bad := w.putObject(t, "undeletable", old)
	good := w.putObject(t, "deletable", old)
	res, err = Collect(ctx, failingDelete{w.store, bad}, rows, DefaultGrace, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 1 || hex.EncodeToString(res.Failed[0].Sum[:]) != bad || !errors.Is(res.Failed[0].Err, packagestore.ErrUnavailable) {
		t.Fatalf("failed = %+v, want %s", res.Failed, bad)
	}
	want(t, "deleted beside a failure", sums(res.Deleted), good)

	if _, err := Collect(ctx, w.store, rows, 0, now); err == nil {
		t.Fatal("a zero grace period was accepted")
	}
}

// failingDelete is the store with one object that cannot be deleted.
type failingDelete struct {
	packagestore.Store
	sum string
}

func (f failingDelete) Delete(ctx context.Context, sum [32]byte) error {
	if hex.EncodeToString(sum[:]) == f.sum {
		return fmt.Errorf("delete: %w", packagestore.ErrUnavailable)
	}
	return f.Store.Delete(ctx, sum)
}

// TestCollectKeepsAnArchiveUploadedAgain: an archive whose rows were removed long ago is
// uploaded again while a collection runs, after it read the rows and listed the store, before
// the upload writes its row. The upload's put sends the old object again, and the
// collection, looking at each object again before it deletes it, keeps that one; an orphan
// beside it still goes.
func TestCollectKeepsAnArchiveUploadedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	now := time.Now()
	old := now.Add(-48 * time.Hour)
	const body = "uploaded again"
	again := w.putObject(t, body, old)
	orphan := w.putObject(t, "orphan", old)
	rows := []keystore.UnitVersion{row(keystore.UnitWorker, "app", "1.0.0", again, now.Add(-30*time.Hour))}
	store := &putAfterList{Store: w.store, put: func() {
		if err := w.store.Put(ctx, sha256.Sum256([]byte(body)), int64(len(body)), strings.NewReader(body)); err != nil {
			t.Error(err)
		}
	}}
	res, err := Collect(ctx, store, rows, DefaultGrace, now)
	if err != nil || len(res.Failed) > 0 {
		t.Fatalf("collect: %v, %+v", err, res.Failed)
	}
	want(t, "deleted", sums(res.Deleted), orphan)
	want(t, "kept", kept(res.Kept), again+" "+KeptRecent)
	want(t, "objects", w.objects(t), again)
}

// putAfterList is the store with an upload's put made once the listing is complete.
type putAfterList struct {
	packagestore.Store
	put func()
}

func (p *putAfterList) List(ctx context.Context) iter.Seq2[packagestore.Object, error] {
	return func(yield func(packagestore.Object, error) bool) {
		var listed []packagestore.Object
		for obj, err := range p.Store.List(ctx) {
			if err != nil {
				yield(obj, err)
				return
			}
			listed = append(listed, obj)
		}
		p.put()
		for _, obj := range listed {
			if !yield(obj, nil) {
				return
			}
		}
	}
}

// TestCollector reads the desired state from the key store: an archive a live row refers to
// stays, one whose row was removed goes after the grace period, and a replica that cannot
// reach its primary collects nothing, since it may lack rows.
func TestCollector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	a := w.instance(t, packages.DefaultLimits)
	kept := a.upload(t, keystore.UnitWorker, "app.tgz", worker(t, "app", "1.0.0"))
	removed := a.upload(t, keystore.UnitWorker, "app.tgz", worker(t, "app", "2.0.0"))
	if _, err := a.keys.Units.Remove(ctx, removed.UnitRef, keystore.Root()); err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return time.Now().Add(DefaultGrace + time.Hour) }
	c := Collector{Desired: a.keys.Units, Store: w.store, Now: later}
	res, err := c.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want(t, "deleted", sums(res.Deleted), removed.SHA256)
	want(t, "objects", w.objects(t), kept.SHA256)

	// Run collects again and again, reporting each collection, until its context ends.
	orphan := w.putObject(t, "left by an upload that never wrote its row", time.Now().Add(-time.Hour))
	runCtx, cancel := context.WithCancel(ctx)
	reports, done := make(chan Collected, 100), make(chan struct{})
	go func() {
		defer close(done)
		Collector{Desired: a.keys.Units, Store: w.store, Now: later, Interval: 10 * time.Millisecond}.Run(runCtx, func(res Collected, err error) {
			if err != nil {
				t.Error(err)
			}
			reports <- res
		})
	}()
	for deleted := false; !deleted; {
		select {
		case res := <-reports:
			deleted = slices.Equal(sums(res.Deleted), []string{orphan})
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not collect the orphan")
		}
	}
	cancel()
	<-done
	want(t, "objects after Run", w.objects(t), kept.SHA256)

	if _, err := a.keys.Units.Remove(ctx, kept.UnitRef, keystore.Root()); err != nil {
		t.Fatal(err)
	}
	w.primary.Stop()
	testkit.Eventually(t, "the replica finds its primary away", 10*time.Second, func() bool { st, _ := a.keys.Sync(); return !st.Reachable })
	if _, err := c.Once(ctx); err == nil {
		t.Fatal("a replica away from its primary collected")
	}
	want(t, "objects with the primary away", w.objects(t), kept.SHA256)
}
