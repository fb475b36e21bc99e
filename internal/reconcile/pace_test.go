package reconcile

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// ticking is a clock that moves a millisecond each time it is read: an install's work,
// measured from read to read of its archive, takes as long as it reads, whatever the machine.
type ticking struct {
	mu sync.Mutex
	t  time.Time
}

func (c *ticking) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

// sleeps records a paced install's sleeps, each moving the clock on by its length; block
// makes each one last until its context ends.
type sleeps struct {
	clock   *ticking
	mu      sync.Mutex
	got     []time.Duration
	block   bool
	started chan struct{} // receives once per sleep begun, when not full
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) {
	s.mu.Lock()
	s.got = append(s.got, d)
	block := s.block
	s.mu.Unlock()
	s.clock.mu.Lock()
	s.clock.t = s.clock.t.Add(d)
	s.clock.mu.Unlock()
	select {
	case s.started <- struct{}{}:
	default:
	}
	if block {
		<-ctx.Done()
	}
}

func (s *sleeps) list() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.got...)
}

// bulky is a worker of 2 MiB of incompressible data: many reads to unpack.
func bulky(t *testing.T, name string) []byte {
	data := make([]byte, 2<<20)
	rng := rand.New(rand.NewChaCha8([32]byte{byte(len(name))}))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return worker(t, name, "1.0.0", testkit.File{Name: "data.bin", Body: string(data)})
}

// pacedInstance is an instance whose reconciler reads the ticking clock and records its sleeps.
// activity, when not nil, is its Options.Activity.
func (w *world) pacedInstance(t *testing.T, duty float64, s *sleeps, activity func() uint64) *instance {
	t.Helper()
	in := w.instance(t, packages.DefaultLimits)
	s.clock = &ticking{t: time.Unix(1_800_000_000, 0)}
	rec, err := New(Options{Desired: in.keys.Units, Store: w.store, Workers: in.workers, Plugins: in.plugins,
		Now: s.clock.now, Duty: duty, Sleep: s.sleep, Activity: activity})
	if err != nil {
		t.Fatal(err)
	}
	in.rec = rec
	return in
}

// TestPacing: the first pass installs at full speed, the instance not serving yet; once
// Ready, an install works a burst, then after each slice of work sleeps as long as repays it
// at the default duty, and a small one after a quiet spell does not sleep; a duty of 1 does
// not pace, nor does an instance that takes in no request while it installs; one that does
// is paced.
func TestPacing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.instance(t, packages.DefaultLimits)
	var requests atomic.Uint64
	for _, tt := range []struct {
		name, first, second, small string
		duty                       float64
		activity                   func() uint64
		paced                      bool
	}{
		{"default duty", "first", "second", "small", 0, nil, true},
		{"duty 1", "third", "fourth", "", 1, nil, false},
		{"no request meanwhile", "fifth", "sixth", "", 0, func() uint64 { return 7 }, false},
		{"requests meanwhile", "seventh", "eighth", "little", 0, func() uint64 { return requests.Add(1) }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &sleeps{}
			b := w.pacedInstance(t, tt.duty, s, tt.activity)
			first := a.upload(t, keystore.UnitWorker, "w.tgz", bulky(t, tt.first))
			b.sees(t, first.Change)
			if res := b.pass(t); !slices.Contains(names(res.Installed), "worker "+tt.first+"@1.0.0") {
				t.Fatalf("first pass: %+v", res)
			}
			if got := s.list(); len(got) > 0 {
				t.Fatalf("the first pass slept %v", got)
			}
			second := a.upload(t, keystore.UnitWorker, "w.tgz", bulky(t, tt.second))
			b.sees(t, second.Change)
			res := b.pass(t)
			want(t, "installed", names(res.Installed), "worker "+tt.second+"@1.0.0")
			got := s.list()
			if !tt.paced {
				if len(got) > 0 {
					t.Fatalf("slept %v", got)
				}
				return
			}
			if len(got) < 2 {
				t.Fatalf("a paced install of 2 MiB slept %d times, want several", len(got))
			}
			repay := func(debt time.Duration) time.Duration { return time.Duration(float64(debt) / DefaultDuty) }
			for _, d := range got {
				// A debt of paceSlice or a little more (one read), repaid at the duty.
				if d < repay(paceSlice) || d > repay(paceSlice+2*time.Millisecond) {
					t.Fatalf("slept %v for a debt of a slice of work, want %v", d, repay(paceSlice))
				}
			}
			// After a quiet spell, a small install fits in the burst.
			s.clock.mu.Lock()
			s.clock.t = s.clock.t.Add(time.Duration(float64(paceBurst) / DefaultDuty)) // the bucket full again
			s.clock.mu.Unlock()
			small := a.upload(t, keystore.UnitWorker, "w.tgz", worker(t, tt.small, "1.0.0"))
			b.sees(t, small.Change)
			want(t, "installed", names(b.pass(t).Installed), "worker "+tt.small+"@1.0.0")
			if n := len(s.list()); n != len(got) {
				t.Fatalf("a small install after a quiet spell slept %d times", n-len(got))
			}
		})
	}
}

