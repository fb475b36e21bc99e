// Package metrics holds the runtime's Prometheus series. Caddy gives each config load its own
// registry, so the series live in a Set that outlasts the loads: each load registers the Set
// with its registry, and the counts carry on across reloads.
package metrics

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxWorkerSeries caps the worker names that get series of their own; requests to further
// workers count under the worker label "other", so uploads cannot grow the series without end.
const MaxWorkerSeries = 200

// OtherWorker is the worker label of the workers past MaxWorkerSeries.
const OtherWorker = "other"

// Set is the runtime's series. Its methods may be called on a nil Set, which records
// nothing, so code that runs without metrics (unit tests, tools) need not care.
type Set struct {
	apiRequests     *prometheus.CounterVec
	authFailures    *prometheus.CounterVec
	workerRequests  *prometheus.CounterVec
	workerDuration  *prometheus.HistogramVec
	processStarts   *prometheus.CounterVec
	processCrashes  *prometheus.CounterVec
	processRestarts *prometheus.CounterVec
	crashLoops      *prometheus.CounterVec
	processes       *prometheus.Desc
	installDuration *prometheus.HistogramVec
	installBytes    *prometheus.CounterVec
	reloadDuration  prometheus.Histogram
	reloadFailures  prometheus.Counter
	keyStoreQueries *prometheus.HistogramVec
	reconcileFails  *prometheus.CounterVec
	wasmModules     *prometheus.CounterVec
	cronRuns        *prometheus.CounterVec
	cronDuration    *prometheus.HistogramVec

	workersMu sync.RWMutex
	workers   map[string]map[string]struct{} // the worker names with series of their own, and their versions that have

	poolsMu sync.Mutex
	pools   map[*poolSource]struct{}

	history *History
}

// poolSource counts the processes of one pool by state.
type poolSource struct{ count func() map[string]int }

// ProcessStates are the states the process gauge reports, zero included; crash-looping counts
// the worker versions that crashed repeatedly and wait to start again (no process is alive).
var ProcessStates = []string{"starting", "running", "draining", "crash-looping"}

// New returns a Set with every series at zero.
func New() *Set {
	const ns = "runtime"
	s := &Set{
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "api_requests_total",
			Help: "Management API requests by route pattern and status code."}, []string{"route", "code"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "auth_failures_total",
			Help: "Management API requests refused by authentication or authorization, by reason."}, []string{"reason"}),
		workerRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "worker_requests_total",
			Help: "Requests served by workers, by worker name, version and status code."}, []string{"worker", "version", "code"}),
		workerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "worker_request_duration_seconds",
			Help: "Time to serve a worker request, until its handler returned, by worker name and version.", Buckets: prometheus.DefBuckets},
			[]string{"worker", "version"}),
		processStarts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "worker_process_starts_total",
			Help: "Worker processes started and ready, by worker name."}, []string{"worker"}),
		processCrashes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "worker_process_crashes_total",
			Help: "Worker processes that exited unasked or failed to start, by worker name."}, []string{"worker"}),
		processRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "worker_process_restarts_total",
			Help: "Worker processes restarted on request (POST .../restart), by worker name."}, []string{"worker"}),
		crashLoops: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "worker_crash_loops_total",
			Help: "Times a worker version began to crash-loop (its process crashed 3 times in a row, each soon after it started), by worker name."}, []string{"worker"}),
		processes: prometheus.NewDesc(ns+"_worker_processes", "Worker processes alive now, by state; crash-looping: worker versions whose process crashed repeatedly and waits to start again.", []string{"state"}, nil),
		installDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "install_duration_seconds",
			Help:    "Time to check and install an uploaded archive, by kind (worker or plugin) and outcome.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"kind", "outcome"}),
		installBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "install_bytes_total",
			Help: "Bytes of installed archives once unpacked, by kind (worker or plugin)."}, []string{"kind"}),
		reloadDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "plugin_reload_duration_seconds",
			Help: "Time to rebuild the plugin table.", Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}}),
		reloadFailures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "plugin_load_failures_total",
			Help: "Plugins that failed to load in a plugin reload (one per plugin and reload)."}),
		keyStoreQueries: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "keystore_query_duration_seconds",
			Help:    "Time of key store queries that reach the database, by operation.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}}, []string{"op"}),
		reconcileFails: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "reconcile_failures_total",
			Help: "Cluster mode: unit versions this instance failed to converge, by kind and class (missing, corrupt, unavailable, store, install); once per unit version and failure, not per retry."},
			[]string{"kind", "class"}),
		wasmModules: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "wasm_modules_ready_total",
			Help: "WebAssembly modules made ready to run, by source: compiled, or read from the compilation cache in state_dir (cache)."},
			[]string{"source"}),
		cronRuns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "cron_runs_total",
			Help: "Ticks of workers' cron triggers this instance ran, by outcome (ok, failed, timeout, skipped)."}, []string{"outcome"}),
		cronDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "cron_run_duration_seconds",
			Help: "Time of a cron trigger's request to the worker, until it answered, failed or timed out, by outcome.", Buckets: prometheus.DefBuckets},
			[]string{"outcome"}),
		workers: map[string]map[string]struct{}{},
		pools:   map[*poolSource]struct{}{},
		history: NewHistory(nil),
	}
	// Both sources from zero, so a scrape reads 0 compilations rather than no series.
	s.wasmModules.WithLabelValues("compiled")
	s.wasmModules.WithLabelValues("cache")
	for _, outcome := range CronOutcomes {
		s.cronRuns.WithLabelValues(outcome)
	}
	return s
}

