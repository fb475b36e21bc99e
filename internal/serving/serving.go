// Package serving is the runtime's data plane: it serves worker versions, static files and
// process workers behind a reverse proxy, and keeps what uploaded code answers away from the
// runtime's credentials. Plugins run in front of it (package pluginhost); the management API
// is elsewhere (package handlers), asked only through Issuer; the Caddy module composes them.
package serving

import (
	"context"
	"errors"
	"net/http"
	"net/http/httputil"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/hosts"
	"github.com/caddy-runtime/runtime/internal/metrics"
	"github.com/caddy-runtime/runtime/internal/mount"
	"github.com/caddy-runtime/runtime/internal/trace"
	"github.com/caddy-runtime/runtime/internal/wasm"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/packages"
)

// Error codes of serving workers.
const (
	CodeWorkerNotFound        = "WORKER_NOT_FOUND"
	CodeWorkerVersionNotFound = "WORKER_VERSION_NOT_FOUND"
	CodeWorkerMisconfigured   = "WORKER_MISCONFIGURED"
)

// Options configure a Server.
type Options struct {
	// Workers is the worker catalog; nil answers 503 until the runtime has started.
	Workers *packages.Catalog
	// Pool returns the process pool, nil until the runtime has started.
	Pool func() *workers.Pool
	// Wasm returns what WebAssembly workers run on, nil until the runtime has started.
	Wasm func() *WasmHost
	// Activations say which version of each worker is active on this instance and which are
	// held back (failed or being checked); nil knows none: the newest enabled version serves.
	Activations *workers.Activations
	// Versions caches what serving a worker version needs; nil gives a cache of its own.
	Versions *Versions
	// Reserved are the first path segments the runtime keeps for itself: no worker is served
	// there, even one put in place by hand.
	Reserved []string
	// Credentials are the runtime's own, which no worker sees (see Credentials.Strip).
	Credentials Credentials
	// Logger receives failures to serve.
	Logger *zap.Logger
	// Metrics counts the requests each worker served; nil counts nothing.
	Metrics *metrics.Set
	// Hosts maps host names to workers (workers_domain, custom domains): a request on a
	// worker's host is that worker's, whatever its path. Nil routes by path alone.
	Hosts *hosts.Router
	// Missing, when set, is told that a request names a worker this instance does not serve
	// (unknown, no enabled version, none matching the pin): in cluster mode it may have been
	// uploaded or enabled elsewhere since the last pull. It reports whether the worker may be
	// here now, and then the request is resolved once more. Rate-limit it: anyone can ask.
	Missing func(ctx context.Context, name string) bool
	// Splits are the traffic splits in force; nil splits nothing.
	Splits *Splits
	// SplitHeader names the request header whose value splits requests that carry no visitor
	// cookie (an API client's user id, say); "" or a request without it: a random visitor id.
	SplitHeader string
	// MaxHeaderSize caps the answer head read from a worker, on every path to it
	// (worker_max_header_size); 0 is DefaultMaxHeaderSize.
	MaxHeaderSize int64
}

// DefaultMaxHeaderSize is the default of worker_max_header_size, for process workers as for
// WebAssembly ones.
const DefaultMaxHeaderSize = wasm.DefaultMaxHeader

// Server serves workers.
type Server struct {
	opts   Options
	proxy  *httputil.ReverseProxy
	direct *directPool // the kept connections of the direct proxy to worker processes
}

// New returns a Server.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Pool == nil {
		opts.Pool = func() *workers.Pool { return nil }
	}
	if opts.Wasm == nil {
		opts.Wasm = func() *WasmHost { return nil }
	}
	if opts.Versions == nil {
		opts.Versions = NewVersions()
	}
	if opts.MaxHeaderSize <= 0 {
		opts.MaxHeaderSize = DefaultMaxHeaderSize
	}
	s := &Server{opts: opts, direct: newDirectPool(64, 30*time.Second)}
	s.proxy = s.newProxy()
	return s
}

// Hosted reports whether r is on a worker's own host (see Options.Hosts): its whole path is
// the worker's, so no plugin route takes it.
func (s *Server) Hosted(r *http.Request) bool {
	_, _, ok := s.opts.Hosts.Worker(r.Host)
	return ok
}

// RealIPHeader is the header in which uploaded code gets the client's address.
const RealIPHeader = "X-Real-Ip"

// Prepare readies a request for uploaded code: it removes the runtime's credentials from its
// header (see Credentials.Strip; the proxy to process workers strips them again from what it
// sends) and sets X-Real-IP to the client's address as the runtime determined it
// (trace.ClientAddr: Caddy's client IP, forwarded only by trusted_proxies), in place of any
// line the client sent under any spelling (X_Real_IP included, which CGI reads alike). The
// Runtime-Cron header is the runtime's too: removed, and set on a tick's request alone (see
// setCron).
func (s *Server) Prepare(r *http.Request) {
	s.opts.Credentials.Strip(r.Header)
	setCron(r)
	for name := range r.Header {
		if sameHeader(name, RealIPHeader) {
			delete(r.Header, name)
		}
	}
	r.Header[RealIPHeader] = []string{trace.ClientAddr(r)}
}

