// Package caddymodule is the Caddy glue of the runtime: module registration, the Caddyfile
// adapter, provisioning from settings and the environment, and the state kept across reloads.
package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/handlers"
	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/internal/cork"
	"github.com/caddy-runtime/runtime/internal/cpanel"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/metrics"
	"github.com/caddy-runtime/runtime/internal/mount"
	"github.com/caddy-runtime/runtime/internal/pluginhost"
	"github.com/caddy-runtime/runtime/internal/plugins"
	"github.com/caddy-runtime/runtime/internal/serving"
	"github.com/caddy-runtime/runtime/internal/trace"
	"github.com/caddy-runtime/runtime/internal/version"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/packages"
)

func init() {
	trace.UseHostVars(caddyhttp.VarsCtxKey)
	caddy.RegisterModule(Handler{})
	caddy.RegisterModule(new(App))
}

// runtimeMetrics are the runtime's series, one set for the process. Caddy gives each config
// load a registry of its own: every load registers the set with it, so the counts carry on
// across reloads, and handlers sharing a load register it once.
var runtimeMetrics = metrics.New()

// sessionCookies are the API's session cookies, which uploaded code neither sees nor sets.
var sessionCookies = []string{handlers.SessionCookie, handlers.HostSessionCookie}

// Handler is the http.handlers.runtime module: it serves the management API with the
// discovery document, the cpanel, and workers with plugin routes, or those of them its serve
// setting names. Its own settings are per-site; the process-wide ones belong to the runtime
// App, and a handler carrying them itself (the deprecated form) hands them to the App.
//
// Each setting left unset falls back to its RUNTIME_* environment variable, then a default.
type Handler struct {
	config.Values

	settings    config.Settings
	api         *handlers.API
	units       *pluginhost.Chain // the data plane: hooks, plugin routes, workers
	cpanel      *cpanel.Handler
	plugins     *pluginhost.Host
	server      *caddyhttp.Server // whose error routes may take the data plane's errors
	unsubscribe func()
	state       *state
	logger      *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.runtime",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision joins the runtime App, which gives it the shared state and the process-wide
// settings, and resolves its own. It has no irreversible side effects (caddy validate runs
// it): folders and files are touched only when the runtime app starts.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	appModule, err := ctx.App(appID)
	if err != nil {
		return err
	}
	app := appModule.(*App)
	st, appSettings, err := app.join(h.AppValues)
	if err != nil {
		return err
	}
	site := h.SiteValues
	replacePlaceholders(site.StringFields(), site.ListFields())
	settings, err := config.ResolveSite(appSettings, site, os.Getenv)
	if err != nil {
		return err
	}
	h.settings, h.state = settings, st
	if err := runtimeMetrics.Register(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("registering the runtime's metrics: %w", err)
	}
	workerPolicy, pluginPolicy := policies(settings)
	h.plugins, h.unsubscribe = pluginhost.New(ctx, pluginhost.Options{
		Plugins: h.state.pluginCatalog, Workers: h.state.workerCatalog, Policy: pluginPolicy,
		Changes: &h.state.pluginChanges, Reloads: &h.state.pluginReloads,
		Metrics: runtimeMetrics, Logger: h.logger.Named("plugins"),
	})
	app.track(h.plugins, settings.Serve.SharesOrigin())

	shared, instances, missing := h.state.handlerCluster()
	h.api, err = handlers.New(handlers.Options{
		Prefix:          settings.APIPrefix,
		Version:         version.String(),
		WorkersURL:      settings.WorkersURL,
		WorkersDomain:   settings.WorkersDomain,
		DomainResolvers: settings.DomainResolvers,
		PendingDomains:  settings.MaxPendingDomains,
		OwnHosts:        h.state.ownHosts,
		DomainsChanged:  func(ctx context.Context) { _ = h.state.domains.refresh(ctx) },
		Logger:          h.logger,
		Ready:           h.state.readiness,
		Started:         h.state.awaitStart,
		RootKey:         settings.RootKey,
		Keys:            h.state.keyStore,
		SessionTTL:      settings.SessionTTL,
		Workers:         h.state.workerCatalog,
		Plugins:         h.state.pluginCatalog,
		Pool:            h.state.workerPool,
		Databases:       h.state.databases,
		DatabaseSize:    settings.WorkerDatabase,
		Activations:     h.state.activations,
		Activator:       h.state.activator,
		PluginHost:      h.plugins,
		WorkerPolicy:    workerPolicy,
		PluginPolicy:    pluginPolicy,
		Metrics:         runtimeMetrics,
		Cluster:         shared,
		Instances:       instances,
		ApplyTraffic:    h.state.traffic.apply,
		Secrets:         handlers.SecretsOptions{Key: h.state.secretsKey, Changed: h.state.secrets.changed},
		CronChanged:     h.state.cron.Changed,
	})
	if err != nil {
		return err
	}
	if h.cpanel, err = cpanel.New(); err != nil {
		return err
	}
	workers := serving.New(serving.Options{
		Workers: h.state.workerCatalog, Pool: h.state.workerPool, Wasm: h.state.wasmHost(settings), Versions: h.state.versions, Activations: h.state.activations,
		Reserved:    workerPolicy.Reserved,
		Credentials: serving.Credentials{Header: handlers.APIKeyHeader, Cookies: sessionCookies, Issuer: h.api},
		Logger:      h.logger, Metrics: runtimeMetrics, Missing: missing, Hosts: &h.state.router,
		Splits: h.state.splits, SplitHeader: settings.SplitHeader, MaxHeaderSize: settings.WorkerMaxHeaderSize,
	})
	h.units = &pluginhost.Chain{Plugins: h.plugins, Workers: workers, Exempt: h.api, Logger: h.logger}
	// Followed log streams end when this handler's server begins to shut down (a reload
	// replaces it, or Caddy exits): the server waits for open requests.
	if srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok {
		h.server = srv
		srv.RegisterOnShutdown(h.api.Shutdown)
		// Large kept answers are written with their connection corked.
		srv.RegisterConnContext(cork.ConnContext)
	}
	h.serveTicks()
	return nil
}

