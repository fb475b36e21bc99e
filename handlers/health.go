package handlers

import (
	"net/http"

	"github.com/caddy-runtime/runtime/envelope"
)

// Health is the body of the health probes.
type Health struct {
	OK      bool   `json:"ok"`
	Status  string `json:"status" enum:"healthy,ready,live"`
	Version string `json:"version" doc:"runtime version"`
}

// Discovery is the discovery document at /.well-known/runtime.
type Discovery struct {
	API     string `json:"api" doc:"the API path in effect as the client sees it, e.g. /api, /_/api, or /hp/api when the runtime is mounted at /hp"`
	Version string `json:"version" doc:"runtime version"`
	Workers string `json:"workers,omitempty" doc:"the workers' base URL when they are served on another origin, e.g. https://apps.example.com (a worker is at <workers>/<name>/), as configured in workers_url; absent when they share this origin"`
}

func (a *API) healthRoutes() []route {
	probe := func(status string) handlerFunc {
		// Encoded once: probes are the most frequent requests and always answer the same.
		body := envelope.EncodeJSON(Health{OK: true, Status: status, Version: a.opts.Version})
		return func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
			return nil
		}
	}
	return []route{
		{
			method: "GET", path: DiscoveryPath, id: "discover", tag: "discovery", public: true,
			summary:     "Discover the API path, the runtime version and where workers are served",
			description: "Clients read `api` to find the API path, which moves under a configured prefix, and `workers` to build links to workers when they are served on their own origin.",
			responses:   []response{{status: http.StatusOK, description: "The API path and version, and the workers' base URL", body: Discovery{}}},
			handle: func(w http.ResponseWriter, r *http.Request) error {
				writeJSON(w, http.StatusOK, Discovery{API: a.apiPath(r), Version: a.opts.Version, Workers: a.opts.WorkersURL})
				return nil
			},
		},
		{
			method: "GET", path: "/health", id: "health", probe: true, tag: "health", public: true,
			summary:   "General health",
			responses: []response{{status: http.StatusOK, description: "The runtime is serving", body: Health{}}},
			handle:    probe("healthy"),
		},
		{
			method: "GET", path: "/health/ready", id: "healthReady", probe: true, tag: "health", public: true,
			summary:     "Readiness probe",
			description: "Answers 503 while the runtime is starting or shutting down, so a load balancer sends no new traffic.",
			responses: []response{
				{status: http.StatusOK, description: "Ready to take traffic", body: Health{}},
				errorResponse(http.StatusServiceUnavailable, "Starting or shutting down (code NOT_READY)"),
			},
			handle: func(w http.ResponseWriter, r *http.Request) error {
				if err := a.opts.Ready(); err != nil {
					return Errorf(http.StatusServiceUnavailable, CodeNotReady, "%v", err)
				}
				return probe("ready")(w, r)
			},
		},
		{
			method: "GET", path: "/health/live", id: "healthLive", probe: true, tag: "health", public: true,
			summary:   "Liveness probe",
			responses: []response{{status: http.StatusOK, description: "The process is alive", body: Health{}}},
			handle:    probe("live"),
		},
	}
}
