package handlers

import (
	"net/http"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// poolAPI serves the process pool: the running processes of process workers, and restarting
// a worker's.
type poolAPI struct {
	*pipeline
	workers *packages.Catalog
	pool    func() *workers.Pool // nil until the runtime has started
}

func (a *poolAPI) poolRoutes() []route {
	return []route{
		{
			method: "GET", path: "/workers/pool", id: "listWorkerProcesses", tag: "workers", permission: keystore.WorkersRead,
			summary: "List the running worker processes",
			description: "The process pool: one entry per process of a process worker, draining ones included, and one per crash-looping " +
				"version waiting to start again, filtered to the key's namespaces.",
			responses: []response{{status: http.StatusOK, description: "The processes, by worker and version", body: []api.PoolProcess{}}},
			handle:    a.listPool,
		},
		{
			method: "POST", path: "/workers/{scope}/{name}/restart", id: "restartWorker", tag: "workers", permission: keystore.WorkersRestart,
			summary: "Restart a worker's processes",
			description: "Starts a new process for every running version of the worker and drains the old one: requests in " +
				"flight finish on it, the next go to the new process. A worker with no running process is left as it is. {scope} is _ or @scope.",
			responses: []response{
				{status: http.StatusOK, description: "The versions restarted", body: api.WorkerRestarted{}},
				errorResponse(http.StatusBadRequest, "Malformed scope or name (INVALID_PACKAGE_NAME)"),
				errorResponse(http.StatusForbidden, "The worker is outside the key's namespaces (NAMESPACE_DENIED)"),
				errorResponse(http.StatusNotFound, "No such worker (WORKER_NOT_FOUND)"),
			},
			handle: a.restartWorker,
		},
	}
}

func (a *poolAPI) listPool(w http.ResponseWriter, r *http.Request) error {
	out := []api.PoolProcess{}
	pool := a.pool()
	if pool == nil {
		envelope.WriteJSON(w, http.StatusOK, out)
		return nil
	}
	p := principalOf(r.Context())
	for _, st := range pool.Status() {
		if !p.CanAccess(st.Name) {
			continue
		}
		out = append(out, api.PoolProcess{Worker: st.Name, Version: st.Version, PID: st.PID, State: string(st.State),
			StartedAt: timestamp(st.StartedAt), Requests: st.Requests, InFlight: st.InFlight,
			LastRequest: timestamp(st.LastRequest), Restarts: st.Restarts, MemoryBytes: max(st.RSS, 0),
			Crashes: st.Crashes, RetryAt: timestamp(st.RetryAt)})
	}
	envelope.WriteJSON(w, http.StatusOK, out)
	return nil
}

// timestamp formats t as RFC 3339 in UTC, or "" for the zero time.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func (a *poolAPI) restartWorker(w http.ResponseWriter, r *http.Request) error {
	name, err := existingWorker(a.workers, r)
	if err != nil {
		return err
	}
	var body api.WorkerRestarted
	body.Success, body.Data.Name, body.Data.Restarted = true, name, []string{}
	return a.act(w, r, "worker.restart", name, func() error {
		if pool := a.pool(); pool != nil {
			body.Data.Restarted = append(body.Data.Restarted, pool.Restart(name, "")...)
		}
		return nil
	}, &body)
}

// existingWorker names the worker a request targets, or fails with the
// spec's 404 when no such worker is installed.
func existingWorker(workers *packages.Catalog, r *http.Request) (string, error) {
	c, err := catalog(workers)
	if err != nil {
		return "", err
	}
	name, _, err := workerTarget(r)
	if err != nil {
		return "", err
	}
	if _, err := c.Lookup(name); err != nil {
		return "", packageError(err)
	}
	return name, nil
}