// History is the last hour of the requests the Set counts, for charts; nil for a nil Set.
func (s *Set) History() *History {
	if s == nil {
		return nil
	}
	return s.history
}

// collectors are the Set's series other than the process gauge, which is read at scrape time.
func (s *Set) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.apiRequests, s.authFailures, s.workerRequests, s.workerDuration,
		s.processStarts, s.processCrashes, s.processRestarts, s.crashLoops, s.installDuration, s.installBytes,
		s.reloadDuration, s.reloadFailures, s.keyStoreQueries, s.reconcileFails, s.wasmModules, s.cronRuns, s.cronDuration}
}

// Describe implements prometheus.Collector.
func (s *Set) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range s.collectors() {
		c.Describe(ch)
	}
	ch <- s.processes
}

// Collect implements prometheus.Collector.
func (s *Set) Collect(ch chan<- prometheus.Metric) {
	for _, c := range s.collectors() {
		c.Collect(ch)
	}
	totals := map[string]int{}
	s.poolsMu.Lock()
	for src := range s.pools {
		for state, n := range src.count() {
			totals[state] += n
		}
	}
	s.poolsMu.Unlock()
	for _, state := range ProcessStates {
		ch <- prometheus.MustNewConstMetric(s.processes, prometheus.GaugeValue, float64(totals[state]), state)
	}
}

// Register adds the Set to reg, a config load's registry; registering it again with the same
// registry (two handlers of one config) is not an error. A nil reg is ignored.
func (s *Set) Register(reg *prometheus.Registry) error {
	if s == nil || reg == nil {
		return nil
	}
	err := reg.Register(s)
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		return nil
	}
	return err
}

// AddPool makes the process gauge include a pool, whose count gives its processes by state;
// the returned function takes it out again.
func (s *Set) AddPool(count func() map[string]int) (remove func()) {
	if s == nil {
		return func() {}
	}
	src := &poolSource{count: count}
	s.poolsMu.Lock()
	s.pools[src] = struct{}{}
	s.poolsMu.Unlock()
	return func() {
		s.poolsMu.Lock()
		delete(s.pools, src)
		s.poolsMu.Unlock()
	}
}

// MaxVersionSeries caps the versions of one worker that get series of their own; requests to
// further versions count under the version label "other".
const MaxVersionSeries = 20

// OtherVersion is the version label of the versions past MaxVersionSeries, and of the
// workers past MaxWorkerSeries.
const OtherVersion = "other"

// workerLabel is the label of a worker name: the name itself for the first MaxWorkerSeries
// names seen, OtherWorker after that.
func (s *Set) workerLabel(name string) string {
	label, _ := s.workerLabels(name, "")
	return label
}

// workerLabels are the labels of a worker name and version: the name itself for the first
// MaxWorkerSeries names seen, OtherWorker after that; the version itself for the first
// MaxVersionSeries versions of a worker seen, OtherVersion after that ("" stays "").
func (s *Set) workerLabels(name, version string) (string, string) {
	s.workersMu.RLock()
	versions, ok := s.workers[name]
	_, vok := versions[version]
	n, nv := len(s.workers), len(versions)
	s.workersMu.RUnlock()
	if ok && (vok || version == "") {
		return name, version
	}
	if !ok && n >= MaxWorkerSeries {
		return OtherWorker, OtherVersion
	}
	if ok && nv >= MaxVersionSeries {
		return name, OtherVersion
	}
	s.workersMu.Lock()
	defer s.workersMu.Unlock()
	versions, ok = s.workers[name]
	if !ok {
		if len(s.workers) >= MaxWorkerSeries {
			return OtherWorker, OtherVersion
		}
		versions = map[string]struct{}{}
		s.workers[name] = versions
	}
	if version == "" {
		return name, version
	}
	if _, vok := versions[version]; !vok {
		if len(versions) >= MaxVersionSeries {
			return name, OtherVersion
		}
		versions[version] = struct{}{}
	}
	return name, version
}

// APIRequest counts an API request answered with status by the route pattern (e.g.
// "GET /workers/{scope}/{name}/logs"; "unmatched" when no route matched).
func (s *Set) APIRequest(route string, status int) {
	if s == nil {
		return
	}
	s.apiRequests.WithLabelValues(route, code(status)).Inc()
	s.history.APIRequest(status, -1)
}

