package handlers

import (
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/metrics"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// statsDoc says what every stats answer holds.
const statsDoc = "The last hour in steps of 10 seconds, from the runtime's own memory: oldest first, the last step in progress. " +
	"A step without requests has 0 requests and null error rate and latencies; one without a memory sample, null memory. " +
	"Kept by this instance only, and lost when it restarts."

// statsAPI serves the request statistics of the runtime and of each worker, from the metrics'
// history.
type statsAPI struct {
	*pipeline
	workers *packages.Catalog
}

func (a *statsAPI) statsRoutes() []route {
	return []route{
		{
			method: "GET", path: "/stats", id: "runtimeStats", tag: "workers", permission: keystore.WorkersRead,
			summary: "Read the runtime's traffic over the last hour",
			description: "Requests per second, 5xx rate, p50 and p99 latency of every worker together and of the management API, " +
				"and the memory of every worker process. " + statsDoc + " Refused to a key restricted to namespaces, as the totals cover every namespace: " +
				"it reads its workers' stats.",
			responses: []response{
				{status: http.StatusOK, description: "The runtime's series", body: api.RuntimeStats{}},
				errorResponse(http.StatusForbidden, "The key is restricted to namespaces, and the whole runtime is outside them (NAMESPACE_DENIED)"),
			},
			handle: a.runtimeStats,
		},
		{
			method: "GET", path: "/workers/{scope}/{name}/stats", id: "workerStats", tag: "workers", permission: keystore.WorkersRead,
			summary: "Read a worker's traffic over the last hour",
			description: "Requests per second, 5xx rate, p50 and p99 latency of the worker (every version), and the memory of its " +
				"processes. " + statsDoc + " {scope} is _ or @scope.",
			responses: []response{
				{status: http.StatusOK, description: "The worker's series", body: api.WorkerStats{}},
				errorResponse(http.StatusBadRequest, "Malformed scope or name (INVALID_PACKAGE_NAME)"),
				errorResponse(http.StatusForbidden, "The worker is outside the key's namespaces (NAMESPACE_DENIED)"),
				errorResponse(http.StatusNotFound, "No such worker (WORKER_NOT_FOUND)"),
			},
			handle: a.workerStats,
		},
	}
}

func (a *statsAPI) runtimeStats(w http.ResponseWriter, r *http.Request) error {
	if p := principalOf(r.Context()); !p.Unrestricted() {
		// The totals include workers of every namespace.
		return envelope.Errorf(http.StatusForbidden, CodeNamespaceDenied,
			"the whole runtime's stats cover every namespace, and this key may only read %s; read a worker's stats at workers/{scope}/{name}/stats",
			strings.Join(p.Namespaces, ", "))
	}
	h := a.metrics.History()
	total, apiWin := h.Total(), h.API()
	body := api.RuntimeStats{Workers: statsSeries(total), API: statsSeries(apiWin)}
	body.Start, body.Step, body.Points = windowOf(total)
	envelope.WriteJSON(w, http.StatusOK, body)
	return nil
}

func (a *statsAPI) workerStats(w http.ResponseWriter, r *http.Request) error {
	name, err := existingWorker(a.workers, r)
	if err != nil {
		return err
	}
	win := a.metrics.History().Worker(name)
	body := api.WorkerStats{Worker: name, Stats: statsSeries(win)}
	body.Start, body.Step, body.Points = windowOf(win)
	envelope.WriteJSON(w, http.StatusOK, body)
	return nil
}

func windowOf(w metrics.Window) (start int64, step, points int) {
	return w.Start.Unix(), int(metrics.HistoryStep / time.Second), len(w.Points)
}

// thousandths rounds x to three decimals: the quantiles are not as precise, and the answer is
// shorter.
func thousandths(x float64) float64 { return math.Round(x*1000) / 1000 }

// statsSeries writes a window as the API's arrays.
func statsSeries(w metrics.Window) api.StatsSeries {
	n := len(w.Points)
	out := api.StatsSeries{Requests: make([]int64, n), RequestsPerSecond: make([]float64, n),
		ErrorRate: make([]*float64, n), P50Ms: make([]*float64, n), P99Ms: make([]*float64, n), MemoryBytes: make([]*int64, n)}
	step := metrics.HistoryStep.Seconds()
	for i, p := range w.Points {
		seconds := step
		if i == n-1 {
			seconds = max(w.Elapsed.Seconds(), 1)
		}
		out.Requests[i] = p.Requests
		out.RequestsPerSecond[i] = thousandths(float64(p.Requests) / seconds)
		if p.Requests > 0 {
			rate := float64(p.Errors) / float64(p.Requests)
			out.ErrorRate[i] = &rate
		}
		if p.Timed {
			p50, p99 := thousandths(p.P50*1000), thousandths(p.P99*1000)
			out.P50Ms[i], out.P99Ms[i] = &p50, &p99
		}
		if p.Memory >= 0 {
			m := p.Memory
			out.MemoryBytes[i] = &m
		}
	}
	return out
}