// policies are what uploaded workers and plugins may do under settings.
func policies(s config.Settings) (workers.Policy, plugins.Policy) {
	reserved := packages.ReservedNames(s.APIPrefix)
	return workers.Policy{ProcessWorkers: s.ProcessWorkers, WasmWorkers: s.WasmWorkers, Reserved: reserved, MaxModuleSize: s.WasmMaxModuleSize,
			JSEngines: s.JSEngines},
		plugins.Policy{Handlers: s.PluginHandlers, Reserved: reserved}
}

// replacePlaceholders replaces the known placeholders, such as {env.X}, in written settings.
func replacePlaceholders(strs []*string, lists []*[]string) {
	repl := caddy.NewReplacer()
	for _, field := range strs {
		*field = repl.ReplaceKnown(*field, "")
	}
	for _, list := range lists {
		if len(*list) == 0 {
			continue
		}
		out := make([]string, len(*list))
		for i, s := range *list {
			out[i] = repl.ReplaceKnown(s, "")
		}
		*list = out
	}
}

// ServeHTTP serves the surfaces of the site block: the API and discovery paths, the cpanel
// path, and every other request as a unit request (see serveUnits). A surface the block does
// not serve answers 404 saying where it is. Every response carries X-Request-Id, and Caddy's
// access log line of the request carries it as request_id with the principal and the unit. Other
// handlers compose with it through matchers; when one in front stripped a path prefix, the
// request carries it as the mount path for the URLs the runtime builds.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if h.state.clustered() {
		h.state.requests.Add(1)
	}
	attachTrace(r)
	r = trace.EnsureRequestID(w, r, func() string { return requestUUID(r) })
	if p := mountPath(r); p != "" {
		r = r.WithContext(mount.With(r.Context(), p))
	}
	serve := h.settings.Serve
	_, _, hosted := h.state.router.Worker(r.Host)
	switch {
	case hosted && serve.Workers:
		// A worker's own host is the worker's alone: its /api and /cpanel paths too.
		h.serveUnits(w, r, false)
		return nil
	case h.api.Owns(r.URL.Path):
		if !serve.API {
			envelope.Write(w, notServed("the API is not served on this host; use the API's own host"))
			return nil
		}
		h.api.ServeHTTP(w, r)
	case cpanel.Owns(r.URL.Path):
		if !serve.CPanel {
			envelope.Write(w, notServed("the cpanel is not served on this host; use the cpanel's own host"))
			return nil
		}
		h.cpanel.ServeHTTP(w, r)
	case !serve.Workers && h.servesRoot(r):
		// The root of the API's or the cpanel's host is nobody's: it says where they are.
		h.serveRoot(w, r)
	case !serve.Workers:
		if h.settings.WorkersURL != "" {
			envelope.Write(w, notServed("workers are not served on this host; they are served at %s", h.settings.WorkersURL))
			return nil
		}
		envelope.Write(w, notServed("workers are not served on this host"))
	default:
		return h.serveUnits(w, r, h.servesRoot(r))
	}
	return nil
}

