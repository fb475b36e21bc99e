package metrics

import (
	"math"
	"sync"
	"time"
)

// The history's shape: HistoryPoints steps of HistoryStep, the last hour.
const (
	HistoryStep   = 10 * time.Second
	HistoryPoints = 360
)

// MaxHistoryWorkers caps the workers with a history of their own at once. A worker past it is
// counted in the runtime's total only, until a worker idle for the whole window makes room.
const MaxHistoryWorkers = MaxWorkerSeries

// Latency bins: geometric, binsPerOctave to a doubling, from minLatency up. A quantile is read
// as the geometric middle of the bin that holds it, so it is within quantileError of the
// sample at that rank (between minLatency and maxLatency).
const (
	binsPerOctave = 8
	octaves       = 30
	latencyBins   = binsPerOctave * octaves
	minLatency    = time.Microsecond // 2^30 µs, about 18 minutes, is the top bin's upper edge
)

// QuantileError is the largest relative error of a latency quantile: half a bin, 2^(1/16)-1.
var QuantileError = math.Pow(2, 1/(2.0*binsPerOctave)) - 1

// History keeps the last hour of traffic in HistoryStep buckets: for the whole runtime's
// workers, for the management API and for each worker, the requests, the 5xx answers, p50 and
// p99 latency and, for process workers, their processes' memory. A bucket in progress keeps a
// latency histogram; a past bucket keeps only the two quantiles read from it, so a series
// costs about 12 KiB (its ring of HistoryPoints points and one histogram) whatever its traffic.
// A worker costs nothing until it has a request or a process, and its series goes once it has
// been idle for the whole window; at most MaxHistoryWorkers workers have one, so the history
// stays under (MaxHistoryWorkers+2) × 12 KiB, about 2.4 MiB.
type History struct {
	now func() time.Time

	total, api *series

	mu      sync.RWMutex
	workers map[string]*series
}

// NewHistory returns an empty history; now tells the time (nil: time.Now).
func NewHistory(now func() time.Time) *History {
	if now == nil {
		now = time.Now
	}
	return &History{now: now, total: &series{}, api: &series{}, workers: map[string]*series{}}
}

// series is one history: a ring of past points and the bucket in progress.
type series struct {
	mu   sync.Mutex
	ring []point // HistoryPoints past points by bucket number modulo HistoryPoints; nil until used
	cur  bucket
	hist *[latencyBins]uint32 // the latencies of cur; nil until one is recorded
	last int64                // the step of the latest request or sample
}

// bucket is the step in progress.
type bucket struct {
	n      int64 // the step's number: Unix time / HistoryStep; 0 when the series is new
	count  uint32
	errors uint32
	memory int64 // the last memory sample of the step, -1 for none
	timed  uint32
}

// point is a past step.
type point struct {
	n             int64
	count, errors uint32
	p50, p99      float32 // seconds; 0 when the step had no timed request
	memory        int64   // -1: no sample
}

func stepOf(t time.Time) int64 { return t.UnixNano() / int64(HistoryStep) }

// WorkerRequest records a request to worker answered with status in d, in the worker's
// series and the runtime's total.
func (h *History) WorkerRequest(worker string, status int, d time.Duration) {
	if h == nil {
		return
	}
	n := stepOf(h.now())
	h.total.request(n, status, d)
	if s := h.worker(worker, true); s != nil {
		s.request(n, status, d)
	}
}

// APIRequest records a management API request answered with status; d < 0 records it without
// a latency (a followed stream, whose length says nothing about the API's speed).
func (h *History) APIRequest(status int, d time.Duration) {
	if h == nil {
		return
	}
	h.api.request(stepOf(h.now()), status, d)
}

// Memory records the memory of each worker's processes now, by worker name; workers absent
// from it have no process. The runtime's total is their sum.
func (h *History) Memory(byWorker map[string]int64) {
	if h == nil {
		return
	}
	n := stepOf(h.now())
	var sum int64
	for name, bytes := range byWorker {
		sum += bytes
		if s := h.worker(name, true); s != nil {
			s.sample(n, bytes)
		}
	}
	h.total.sample(n, sum)
	h.sweep(n)
}

// WatchMemory records the memory read returns (see Memory) now and then every HistoryStep,
// until stop is called.
func (h *History) WatchMemory(read func() map[string]int64) (stop func()) {
	if h == nil {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(HistoryStep)
		defer tick.Stop()
		for {
			h.Memory(read())
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			<-done
		})
	}
}