// Serve serves a request for a worker: a worker version, or the error answer, which it returns
// without writing it, so the Caddy glue can hand it to the site's error routes. An error is
// returned only while nothing of the answer is written.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request) *envelope.Error {
	sw := &trace.StatusRecorder{ResponseWriter: w}
	start := time.Now()
	var served servedAs // set once the path names an installed worker: only those are counted
	err := s.serve(sw, r, &served)
	var answer *envelope.Error
	if err != nil && !errors.As(err, &answer) {
		s.opts.Logger.Error("serving a worker failed", zap.String("request_id", trace.RequestID(r.Context())), zap.Error(err))
		answer = envelope.Internal(trace.RequestID(r.Context()))
	}
	if answer != nil && sw.Status != 0 {
		// Too late for an error answer: the worker's own is on its way.
		s.opts.Logger.Warn("a worker failed after it began to answer", zap.String("request_id", trace.RequestID(r.Context())), zap.Error(answer))
		answer = nil
	}
	if served.name != "" {
		status := sw.Status
		if answer != nil {
			status = answer.Status
		}
		s.opts.Metrics.WorkerRequest(served.name, served.version, status, time.Since(start))
	}
	return answer
}

// servedAs is the worker and version a request resolved to.
type servedAs struct{ name, version string }

func (s *Server) serve(w http.ResponseWriter, r *http.Request, named *servedAs) error {
	c := s.opts.Workers
	if c == nil {
		return envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "the runtime is starting")
	}
	hostName, _, hosted := s.opts.Hosts.Worker(r.Host)
	first := hostName
	if !hosted {
		first, _, _ = strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	}
	if packages.IsReserved(first, s.opts.Reserved) {
		// A worker put there by hand is not served either.
		return envelope.Errorf(http.StatusNotFound, envelope.CodeNotFound, "/%s/ is reserved by the runtime; no worker is served there", first)
	}
	at := mount.Path(r.Context())
	var vi visit
	split := func(u packages.Unit) (packages.Version, bool) { return s.splitChoice(u, r, &vi) }
	resolve := func() (Target, string, error) {
		if hosted {
			return ResolveHost(c, s.opts.Activations, hostName, r.URL.Path, split)
		}
		return Resolve(c, s.opts.Activations, r.URL.Path, split)
	}
	t, name, err := resolve()
	if s.opts.Missing != nil && (errors.Is(err, ErrNoSuchWorker) || errors.Is(err, ErrNoEnabledVersion) || errors.Is(err, ErrNoMatchingPin)) &&
		s.opts.Missing(r.Context(), name) {
		t, name, err = resolve()
	}
	switch {
	case errors.Is(err, ErrNotWorkerPath):
		return envelope.Errorf(http.StatusNotFound, envelope.CodeNotFound, "nothing is served at %s%s; workers are served at %s/<name>/ and %s/@scope/<name>/", at, r.URL.Path, at, at)
	case errors.Is(err, ErrNoSuchWorker):
		return envelope.Errorf(http.StatusNotFound, CodeWorkerNotFound, "no worker named %q", name)
	case errors.Is(err, ErrNoEnabledVersion):
		return envelope.Errorf(http.StatusNotFound, CodeWorkerNotFound, "worker %q has no enabled version", name)
	case errors.Is(err, ErrNoMatchingPin):
		return envelope.Errorf(http.StatusNotFound, CodeWorkerVersionNotFound, "worker %q has no enabled version matching the pin", name)
	case err != nil:
		return err
	}
	trace.LogField(r.Context(), zap.String("worker", name))
	trace.LogField(r.Context(), zap.String("worker_version", t.Version.Version))
	*named = servedAs{name, t.Version.Version}
	w.Header().Set(VersionHeader, t.Version.Version)
	s.splitAnswer(w, r, &vi)
	served, err := s.opts.Versions.Get(t.Version)
	if err != nil {
		return envelope.Errorf(http.StatusInternalServerError, CodeWorkerMisconfigured, "worker %s@%s: %v", name, t.Version.Version, err)
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
			return envelope.Errorf(http.StatusMethodNotAllowed, envelope.CodeMethodNotAllowed, "worker %q serves files: only GET and HEAD", name)
		}
		err := ServeStatic(w, r, t, served)
		if errors.Is(err, ErrFileNotFound) {
			return envelope.Errorf(http.StatusNotFound, envelope.CodeNotFound, "worker %q has no file at %s", name, t.Rest)
		}
		return err
	case workers.Wasm:
		return s.serveWasm(w, r, t, served, name)
	}
	return s.serveProcess(w, r, t, m, name)
}
