// Package handlers is the runtime's management API on net/http: the request pipeline, one
// type per resource holding only what its routes use, and the route table assembled from
// them. The bodies it reads and answers are package api's, which the route table documents.
// It knows nothing of Caddy.
package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/databases"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/hosts"
	"github.com/caddy-runtime/runtime/internal/metrics"
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
	// Databases are the workers' own databases (database: true), DatabaseSize the
	// worker_database_size setting; nil: workers have none.
	Databases    *databases.Manager
	DatabaseSize int64
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
	// CronChanged tells the cron scheduler of this instance that a worker's triggers were
	// paused or resumed, so it reads them at once; nil: none runs here.
	CronChanged func()
}

// API serves the management API and the discovery document. It assembles the resources'
// routes into one route table, which every request goes through behind the pipeline and
// which also generates the OpenAPI document.
type API struct {
	*pipeline
	version string // reported by the OpenAPI document
	// The resources, each holding what its routes use, in the route table's order (units
	// serves the workers' routes and, later, the plugins').
	health     *healthAPI
	sessions   *sessionsAPI
	apiKeys    *keysAPI
	units      *unitsAPI
	domains    *domainsAPI
	traffic    *trafficAPI
	cron       *cronAPI
	pool       *poolAPI
	secrets    *secretsAPI
	stats      *statsAPI
	logs       *logsAPI
	auditTrail *auditAPI
	files      *filesAPI
	cluster    *clusterAPI
	docs       *docsAPI

	mux      *http.ServeMux
	exact    map[string]http.Handler // "METHOD /path" → handler, for routes without wildcards
	handler  http.Handler
	stopping chan struct{} // closed by Shutdown: long-lived answers end
	stopOnce sync.Once
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
	p := &pipeline{prefix: opts.Prefix, logger: opts.Logger, auditLog: opts.Logger.Named("audit"),
		rootKey: opts.RootKey, keys: opts.Keys, started: opts.Started, metrics: opts.Metrics}
	p.refusedLogins = newRefusalTally(p.auditRefusals)
	if opts.RootKey != "" {
		sum := sha256.Sum256([]byte(opts.RootKey))
		p.rootHash = sum[:]
	}
	a := &API{pipeline: p, version: opts.Version, mux: http.NewServeMux(),
		stopping: make(chan struct{})}
	assets, err := ui.DocsAssets()
	if err != nil {
		return nil, err
	}
	page, err := ui.DocsPage(opts.Prefix, assets)
	if err != nil {
		return nil, err
	}
	a.health = &healthAPI{pipeline: p, version: opts.Version, workersURL: opts.WorkersURL, workersDomain: opts.WorkersDomain, readiness: opts.Ready}
	a.sessions = &sessionsAPI{pipeline: p, sessionTTL: opts.SessionTTL}
	a.apiKeys = &keysAPI{pipeline: p}
	a.domains = &domainsAPI{pipeline: p, workers: opts.Workers, workersDomain: opts.WorkersDomain, resolvers: opts.DomainResolvers,
		pending: opts.PendingDomains, ownHosts: opts.OwnHosts, changed: opts.DomainsChanged}
	a.secrets = &secretsAPI{pipeline: p, sealing: opts.Secrets}
	a.traffic = &trafficAPI{pipeline: p, workers: opts.Workers, activations: opts.Activations, apply: opts.ApplyTraffic}
	a.cron = &cronAPI{pipeline: p, workers: opts.Workers, activations: opts.Activations, changed: opts.CronChanged}
	a.pool = &poolAPI{pipeline: p, workers: opts.Workers, pool: opts.Pool}
	a.logs = &logsAPI{pipeline: p, workers: opts.Workers, pool: opts.Pool, heartbeat: opts.Heartbeat, stopping: a.stopping}
	a.stats = &statsAPI{pipeline: p, workers: opts.Workers}
	a.auditTrail = &auditAPI{pipeline: p}
	a.docs = &docsAPI{pipeline: p, page: page, assets: assets}
	a.cluster = &clusterAPI{pipeline: p, instances: opts.Instances}
	a.units = &unitsAPI{pipeline: p, workers: opts.Workers, plugins: opts.Plugins, workerPolicy: opts.WorkerPolicy, pluginPolicy: opts.PluginPolicy,
		workersDomain: opts.WorkersDomain, activations: opts.Activations, activator: opts.Activator, pool: opts.Pool, host: opts.PluginHost, cluster: opts.Cluster,
		domains: a.domains, secrets: a.secrets, traffic: a.traffic, cron: a.cron, databases: opts.Databases, databaseCap: opts.DatabaseSize}
	a.files = &filesAPI{pipeline: p, workers: opts.Workers, plugins: opts.Plugins, admit: a.units.admit, clustered: opts.Cluster != nil}
	table := a.routes()
	a.exact = map[string]http.Handler{}
	for _, rt := range table {
		pattern, h := rt.method+" "+a.fullPath(rt.path), a.endpoint(rt)
		a.mux.Handle(pattern, h)
		if !strings.Contains(rt.path, "{") {
			a.exact[pattern] = h
		}
	}
	a.docs.spec = a.document(table)
	doc, err := json.Marshal(a.docs.spec)
	if err != nil {
		return nil, fmt.Errorf("encoding the OpenAPI document: %w", err)
	}
	a.docs.doc = ui.NewFile(doc, "application/json")
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
func (a *API) Prefix() string { return a.prefix }

// Owns reports whether the API answers requests for urlPath.
func (a *API) Owns(urlPath string) bool {
	p := a.prefix
	return urlPath == p || strings.HasPrefix(urlPath, p+"/") ||
		urlPath == api.DiscoveryPath || urlPath == api.DiscoveryPath+"/"
}

// ServeHTTP serves a request that the API owns.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.handler.ServeHTTP(w, r)
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
		a.metrics.APIRequest(unmatchedRoute, http.StatusNotFound)
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
		a.metrics.APIRequest(unmatchedRoute, sw.Status)
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