// TestPacedPassMakesWay: an upload's Commit that comes while a paced pass sleeps ends the
// sleep and waits only for the install under way, the others left to the next pass
// (Deferred, not applied, Pending); a request's pass (Hurry) installs what it waits for
// unpaced and leaves the rest to Run.
func TestPacedPassMakesWay(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.instance(t, packages.DefaultLimits)
	s := &sleeps{block: true, started: make(chan struct{}, 1)}
	b := w.pacedInstance(t, 0, s, nil)
	b.pass(t) // Ready
	var rows []keystore.UnitVersion
	for _, name := range []string{"one", "three", "two"} {
		rows = append(rows, a.upload(t, keystore.UnitWorker, "w.tgz", bulky(t, name)))
	}
	b.sees(t, rows[2].Change)

	passed := make(chan Result, 1)
	go func() {
		res, err := b.rec.Reconcile(context.Background())
		if err != nil {
			t.Errorf("pass: %v", err)
		}
		passed <- res
	}()
	select {
	case <-s.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the paced pass never slept")
	}
	// An upload received by B: every sleep would last forever, so the pass must make way.
	staged, err := b.workers.Stage("w.tgz", bytes.NewReader(worker(t, "mine", "1.0.0")), func(packages.Metadata) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer staged.Discard()
	mine := b.put(t, keystore.UnitWorker, "mine", "1.0.0", true, worker(t, "mine", "1.0.0"))
	committed := make(chan error, 1)
	go func() {
		_, err := b.rec.Commit(mine, staged)
		committed <- err
	}()
	select {
	case err := <-committed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Commit still waits for the paced pass")
	}
	res := <-passed
	want(t, "installed", names(res.Installed), "worker one@1.0.0")
	want(t, "deferred", names(res.Deferred), "worker three@1.0.0", "worker two@1.0.0")
	if res.Applied != rows[1].Change-1 {
		t.Fatalf("applied %d, want %d", res.Applied, rows[1].Change-1)
	}
	if !exists(b.tree(keystore.UnitWorker, "mine", "1.0.0")) {
		t.Fatal("the upload's tree is not installed")
	}
	if !b.rec.Pending(keystore.UnitWorker, "two") || b.rec.Pending(keystore.UnitWorker, "one") {
		t.Fatal("Pending does not tell the deferred worker two from the installed one")
	}

	s.mu.Lock()
	s.block = false // a paced install now returns, counted
	s.mu.Unlock()
	sleptBefore := len(s.list())
	res, err = b.rec.Hurry(context.Background(), func(kind, name string) bool { return kind == keystore.UnitWorker && name == "two" })
	if err != nil {
		t.Fatal(err)
	}
	want(t, "installed", names(res.Installed), "worker two@1.0.0")
	want(t, "deferred", names(res.Deferred), "worker three@1.0.0")
	if n := len(s.list()); n != sleptBefore {
		t.Fatalf("the request's pass slept %d times", n-sleptBefore)
	}
	if b.rec.Pending(keystore.UnitWorker, "two") || !b.rec.Pending(keystore.UnitWorker, "three") {
		t.Fatal("after the request's pass, two is still pending or three no longer")
	}
	select {
	case <-b.rec.kick:
	default:
		t.Fatal("Hurry left installs to Run without asking it for a pass")
	}
}
