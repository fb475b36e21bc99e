// Package handlers is the runtime's management API on net/http: middleware, the route table
// and one file per resource. The bodies it reads and answers are package api's, which the
// route table documents. It knows nothing of Caddy.
package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/hosts"
	"github.com/caddy-runtime/runtime/internal/metrics"
	"github.com/caddy-runtime/runtime/internal/mount"
	"github.com/caddy-runtime/runtime/internal/openapi"
	"github.com/caddy-runtime/runtime/internal/plugins"
	"github.com/caddy-runtime/runtime/internal/trace"
	"github.com/caddy-runtime/runtime/internal/ui"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// Options configure an API.
type Options struct {
	// Prefix is the API path, e.g. "/api" or "/_/api".
	Prefix string
	// Version is the runtime version reported by discovery, health and the OpenAPI document.
	Version string
	// WorkersURL is the workers' base URL when they are served on another origin, for
	// discovery; "" when they share the API's.
	WorkersURL string
	// WorkersDomain gives each worker a host of its own when its Name is set (workers_domain):
	// listings and discovery report the hosts.
	WorkersDomain hosts.Domain
	// DomainResolvers are the DNS servers asked for custom domains' TXT records; none: the
	// system's resolver.
	DomainResolvers []string
	// PendingDomains caps the custom domains pending verification per namespace
	// (max_pending_domains); 0: no cap.
	PendingDomains int
	// OwnHosts returns the host names serving the API, which no custom domain may take; the
	// request's own host is refused too.
	OwnHosts func() []string
	// DomainsChanged is told after a change to the custom domains, so serving and the TLS
	// permission reflect it before the answer.
	DomainsChanged func(context.Context)
	// Logger receives errors and the audit log.
	Logger *zap.Logger
	// Ready reports why the runtime cannot take traffic yet (starting, shutting down), or nil.
	Ready func() error
	// Started waits, bounded, until the runtime has started, and says why it has not; every
	// route but the liveness and readiness probes waits for it, so that a request arriving
	// during a normal start (the health check included) is answered as one after. Nil: no wait.
	Started func(context.Context) error
	// RootKey is the root key; empty when none is configured.
	RootKey string
	// Keys returns the key store, or an error saying why it is not open yet.
	Keys func() (*keystore.Store, error)
	// SessionTTL is the lifetime of a session cookie.
	SessionTTL time.Duration
	// Workers and Plugins are the unit catalogs; nil disables their routes' work (503).
	Workers, Plugins *packages.Catalog
	// Pool returns the process pool of process workers, nil until the runtime has started.
	Pool func() *workers.Pool
	// Activations say which version of each worker is active on this instance; Activator
	// checks new versions of process workers, and uploads and enables wait for its verdict.
	// nil: every version is served at once, as without health checks.
	Activations *workers.Activations
	Activator   *workers.Activator
	// PluginHost is the handler's live plugin table; nil until the runtime serves plugins.
	PluginHost PluginHost
	// Heartbeat is how often a followed log stream sends a comment when idle (0: DefaultHeartbeat).
	Heartbeat time.Duration
	// Metrics counts API and worker requests, refusals and installs; nil counts nothing.
	Metrics *metrics.Set
	// WorkerPolicy and PluginPolicy are what uploaded workers and plugins may do; every
	// upload, enable and file manager write of a manifest is admitted by them. The zero
	// values allow no process workers and no plugin handlers.
	WorkerPolicy workers.Policy
	PluginPolicy plugins.Policy
	// Cluster is the shared desired state when a package store is configured; nil on a
	// single instance, where changes go straight to the catalogs.
	Cluster Cluster
	// Instances answers GET cluster; nil answers 503 while the runtime is starting.
	Instances Instances
	// ApplyTraffic puts the traffic splits of the key store in force on this instance; the
	// API calls it after it changed one, so that the next request here is split by it. Nil:
	// the splits are not served by this instance.
	ApplyTraffic func(ctx context.Context) error
	// Secrets gives the workers' secrets; the zero value answers every secrets route with
	// SECRETS_NOT_CONFIGURED.
	Secrets SecretsOptions
}

// API serves the management API and the discovery document.
type API struct {
	opts     Options
	rootHash []byte // SHA-256 of the root key, nil without one
	auditLog *zap.Logger
	mux      *http.ServeMux
	exact    map[string]http.Handler // "METHOD /path" → handler, for routes without wildcards
	// The encoded answers of the listings, kept while their source is unchanged.
	workerList, pluginList, keyList bodyCache
	handler                         http.Handler
	spec                            openapi.Document
	doc                             *ui.File // the OpenAPI document, encoded once
	docsPage                        *ui.File // the docs page for the API path at the root
	docsAssets                      *ui.Assets
	mounted                         atomic.Pointer[mountedDocs]
	heartbeat                       time.Duration
	stopping                        chan struct{} // closed by Shutdown: long-lived answers end
	stopOnce                        sync.Once
	refusedLogins                   *refusalTally
}

