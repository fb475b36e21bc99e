package handlers

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/mount"
	"github.com/caddy-runtime/runtime/packages"
	"github.com/caddy-runtime/runtime/workers"
)

// Error codes of serving workers.
const (
	CodeWorkerNotFound        = "WORKER_NOT_FOUND"
	CodeWorkerVersionNotFound = "WORKER_VERSION_NOT_FOUND"
	CodeWorkerMisconfigured   = "WORKER_MISCONFIGURED"
)

// CPanelPath is where the cpanel is served.
const CPanelPath = "/" + packages.CPanelSegment

// IsCPanel reports whether urlPath is the cpanel's.
func IsCPanel(urlPath string) bool {
	return urlPath == CPanelPath || strings.HasPrefix(urlPath, CPanelPath+"/")
}

// ServeCPanel serves a request for the cpanel, which has no pages yet: its path is kept from
// workers and plugins.
func (a *API) ServeCPanel(w http.ResponseWriter, r *http.Request) {
	WriteError(w, Errorf(http.StatusNotFound, CodeNotFound, "no cpanel is installed at %s%s/", mount.Path(r.Context()), CPanelPath))
}

// ServeWorker serves a request outside the API: a worker version, or an error envelope.
func (a *API) ServeWorker(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w}
	w = sw
	start := time.Now()
	var name string // set once the path names an installed worker: only those are counted
	defer func() {
		if name != "" {
			a.opts.Metrics.WorkerRequest(name, sw.status, time.Since(start))
		}
	}()
	if err := a.serveWorker(w, r, &name); err != nil {
		var apiErr *Error
		if !errors.As(err, &apiErr) {
			a.opts.Logger.Error("serving a worker failed", zap.String("request_id", RequestID(r.Context())), zap.Error(err))
			apiErr = Errorf(http.StatusInternalServerError, CodeInternal,
				"internal error; report request id %s to the operator", RequestID(r.Context()))
		}
		WriteError(w, apiErr)
	}
}

func (a *API) serveWorker(w http.ResponseWriter, r *http.Request, named *string) error {
	c, err := catalog(a.opts.Workers)
	if err != nil {
		return err
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if packages.IsReserved(first, a.opts.WorkerPolicy.Reserved) {
		// A worker put there by hand is not served either.
		return Errorf(http.StatusNotFound, CodeNotFound, "/%s/ is reserved by the runtime; no worker is served there", first)
	}
	at := mount.Path(r.Context())
	t, name, err := workers.Resolve(c, r.URL.Path)
	switch {
	case errors.Is(err, workers.ErrNotWorkerPath):
		return Errorf(http.StatusNotFound, CodeNotFound, "nothing is served at %s%s; workers are served at %s/<name>/ and %s/@scope/<name>/", at, r.URL.Path, at, at)
	case errors.Is(err, workers.ErrNoSuchWorker):
		return Errorf(http.StatusNotFound, CodeWorkerNotFound, "no worker named %q", name)
	case errors.Is(err, workers.ErrNoEnabledVersion):
		return Errorf(http.StatusNotFound, CodeWorkerNotFound, "worker %q has no enabled version", name)
	case errors.Is(err, workers.ErrNoMatchingPin):
		return Errorf(http.StatusNotFound, CodeWorkerVersionNotFound, "worker %q has no enabled version matching the pin", name)
	case err != nil:
		return err
	}
	LogField(r.Context(), zap.String("worker", name))
	*named = name
	served, err := a.versions.Get(t.Version)
	if err != nil {
		return Errorf(http.StatusInternalServerError, CodeWorkerMisconfigured, "worker %s@%s: %v", name, t.Version.Version, err)
	}
	// The worker's base as the client sees it, for the redirect, <base href> and X-Base.
	t.Base = at + t.Base
	m := served.Manifest
	if t.Rest == "" && m.Entrypoint != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		target := at + r.URL.EscapedPath() + "/"
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, target, http.StatusPermanentRedirect)
		return nil
	}
	switch m.Kind() {
	case workers.Files, workers.SPA:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			return Errorf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "worker %q serves files: only GET and HEAD", name)
		}
		err := workers.ServeStatic(w, r, t, m, served.Root)
		if errors.Is(err, workers.ErrFileNotFound) {
			return Errorf(http.StatusNotFound, CodeNotFound, "worker %q has no file at %s", name, t.Rest)
		}
		return err
	}
	return a.serveProcess(w, r, t, m, name)
}
