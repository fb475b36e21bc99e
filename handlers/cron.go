package handlers

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// cronDocument describes cron triggers in the routes' descriptions.
const cronDocument = "A worker's manifest key cron lists requests the runtime sends it on a schedule " +
	"(schedule: five cron fields, @hourly and the other descriptors, or @every 30s; path; method, POST by default; timeout, the worker's by default; timezone, UTC by default). " +
	"Each tick goes to the worker's active version as an unpinned request, with the header Runtime-Cron naming the entry and its own X-Request-Id. " +
	"In a cluster one instance runs each tick (the holder of a lease on the key store's primary); a tick whose trigger's previous run has not ended is skipped. " +
	"The runs are kept in the key store, the last 100 of each worker."

// cronAPI serves a worker's cron triggers: their listing with next and last runs, and pausing
// and resuming them.
type cronAPI struct {
	*pipeline
	workers     *packages.Catalog
	activations *workers.Activations
	changed     func() // tells the scheduler here a pause or resume was written; nil: none runs here
}

func (a *cronAPI) cronRoutes() []route {
	path := "/workers/{scope}/{name}/cron"
	badName := errorResponse(http.StatusBadRequest, "Malformed scope or name (INVALID_PACKAGE_NAME)")
	namespace := errorResponse(http.StatusForbidden, "The worker is outside the key's namespaces (NAMESPACE_DENIED)")
	notFound := errorResponse(http.StatusNotFound, "No such worker (WORKER_NOT_FOUND)")
	unavailable := errorResponse(http.StatusServiceUnavailable, "Sync and cluster mode: the key store primary cannot be reached (KEY_STORE_UNAVAILABLE)")
	ok := response{status: http.StatusOK, description: "The worker's triggers, whether they are paused, and their last runs", body: api.WorkerCron{}}
	toggle := func(method, suffix, id, summary, description string, paused bool) route {
		return route{
			method: method, path: path + suffix, id: id, tag: "workers", permission: keystore.WorkersInstall,
			summary: summary, description: description + " Audited. " + cronDocument,
			responses: []response{ok, badName, namespace, notFound, unavailable},
			handle:    func(w http.ResponseWriter, r *http.Request) error { return a.setPaused(w, r, paused) },
		}
	}
	return []route{
		{
			method: "GET", path: path, id: "getWorkerCron", tag: "workers", permission: keystore.WorkersRead,
			summary:     "List a worker's cron triggers and their runs",
			description: "Each trigger of the worker's active version with its next tick, whether the worker's triggers are paused, and the last runs. " + cronDocument,
			responses:   []response{ok, badName, namespace, notFound, unavailable},
			handle:      a.getCron,
		},
		toggle("POST", "/pause", "pauseWorkerCron", "Pause a worker's cron triggers",
			"No tick of the worker's triggers runs until they are resumed, on any instance; pausing paused triggers changes nothing.", true),
		toggle("POST", "/resume", "resumeWorkerCron", "Resume a worker's cron triggers",
			"Ticks run again from the next one; the ticks missed while paused are not run.", false),
	}
}

// cronWorker reads and authorizes the worker a cron route acts on.
func (a *cronAPI) cronWorker(r *http.Request) (packages.Unit, *keystore.Store, error) {
	return a.installedWorker(r, a.workers)
}

func (a *cronAPI) getCron(w http.ResponseWriter, r *http.Request) error {
	u, store, err := a.cronWorker(r)
	if err != nil {
		return err
	}
	return a.answer(w, r, store, u)
}

func (a *cronAPI) setPaused(w http.ResponseWriter, r *http.Request, paused bool) error {
	u, store, err := a.cronWorker(r)
	if err != nil {
		return err
	}
	action := map[bool]string{true: "worker.cron.pause", false: "worker.cron.resume"}[paused]
	p := principalOf(r.Context())
	if err := store.Cron.SetPaused(r.Context(), u.Name, paused, p); err != nil {
		a.audit(r, action, u.Name, "failed", &p)
		return err
	}
	a.audit(r, action, u.Name, "success", &p)
	if a.changed != nil {
		a.changed()
	}
	return a.answer(w, r, store, u)
}

// endCron forgets the runs and the pause of a worker removed whole; a failure is logged.
func (a *cronAPI) endCron(r *http.Request, name string) {
	store, err := a.keyStore()
	if err == nil {
		err = store.Cron.Forget(r.Context(), name)
	}
	if err != nil {
		a.logger.Warn("the cron runs and pause of a removed worker could not be forgotten; a worker uploaded under its name lists them",
			zap.String("worker", name), zap.Error(err))
	}
}

// answer writes the cron record of u.
func (a *cronAPI) answer(w http.ResponseWriter, r *http.Request, store *keystore.Store, u packages.Unit) error {
	paused, err := store.Cron.Paused(r.Context())
	if err != nil {
		return err
	}
	runs, err := store.Cron.Runs(r.Context(), u.Name)
	if err != nil {
		return err
	}
	triggers, version := workers.CronOf(u, a.activations.Get(u.Name))
	out := api.WorkerCron{Name: u.Name, Version: version, Triggers: []api.CronTrigger{}, Runs: []api.CronRun{}}
	if pause, ok := paused[u.Name]; ok {
		out.Paused, out.PausedBy = true, pause.PausedByPrefix
		out.PausedAt = time.Unix(pause.PausedAt, 0).UTC().Format(time.RFC3339)
	}
	now := time.Now()
	for _, t := range triggers {
		ct := api.CronTrigger{Name: t.Name, Schedule: t.Schedule, Timezone: t.Timezone, Method: t.Method, Path: t.Path,
			Timeout: time.Duration(t.Timeout).String()}
		if ct.Timezone == "" {
			ct.Timezone = "UTC"
		}
		if next := t.Next(now); !next.IsZero() {
			ct.NextRun = next.UTC().Format(time.RFC3339)
		}
		out.Triggers = append(out.Triggers, ct)
	}
	for _, run := range runs {
		out.Runs = append(out.Runs, api.CronRun{Trigger: run.Trigger, ScheduledAt: millis(run.ScheduledAt), StartedAt: millis(run.StartedAt),
			Instance: run.Instance, Status: run.Status, HTTPStatus: run.HTTPStatus, DurationMs: run.DurationMS, Error: run.Error, RequestID: run.RequestID})
	}
	envelope.WriteJSON(w, http.StatusOK, out)
	return nil
}

// millis formats Unix milliseconds as RFC 3339 with milliseconds, in UTC.
func millis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
