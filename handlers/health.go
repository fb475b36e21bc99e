package handlers

import (
	"net/http"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/hosts"
)

// healthAPI serves discovery and the health probes: it holds what they report.
type healthAPI struct {
	*pipeline
	version       string
	workersURL    string       // "" when workers share the API's origin
	workersDomain hosts.Domain // a host per worker when set
	readiness     func() error // why the runtime cannot take traffic yet, or nil
}

func (a *healthAPI) healthRoutes() []route {
	probe := func(status string) handlerFunc {
		// Encoded once: probes are the most frequent requests and always answer the same.
		body := envelope.EncodeJSON(api.Health{OK: true, Status: status, Version: a.version})
		return func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
			return nil
		}
	}
	return []route{
		{
			method: "GET", path: api.DiscoveryPath, id: "discover", tag: "discovery", public: true,
			summary:     "Discover the API path, the runtime version and where workers are served",
			description: "Clients read `api` to find the API path, which moves under a configured prefix, `workers` to build links to workers when they are served on their own origin, and `workersDomain` when each worker has a host of its own.",
			responses:   []response{{status: http.StatusOK, description: "The API path and version, and the workers' base URL", body: api.Discovery{}}},
			handle: func(w http.ResponseWriter, r *http.Request) error {
				envelope.WriteJSON(w, http.StatusOK, api.Discovery{API: a.apiPath(r), Version: a.version, Workers: a.workersURL,
					WorkersDomain: a.workersDomain.BaseURL()})
				return nil
			},
		},
		{
			method: "GET", path: "/health", id: "health", probe: true, tag: "health", public: true,
			summary:     "General health",
			description: "Answers 200 with a fixed body cheap enough for frequent checks once the runtime can answer its API: a request that arrives while it starts waits for the start, so that a script waiting for health can act at once. `health/ready` says whether it should take traffic, `health/live` whether the process answers at all.",
			responses:   []response{{status: http.StatusOK, description: "The runtime is serving", body: api.Health{}}},
			handle:      probe("healthy"),
		},
		{
			method: "GET", path: "/health/ready", id: "healthReady", probe: true, immediate: true, tag: "health", public: true,
			summary: "Readiness probe",
			description: "Answers 503 while the runtime is starting or shutting down, so a load balancer sends no new traffic, in sync mode until the key store's replica has pulled from its primary once, " +
				"and in cluster mode until this instance's first reconcile has gone through the desired state. " +
				"In sync mode the answer says whether the key store is degraded (its primary unreachable); the instance stays ready, as its replica checks credentials.",
			responses: []response{
				{status: http.StatusOK, description: "Ready to take traffic", body: api.Health{}},
				errorResponse(http.StatusServiceUnavailable, "Starting or shutting down, in sync mode before the key store's first pull from its primary, or in cluster mode before the first reconcile (code NOT_READY)"),
			},
			handle: a.ready(probe("ready")),
		},
		{
			method: "GET", path: "/health/live", id: "healthLive", probe: true, immediate: true, tag: "health", public: true,
			summary:     "Liveness probe",
			description: "Answers 200 whenever the process answers HTTP, starting or shutting down included, so that a liveness check restarts only a runtime that answers nothing.",
			responses:   []response{{status: http.StatusOK, description: "The process is alive", body: api.Health{}}},
			handle:      probe("live"),
		},
	}
}

// ready answers the readiness probe: with the fixed answer probe where the key store is local,
// and with the state of the key store's primary in sync mode.
func (a *healthAPI) ready(probe handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := a.readiness(); err != nil {
			return envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "%v", err)
		}
		store, err := a.keyStore()
		if err != nil {
			return probe(w, r) // no key store to report on: Ready speaks for the runtime
		}
		st, ok := store.Sync()
		if !ok {
			return probe(w, r)
		}
		if !st.Synced {
			return envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "the key store has not pulled from its primary yet")
		}
		body := api.Health{OK: true, Status: "ready", Version: a.version, KeyStore: "ok"}
		if !st.Reachable {
			body.KeyStore = "degraded"
		}
		w.Header().Set("Cache-Control", "no-store")
		envelope.WriteJSON(w, http.StatusOK, body)
		return nil
	}
}