// New builds the API: it registers every route of the route table and generates the OpenAPI
// document from the same table.
func New(opts Options) (*API, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Ready == nil {
		opts.Ready = func() error { return nil }
	}
	if opts.Keys == nil {
		opts.Keys = func() (*keystore.Store, error) { return nil, errors.New("no key store is configured") }
	}
	if opts.Pool == nil {
		opts.Pool = func() *workers.Pool { return nil }
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	a := &API{opts: opts, mux: http.NewServeMux(), auditLog: opts.Logger.Named("audit"),
		heartbeat: opts.Heartbeat, stopping: make(chan struct{})}
	a.refusedLogins = newRefusalTally(a.auditRefusals)
	if opts.RootKey != "" {
		sum := sha256.Sum256([]byte(opts.RootKey))
		a.rootHash = sum[:]
	}
	var err error
	if a.docsAssets, err = ui.DocsAssets(); err != nil {
		return nil, err
	}
	if a.docsPage, err = ui.DocsPage(opts.Prefix, a.docsAssets); err != nil {
		return nil, err
	}
	table := a.routes()
	a.exact = map[string]http.Handler{}
	for _, rt := range table {
		pattern, h := rt.method+" "+a.fullPath(rt.path), a.endpoint(rt)
		a.mux.Handle(pattern, h)
		if !strings.Contains(rt.path, "{") {
			a.exact[pattern] = h
		}
	}
	a.spec = a.document(table)
	doc, err := json.Marshal(a.spec)
	if err != nil {
		return nil, fmt.Errorf("encoding the OpenAPI document: %v", err)
	}
	a.doc = ui.NewFile(doc, "application/json")
	a.handler = trace.WithRequestID(withRecover(opts.Logger, http.HandlerFunc(a.dispatch)))
	return a, nil
}

// Shutdown ends the API's long-lived answers (followed log streams), so that a server
// shutting down for a reload or an exit does not wait for them, and audits the refused
// sign-ins counted so far. It may be called more than once.
func (a *API) Shutdown() {
	a.stopOnce.Do(func() {
		close(a.stopping)
		a.refusedLogins.stop()
	})
}

// Prefix returns the API path.
func (a *API) Prefix() string { return a.opts.Prefix }

// apiPath returns the API path as the client of r sees it, below the runtime's mount path.
func (a *API) apiPath(r *http.Request) string { return mount.Path(r.Context()) + a.opts.Prefix }

// Owns reports whether the API answers requests for urlPath.
func (a *API) Owns(urlPath string) bool {
	p := a.opts.Prefix
	return urlPath == p || strings.HasPrefix(urlPath, p+"/") ||
		urlPath == api.DiscoveryPath || urlPath == api.DiscoveryPath+"/"
}

// ServeHTTP serves a request that the API owns.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.handler.ServeHTTP(w, r)
}

// fullPath places an API-relative route path under the prefix; discovery stays at the root.
func (a *API) fullPath(p string) string {
	if strings.HasPrefix(p, "/"+mount.WellKnownSegment+"/") {
		return p
	}
	return a.opts.Prefix + p
}

// dispatch routes a request, answering unknown paths and methods with the error envelope.
func (a *API) dispatch(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if len(p) > 1 && strings.HasSuffix(p, "/") {
		// A trailing slash is accepted on every API path.
		r = trimTrailingSlash(r)
		p = r.URL.Path
	}
	if path.Clean(p) != p {
		// Dot segments and double slashes never name an API resource; refuse rather than
		// redirect so that no path is reachable under two names.
		w.Header().Set("X-Content-Type-Options", "nosniff")
		envelope.Write(w, envelope.Errorf(http.StatusNotFound, envelope.CodeNotFound, "no API route at %s", r.URL.Path))
		a.opts.Metrics.APIRequest(unmatchedRoute, http.StatusNotFound)
		return
	}
	if h, ok := a.exact[r.Method+" "+p]; ok {
		// A path without wildcards needs no pattern matching (nor path values).
		h.ServeHTTP(w, r)
		return
	}
	if _, pattern := a.mux.Handler(r); pattern == "" {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		sw := &trace.StatusRecorder{ResponseWriter: w}
		a.routeMiss(sw, r)
		a.opts.Metrics.APIRequest(unmatchedRoute, sw.Status)
		return
	}
	a.mux.ServeHTTP(w, r)
}

func trimTrailingSlash(r *http.Request) *http.Request {
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = strings.TrimSuffix(u.RawPath, "/")
	r2.URL = &u
	return r2
}