// serveUnits serves r with what was uploaded: hooks, plugin routes, workers. With root, / of
// a host that serves everything, what none of them answers is answered by serveRoot.
func (h *Handler) serveUnits(w http.ResponseWriter, r *http.Request, root bool) error {
	if err := h.state.awaitStart(r.Context()); err != nil {
		return h.fail(w, r, envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "%v", err))
	}
	if failed := h.units.Serve(w, r); failed != nil {
		if root && failed.Status == http.StatusNotFound {
			h.serveRoot(w, r)
			return nil
		}
		return h.fail(w, r, failed)
	}
	return nil
}

// fail answers an error of the data plane as Caddy's own handlers do (file_server,
// reverse_proxy): returned as a caddyhttp.HandlerError for the site's handle_errors routes to
// render, with the envelope as its error ({http.error.message}) and the request id as its id
// ({http.error.id}). A site without error routes answers the envelope itself, since Caddy
// would answer the status alone and clients read the code.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, answer *envelope.Error) error {
	err := caddyhttp.HandlerError{StatusCode: answer.Status, Err: answer, ID: trace.RequestID(r.Context())}
	if h.errorRoutesTake(r, err) {
		return err
	}
	envelope.Write(w, answer)
	return nil
}

// errorRoutesTake reports whether the server has error routes that take err for r: one
// whose top-level matchers match the request as the error routes will see it (the original
// request, with the error placeholders set). The Caddyfile puts each site's handle_errors
// under a route matching its host, so a site without one answers the envelope though
// another site of the server has one. Inside a route, a handle_errors that names other
// statuses leaves the error to Caddy, which answers the status without a body, as it does
// for file_server.
func (h *Handler) errorRoutesTake(r *http.Request, err caddyhttp.HandlerError) bool {
	if h.server == nil || h.server.Errors == nil || len(h.server.Errors.Routes) == 0 {
		return false
	}
	er := h.server.Errors.WithError(r, err) // a shallow copy, as Caddy passes to its error routes
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
		u := *orig.URL
		er.Method, er.RequestURI, er.URL = orig.Method, orig.RequestURI, &u
	}
	for _, route := range h.server.Errors.Routes {
		if len(route.MatcherSets) == 0 {
			return true
		}
		if match, merr := route.MatcherSets.AnyMatchWithError(er); match || merr != nil {
			return true // a matcher's own error ends Caddy's error handling too
		}
	}
	return false
}

// attachTrace keeps the request's trace state among Caddy's per-request vars and its log fields
// on Caddy's access log line, so the runtime copies no request to carry them.
func attachTrace(r *http.Request) {
	vars, ok := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
	if !ok {
		return
	}
	var add func(zap.Field)
	if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		add = extra.Add
	}
	client, _ := vars[caddyhttp.ClientIPVarKey].(string)
	trusted, _ := vars[caddyhttp.TrustedProxyVarKey].(bool)
	trace.Attach(vars, add, client, trusted)
}

// requestUUID is Caddy's {http.request.uuid} of r, which also puts it on the access log line
// as "uuid"; "" outside a Caddy server.
func requestUUID(r *http.Request) string {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return ""
	}
	id, _ := repl.GetString("http.request.uuid")
	return id
}

// mountPath is the path prefix that a handler in front of the runtime stripped (handle_path,
// uri strip_prefix, or the runtime directive's own path matcher): the original request path
// minus the path the runtime sees.
func mountPath(r *http.Request) string {
	orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request)
	if !ok || orig.URL == nil || orig.URL.Path == r.URL.Path {
		return ""
	}
	return mount.Stripped(orig.URL.EscapedPath(), r.URL.EscapedPath())
}

// browser reports whether r is a browser's navigation: a GET or HEAD accepting HTML.
func browser(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	return accepts(r, "text/html")
}

func notServed(format string, args ...any) *envelope.Error {
	return envelope.Errorf(http.StatusNotFound, envelope.CodeNotFound, format, args...)
}

// Cleanup stops what the handler started; the App releases the shared state. It runs after a
// failed Provision too.
func (h *Handler) Cleanup() error {
	h.stopTicks()
	if h.unsubscribe != nil {
		h.unsubscribe()
		h.unsubscribe = nil
	}
	if h.plugins != nil {
		h.plugins.Close()
	}
	if h.api != nil {
		h.api.Shutdown()
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