// RouteCounter counts the answers of one API route: the 200s on a counter resolved once,
// the others by status.
type RouteCounter struct {
	s     *Set
	route string
	ok    prometheus.Counter
}

// Route returns the counter of the API route labelled route.
func (s *Set) Route(route string) *RouteCounter {
	if s == nil {
		return nil
	}
	return &RouteCounter{s: s, route: route, ok: s.apiRequests.WithLabelValues(route, "200")}
}

// Count counts an answer with status (0: a handler that wrote nothing, so 200) given in d;
// d < 0 keeps it out of the latency history (a followed stream).
func (c *RouteCounter) Count(status int, d time.Duration) {
	if c == nil {
		return
	}
	c.s.history.APIRequest(status, d)
	if status == 0 || status == 200 {
		c.ok.Inc()
		return
	}
	c.s.apiRequests.WithLabelValues(c.route, code(status)).Inc()
}

// AuthFailure counts a request refused for reason (e.g. "missing_credential").
func (s *Set) AuthFailure(reason string) {
	if s == nil {
		return
	}
	s.authFailures.WithLabelValues(reason).Inc()
}

// WorkerRequest counts a request that version of worker answered with status in d.
func (s *Set) WorkerRequest(worker, version string, status int, d time.Duration) {
	if s == nil {
		return
	}
	label, vlabel := s.workerLabels(worker, version)
	s.workerRequests.WithLabelValues(label, vlabel, code(status)).Inc()
	s.workerDuration.WithLabelValues(label, vlabel).Observe(d.Seconds())
	s.history.WorkerRequest(worker, status, d)
}

// CronOutcomes are the outcomes of a cron run, each counted from zero.
var CronOutcomes = []string{"ok", "failed", "timeout", "skipped"}

// CronRun counts a tick of a cron trigger by its outcome, and the time its request took (none
// for a skipped tick, which sent none).
func (s *Set) CronRun(outcome string, took time.Duration) {
	if s == nil {
		return
	}
	s.cronRuns.WithLabelValues(outcome).Inc()
	if outcome != "skipped" {
		s.cronDuration.WithLabelValues(outcome).Observe(took.Seconds())
	}
}

// WasmModule counts a WebAssembly module made ready to run: read from the compilation cache
// (cached) or compiled.
func (s *Set) WasmModule(cached bool) {
	if s == nil {
		return
	}
	source := "compiled"
	if cached {
		source = "cache"
	}
	s.wasmModules.WithLabelValues(source).Inc()
}

// ProcessStarted counts a worker process that started and became ready.
func (s *Set) ProcessStarted(worker string) {
	if s != nil {
		s.processStarts.WithLabelValues(s.workerLabel(worker)).Inc()
	}
}

// ProcessCrashed counts a worker process that exited unasked or failed to start.
func (s *Set) ProcessCrashed(worker string) {
	if s != nil {
		s.processCrashes.WithLabelValues(s.workerLabel(worker)).Inc()
	}
}

// CrashLooping counts a worker version that began to crash-loop.
func (s *Set) CrashLooping(worker string) {
	if s != nil {
		s.crashLoops.WithLabelValues(s.workerLabel(worker)).Inc()
	}
}

// ProcessRestarted counts a worker process restarted on request.
func (s *Set) ProcessRestarted(worker string) {
	if s != nil {
		s.processRestarts.WithLabelValues(s.workerLabel(worker)).Inc()
	}
}

// Install records an upload of kind ("worker" or "plugin") that took d and ended in outcome
// ("installed", "dry_run" or "refused"); bytes, its unpacked size, counts when installed.
func (s *Set) Install(kind, outcome string, d time.Duration, bytes int64) {
	if s == nil {
		return
	}
	s.installDuration.WithLabelValues(kind, outcome).Observe(d.Seconds())
	if outcome == "installed" && bytes > 0 {
		s.installBytes.WithLabelValues(kind).Add(float64(bytes))
	}
}

// PluginReload records a plugin reload that took d and in which failed plugins did not load.
func (s *Set) PluginReload(d time.Duration, failed int) {
	if s == nil {
		return
	}
	s.reloadDuration.Observe(d.Seconds())
	s.reloadFailures.Add(float64(failed))
}

// ReconcileFailure counts a unit version of kind (worker or plugin) that this instance
// failed to converge with the desired state, for the reason class.
func (s *Set) ReconcileFailure(kind, class string) {
	if s != nil {
		s.reconcileFails.WithLabelValues(kind, class).Inc()
	}
}

// KeyStoreQuery records a key store query of operation op that took d.
func (s *Set) KeyStoreQuery(op string, d time.Duration) {
	if s != nil {
		s.keyStoreQueries.WithLabelValues(op).Observe(d.Seconds())
	}
}

// code is a status code as a label; a handler that wrote nothing answered 200.
func code(status int) string {
	if status == 0 {
		status = 200
	}
	return strconv.Itoa(status)
}