// worker returns the series of a worker, creating it when add is set and there is room.
func (h *History) worker(name string, add bool) *series {
	h.mu.RLock()
	s := h.workers[name]
	h.mu.RUnlock()
	if s != nil || !add {
		return s
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if s = h.workers[name]; s == nil && len(h.workers) < MaxHistoryWorkers {
		s = &series{}
		h.workers[name] = s
	}
	return s
}

// sweep drops the series of workers with no data in the window that ends at step n.
func (h *History) sweep(n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, s := range h.workers {
		s.mu.Lock()
		idle := s.last <= n-HistoryPoints
		s.mu.Unlock()
		if idle {
			delete(h.workers, name)
		}
	}
}

// roll makes step n the bucket in progress, keeping the one before as a past point; the lock
// is held. A sample for a step already past (a clock that went back) lands in the current one.
func (s *series) roll(n int64) {
	if n <= s.cur.n {
		return
	}
	if s.ring == nil {
		s.ring = make([]point, HistoryPoints)
	} else if s.cur.n != 0 {
		p := point{n: s.cur.n, count: s.cur.count, errors: s.cur.errors, memory: s.cur.memory}
		if s.cur.timed > 0 {
			p.p50, p.p99 = float32(quantile(s.hist, s.cur.timed, 0.5)), float32(quantile(s.hist, s.cur.timed, 0.99))
		}
		s.ring[s.cur.n%HistoryPoints] = p
	}
	if s.hist != nil {
		*s.hist = [latencyBins]uint32{}
	}
	s.cur = bucket{n: n, memory: -1}
}

func (s *series) request(n int64, status int, d time.Duration) {
	s.mu.Lock()
	s.roll(n)
	s.last = max(s.last, n)
	s.cur.count++
	if status >= 500 {
		s.cur.errors++
	}
	if d >= 0 {
		if s.hist == nil {
			s.hist = new([latencyBins]uint32)
		}
		s.hist[binOf(d)]++
		s.cur.timed++
	}
	s.mu.Unlock()
}

func (s *series) sample(n int64, bytes int64) {
	s.mu.Lock()
	s.roll(n)
	s.last = max(s.last, n)
	s.cur.memory = bytes
	s.mu.Unlock()
}

// binOf is the latency bin of d.
func binOf(d time.Duration) int {
	if d <= minLatency {
		return 0
	}
	b := int(math.Log2(float64(d)/float64(minLatency)) * binsPerOctave)
	return min(b, latencyBins-1)
}

// quantile reads the q-quantile (nearest rank) of the n latencies in hist, in seconds: the
// geometric middle of the bin holding the sample of rank ⌈q·n⌉.
func quantile(hist *[latencyBins]uint32, n uint32, q float64) float64 {
	rank := uint32(math.Ceil(q * float64(n)))
	rank = max(rank, 1)
	var seen uint32
	for i, c := range hist {
		seen += c
		if seen >= rank {
			return minLatency.Seconds() * math.Pow(2, (float64(i)+0.5)/binsPerOctave)
		}
	}
	return 0
}

// Point is one step of a series as read.
type Point struct {
	Requests, Errors int64
	// P50 and P99 are latencies in seconds; Timed is false when the step had no timed request.
	P50, P99 float64
	Timed    bool
	// Memory is the processes' memory in bytes, -1 when there was no sample.
	Memory int64
}

// Window is a read of a series: Points steps of HistoryStep from Start, the last one in
// progress (Elapsed of it has passed).
type Window struct {
	Start   time.Time
	Elapsed time.Duration
	Points  []Point
}

// Total reads the history of every worker request together.
func (h *History) Total() Window {
	if h == nil {
		return h.read(nil)
	}
	return h.read(h.total)
}

// API reads the history of the management API's requests.
func (h *History) API() Window {
	if h == nil {
		return h.read(nil)
	}
	return h.read(h.api)
}

// Worker reads the history of a worker; one with no series reads as empty steps.
func (h *History) Worker(name string) Window {
	if h == nil {
		return h.read(nil)
	}
	return h.read(h.worker(name, false))
}

func (h *History) read(s *series) Window {
	now := time.Now()
	if h != nil {
		now = h.now()
	}
	n := stepOf(now)
	first := n - HistoryPoints + 1
	w := Window{Start: time.Unix(0, first*int64(HistoryStep)), Elapsed: now.Sub(time.Unix(0, n*int64(HistoryStep))),
		Points: make([]Point, HistoryPoints)}
	for i := range w.Points {
		w.Points[i].Memory = -1
	}
	if s == nil {
		return w
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roll(n)
	for i := range w.Points[:HistoryPoints-1] {
		p := s.ring[(first+int64(i))%HistoryPoints]
		if p.n != first+int64(i) {
			continue // a step without data, or one older than the window
		}
		w.Points[i] = Point{Requests: int64(p.count), Errors: int64(p.errors), P50: float64(p.p50), P99: float64(p.p99),
			Timed: p.p50 > 0, Memory: p.memory}
	}
	last := &w.Points[HistoryPoints-1]
	*last = Point{Requests: int64(s.cur.count), Errors: int64(s.cur.errors), Memory: s.cur.memory, Timed: s.cur.timed > 0}
	if last.Timed {
		last.P50, last.P99 = quantile(s.hist, s.cur.timed, 0.5), quantile(s.hist, s.cur.timed, 0.99)
	}
	return w
}