// routeMiss answers a request no route matched: 405 with Allow when the path exists under other
// methods, else 404.
func (a *API) routeMiss(w http.ResponseWriter, r *http.Request) {
	h, _ := a.mux.Handler(r)
	probe := &headerProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		allow := probe.header.Get("Allow")
		w.Header().Set("Allow", allow)
		envelope.Write(w, envelope.Errorf(http.StatusMethodNotAllowed, envelope.CodeMethodNotAllowed,
			"method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow))
		return
	}
	envelope.Write(w, envelope.Errorf(http.StatusNotFound, envelope.CodeNotFound,
		"no API route at %s; see %s/openapi.json for the routes", r.URL.Path, a.apiPath(r)))
}

// headerProbe captures the status and headers that ServeMux's own 404/405 handler writes.
type headerProbe struct {
	header http.Header
	status int
}

func (p *headerProbe) Header() http.Header         { return p.header }
func (p *headerProbe) WriteHeader(status int)      { p.status = status }
func (p *headerProbe) Write(b []byte) (int, error) { return len(b), nil }

// handlerFunc is an API handler; a returned *envelope.Error is written as the envelope, any other error
// as a logged 500.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// unmatchedRoute is the route label of API requests no route matched.
const unmatchedRoute = "unmatched"

// endpoint runs a route behind the request pipeline, and counts its answers by the route's
// pattern (bounded, unlike the paths).
func (a *API) endpoint(rt route) http.Handler {
	counter := a.opts.Metrics.Route(rt.method + " " + rt.path)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw, ok := w.(*trace.StatusRecorder) // withRecover's, unless a test serves the route alone
		if !ok {
			sw = &trace.StatusRecorder{ResponseWriter: w}
			w = sw
		}
		start := time.Now()
		defer func() {
			d := time.Since(start)
			if strings.HasPrefix(sw.Header().Get("Content-Type"), "text/event-stream") {
				d = -1 // a followed stream lasts as long as its reader stays
			}
			counter.Count(sw.Status, d)
		}()
		if !rt.probe {
			w.Header().Set("X-Content-Type-Options", "nosniff")
		}
		err := a.awaitStart(rt, r)
		if err == nil {
			r, err = a.authorize(rt, r)
		}
		if err == nil {
			err = checkWriteQuery(rt, r)
		}
		if err == nil {
			err = rt.handle(w, r)
		}
		if err == nil {
			return
		}
		var apiErr *envelope.Error
		switch {
		case errors.As(err, &apiErr):
		case errors.Is(err, keystore.ErrPrimaryUnavailable):
			// Sync mode: the write did not happen; the message names the primary, never its token.
			w.Header().Set("Retry-After", "5")
			apiErr = envelope.Errorf(http.StatusServiceUnavailable, CodeKeyStoreUnavailable, "%v; try again shortly", err)
		default:
			a.opts.Logger.Error("API request failed",
				zap.String("request_id", trace.RequestID(r.Context())), zap.Error(err))
			apiErr = envelope.Errorf(http.StatusInternalServerError, envelope.CodeInternal,
				"internal error; report request id %s to the operator", trace.RequestID(r.Context()))
		}
		if apiErr.Status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="runtime"`)
		}
		if reason := refusalReason(err, apiErr); reason != "" {
			a.opts.Metrics.AuthFailure(reason)
		}
		envelope.Write(w, apiErr)
	})
}

// awaitStart waits for the runtime's start unless rt answers at once while it starts.
func (a *API) awaitStart(rt route, r *http.Request) error {
	if rt.immediate || a.opts.Started == nil {
		return nil
	}
	if err := a.opts.Started(r.Context()); err != nil {
		return envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "%v", err)
	}
	return nil
}

// checkWriteQuery refuses a query parameter that a mutating route does not take: a misspelt
// flag (?dryrun=1 for ?dryRun=1) must not turn a rehearsal into the real change.
func checkWriteQuery(rt route, r *http.Request) error {
	if !mutating(r.Method) || r.URL.RawQuery == "" {
		return nil
	}
	var known []string
	for _, p := range rt.params {
		if p.In == "query" {
			known = append(known, p.Name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.URL.Query())) {
		if slices.Contains(known, name) {
			continue
		}
		for _, k := range known {
			if strings.EqualFold(k, name) {
				return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "unknown query parameter %q; did you mean %s? Nothing was changed", name, k)
			}
		}
		if len(known) == 0 {
			return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "unknown query parameter %q: %s %s takes none; nothing was changed", name, r.Method, r.URL.Path)
		}
		return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "unknown query parameter %q; %s %s takes %s; nothing was changed", name, r.Method, r.URL.Path, strings.Join(known, ", "))
	}
	return nil
}
