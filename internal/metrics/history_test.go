package metrics

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// clock is a settable time for a history.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// newClock starts at the beginning of a step, plus off.
func newClock(off time.Duration) *clock {
	return &clock{t: time.Unix(1_800_000_000, 0).Truncate(HistoryStep).Add(off)}
}

func TestHistoryBuckets(t *testing.T) {
	c := newClock(time.Second)
	h := NewHistory(c.now)
	h.WorkerRequest("app", 200, 3*time.Millisecond)
	h.WorkerRequest("app", 503, 5*time.Millisecond)
	h.WorkerRequest("other", 404, time.Millisecond)
	c.t = c.t.Add(HistoryStep) // the next step
	h.WorkerRequest("app", 200, time.Millisecond)
	c.t = c.t.Add(3 * HistoryStep) // two steps with nothing, then the current one
	h.APIRequest(500, -1)

	w := h.Worker("app")
	if len(w.Points) != HistoryPoints {
		t.Fatalf("%d points, want %d", len(w.Points), HistoryPoints)
	}
	if end := w.Start.Add(HistoryPoints * HistoryStep); !end.After(c.t) || end.Sub(c.t) > HistoryStep {
		t.Errorf("the window %v + 1h does not end in the current step (%v)", w.Start, c.t)
	}
	if w.Elapsed != time.Second {
		t.Errorf("elapsed in the current step = %v, want 1s", w.Elapsed)
	}
	tail := w.Points[HistoryPoints-5:]
	want := []struct {
		requests, errors int64
		timed            bool
	}{{2, 1, true}, {1, 0, true}, {0, 0, false}, {0, 0, false}, {0, 0, false}}
	for i, p := range tail {
		if p.Requests != want[i].requests || p.Errors != want[i].errors || p.Timed != want[i].timed || p.Memory != -1 {
			t.Errorf("point %d = %+v, want %+v and no memory", i, p, want[i])
		}
	}
	if p := tail[0]; math.Abs(p.P99-0.005)/0.005 > QuantileError || math.Abs(p.P50-0.003)/0.003 > QuantileError {
		t.Errorf("p50 %v, p99 %v; want 3 ms and 5 ms within %.1f%%", p.P50, p.P99, 100*QuantileError)
	}
	total := h.Total().Points[HistoryPoints-5]
	if total.Requests != 3 || total.Errors != 1 {
		t.Errorf("the total's step = %+v, want 3 requests, 1 error", total)
	}
	api := h.API().Points[HistoryPoints-1]
	if api.Requests != 1 || api.Errors != 1 || api.Timed {
		t.Errorf("the API's current step = %+v, want 1 untimed error", api)
	}
	if empty := h.Worker("nobody"); slices.ContainsFunc(empty.Points, func(p Point) bool { return p.Requests != 0 || p.Memory != -1 }) {
		t.Errorf("a worker without traffic has points")
	}
}

// TestHistoryRollover checks that an hour later the old steps are gone, and a ring slot
// reused by a later step shows only that step.
func TestHistoryRollover(t *testing.T) {
	c := newClock(0)
	h := NewHistory(c.now)
	for range HistoryPoints + 10 {
		h.WorkerRequest("app", 200, time.Millisecond)
		c.t = c.t.Add(HistoryStep)
	}
	w := h.Worker("app")
	for i, p := range w.Points {
		want := int64(1)
		if i == HistoryPoints-1 {
			want = 0 // the current step: nothing yet
		}
		if p.Requests != want {
			t.Fatalf("point %d has %d requests, want %d", i, p.Requests, want)
		}
	}
	c.t = c.t.Add(2 * time.Hour)
	if w := h.Worker("app"); slices.ContainsFunc(w.Points, func(p Point) bool { return p.Requests != 0 }) {
		t.Errorf("two hours later the old steps still show")
	}
	// Idle for the whole window: a memory sample sweeps the series away.
	h.Memory(nil)
	if h.worker("app", false) != nil {
		t.Errorf("an idle worker's series was kept")
	}
}

func TestHistoryQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tt := range []struct {
		name string
		gen  func() time.Duration
	}{
		{"uniform 1-100 ms", func() time.Duration { return time.Millisecond + time.Duration(rng.Int64N(int64(99*time.Millisecond))) }},
		{"log-normal around 2 ms", func() time.Duration { return time.Duration(2e6 * math.Exp(rng.NormFloat64())) }},
		{"bimodal 50 µs and 2 s", func() time.Duration {
			if rng.IntN(100) < 90 {
				return 50*time.Microsecond + time.Duration(rng.Int64N(10_000))
			}
			return 2*time.Second + time.Duration(rng.Int64N(int64(time.Second)))
		}},
		{"one sample", func() time.Duration { return 7 * time.Millisecond }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock(0)
			h := NewHistory(c.now)
			n := 5000
			if tt.name == "one sample" {
				n = 1
			}
			samples := make([]float64, n)
			for i := range samples {
				d := tt.gen()
				samples[i] = d.Seconds()
				h.WorkerRequest("app", 200, d)
			}
			slices.Sort(samples)
			exact := func(q float64) float64 { return samples[max(int(math.Ceil(q*float64(n))), 1)-1] }
			check := func(when string, p Point) {
				for _, q := range []struct {
					q   float64
					got float64
				}{{0.5, p.P50}, {0.99, p.P99}} {
					if want := exact(q.q); math.Abs(q.got-want)/want > QuantileError {
						t.Errorf("%s: p%v = %v, exact %v: off by %.2f%%, more than %.2f%%", when, 100*q.q, q.got, want,
							100*math.Abs(q.got-want)/want, 100*QuantileError)
					}
				}
			}
			check("in progress", h.Worker("app").Points[HistoryPoints-1])
			c.t = c.t.Add(HistoryStep)
			check("past", h.Worker("app").Points[HistoryPoints-2])
		})
	}
	if QuantileError > 0.05 {
		t.Errorf("the stated quantile error is %.2f%%, want under 5%%", 100*QuantileError)
	}
}

func TestHistoryMemory(t *testing.T) {
	c := newClock(0)
	h := NewHistory(c.now)
	h.Memory(map[string]int64{"app": 10 << 20, "api": 5 << 20})
	c.t = c.t.Add(HistoryStep)
	h.Memory(map[string]int64{"app": 12 << 20})
	c.t = c.t.Add(HistoryStep)
	h.Memory(nil)

	for _, tt := range []struct {
		name string
		w    Window
		want []int64 // the last three steps
	}{
		{"app", h.Worker("app"), []int64{10 << 20, 12 << 20, -1}},
		{"api", h.Worker("api"), []int64{5 << 20, -1, -1}},
		{"total", h.Total(), []int64{15 << 20, 12 << 20, 0}},
	} {
		var got []int64
		for _, p := range tt.w.Points[HistoryPoints-3:] {
			got = append(got, p.Memory)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s's memory = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestHistoryBound checks the stated bound: a series is about 12 KiB, and workers past
// MaxHistoryWorkers count in the total only.
func TestHistoryBound(t *testing.T) {
	if size := unsafe.Sizeof(series{}) + HistoryPoints*unsafe.Sizeof(point{}) + unsafe.Sizeof([latencyBins]uint32{}); size > 12.5*1024 {
		t.Errorf("a series takes %d bytes, more than the 12 KiB the History's comment states", size)
	}
	c := newClock(0)
	h := NewHistory(c.now)
	for i := range MaxHistoryWorkers + 5 {
		h.WorkerRequest(fmt.Sprintf("w%d", i), 200, time.Millisecond)
	}
	if len(h.workers) != MaxHistoryWorkers {
		t.Errorf("%d worker series, want at most %d", len(h.workers), MaxHistoryWorkers)
	}
	if got := h.Total().Points[HistoryPoints-1].Requests; got != MaxHistoryWorkers+5 {
		t.Errorf("the total counted %d requests, want %d", got, MaxHistoryWorkers+5)
	}
	if got := h.Worker(fmt.Sprintf("w%d", MaxHistoryWorkers)).Points[HistoryPoints-1].Requests; got != 0 {
		t.Errorf("a worker past the cap has %d requests of its own", got)
	}
}

func TestHistoryNil(t *testing.T) {
	var s *Set
	h := s.History()
	h.WorkerRequest("app", 200, time.Millisecond)
	h.APIRequest(200, time.Millisecond)
	h.Memory(map[string]int64{"app": 1})
	h.WatchMemory(func() map[string]int64 { return nil })()
	if w := h.Worker("app"); len(w.Points) != HistoryPoints || w.Points[0].Memory != -1 {
		t.Errorf("a nil history reads %+v", w.Points[0])
	}
}

func TestHistoryWatchMemory(t *testing.T) {
	c := newClock(0)
	h := NewHistory(c.now)
	read := make(chan struct{}, 1)
	stop := h.WatchMemory(func() map[string]int64 {
		select {
		case read <- struct{}{}:
		default:
		}
		return map[string]int64{"app": 42}
	})
	<-read // the first sample is taken at once
	stop()
	stop() // twice is fine
	if got := h.Worker("app").Points[HistoryPoints-1].Memory; got != 42 {
		t.Errorf("the sampled memory = %d, want 42", got)
	}
}

// BenchmarkHistoryWorkerRequest is the history's cost on every worker request, from parallel
// requests to a few workers (the runtime's total is one series for all of them).
func BenchmarkHistoryWorkerRequest(b *testing.B) {
	h := NewHistory(nil)
	names := []string{"a", "b", "c", "d"}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			h.WorkerRequest(names[i%len(names)], 200, time.Duration(i%1000)*time.Microsecond)
			i++
		}
	})
}
