// Package caddymodule is the Caddy glue of the runtime: module registration, the Caddyfile
// adapter, provisioning from settings and the environment, and the state kept across reloads.
package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/config"
	"github.com/caddy-runtime/runtime/cpanel"
	"github.com/caddy-runtime/runtime/envelope"
	"github.com/caddy-runtime/runtime/handlers"
	"github.com/caddy-runtime/runtime/metrics"
	"github.com/caddy-runtime/runtime/mount"
	"github.com/caddy-runtime/runtime/packages"
	"github.com/caddy-runtime/runtime/plugins"
	"github.com/caddy-runtime/runtime/serving"
	"github.com/caddy-runtime/runtime/trace"
	"github.com/caddy-runtime/runtime/version"
	"github.com/caddy-runtime/runtime/workers"
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
	workers     *serving.Server
	cpanel      *cpanel.Handler
	plugins     *pluginHost
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
		return fmt.Errorf("registering the runtime's metrics: %v", err)
	}
	workerPolicy, pluginPolicy := policies(settings)
	h.plugins, h.unsubscribe = newPluginHost(ctx, h.state, pluginPolicy, h.logger.Named("plugins"))
	app.track(h.plugins, settings.Serve.SharesOrigin())

	h.api, err = handlers.New(handlers.Options{
		Prefix:       settings.APIPrefix,
		Version:      version.String(),
		WorkersURL:   settings.WorkersURL,
		Logger:       h.logger,
		Ready:        h.state.ready,
		RootKey:      settings.RootKey,
		Keys:         h.state.keyStore,
		SessionTTL:   settings.SessionTTL,
		Workers:      h.state.workers,
		Plugins:      h.state.plugins,
		Pool:         h.state.workerPool,
		PluginHost:   h.plugins,
		WorkerPolicy: workerPolicy,
		PluginPolicy: pluginPolicy,
		Metrics:      runtimeMetrics,
	})
	if err != nil {
		return err
	}
	if h.cpanel, err = cpanel.New(); err != nil {
		return err
	}
	h.workers = serving.New(serving.Options{
		Workers: h.state.workers, Pool: h.state.workerPool, Versions: h.state.versions, Reserved: workerPolicy.Reserved,
		Credentials: serving.Credentials{Header: handlers.APIKeyHeader, Cookies: sessionCookies, Token: h.api.IsCredential},
		Logger:      h.logger, Metrics: runtimeMetrics,
	})
	// Followed log streams end when this handler's server begins to shut down (a reload
	// replaces it, or Caddy exits): the server waits for open requests.
	if srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok {
		srv.RegisterOnShutdown(h.api.Shutdown)
	}
	return nil
}

// policies are what uploaded workers and plugins may do under settings.
func policies(s config.Settings) (workers.Policy, plugins.Policy) {
	reserved := packages.ReservedNames(s.APIPrefix)
	return workers.Policy{ProcessWorkers: s.ProcessWorkers, Reserved: reserved},
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
	attachTrace(r)
	r = trace.EnsureRequestID(w, r, func() string { return requestUUID(r) })
	if p := mountPath(r); p != "" {
		r = r.WithContext(mount.With(r.Context(), p))
	}
	serve := h.settings.Serve
	switch {
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
	case !serve.Workers:
		if h.settings.WorkersURL != "" {
			envelope.Write(w, notServed("workers are not served on this host; they are served at %s", h.settings.WorkersURL))
			return nil
		}
		envelope.Write(w, notServed("workers are not served on this host"))
	default:
		serving.GuardResponse(w, sessionCookies, func(w http.ResponseWriter) { h.serveUnits(w, r) })
	}
	return nil
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
	trace.Attach(vars, add, client)
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

func notServed(format string, args ...any) *envelope.Error {
	return envelope.Errorf(http.StatusNotFound, envelope.CodeNotFound, format, args...)
}

// serveUnits serves a request with what was uploaded: it goes through the plugins' onRequest
// hooks (unless it carries a valid header credential) and then to the plugin whose base is its
// first path segment, else to a worker. None of them sees the runtime's credentials: once the
// header credential has decided on the hooks, they are stripped from the request itself, since
// Caddy's placeholders read the request the server received.
func (h *Handler) serveUnits(w http.ResponseWriter, r *http.Request) {
	t := h.plugins.acquire()
	if t != nil {
		defer t.release()
	}
	hooks := t != nil && len(t.hooks) > 0 && !h.api.SkipsHooks(r)
	h.workers.StripCredentials(r.Header)
	if t == nil {
		h.workers.ServeHTTP(w, r)
		return
	}
	dispatch := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if routes, ok := t.bases[first]; ok {
			return routes.ServeHTTP(w, r)
		}
		h.workers.ServeHTTP(w, r)
		return nil
	})
	var err error
	if hooks {
		err = t.runHooks(w, r, dispatch, h.logger)
	} else {
		err = dispatch.ServeHTTP(w, r)
	}
	var he *hookError
	switch {
	case errors.As(err, &he):
		h.logger.Warn("onRequest hook failed", zap.String("plugin", he.plugin), zap.String("request_id", trace.RequestID(r.Context())), zap.Error(he.err))
		envelope.Write(w, envelope.Errorf(http.StatusServiceUnavailable, "PLUGIN_ONREQUEST_FAILED",
			"plugin %s could not handle the request before it was served; try again later", he.plugin))
	case err != nil:
		id := trace.RequestID(r.Context())
		answer := pluginError(err, id)
		level := zap.DebugLevel // a 404 of a file_server is routine
		if answer.Status >= 500 {
			level = zap.WarnLevel
		}
		h.logger.Log(level, "plugin route error", zap.Int("status", answer.Status), zap.String("request_id", id), zap.Error(err))
		envelope.Write(w, answer)
	}
}

// Cleanup stops what the handler started; the App releases the shared state. It runs after a
// failed Provision too.
func (h *Handler) Cleanup() error {
	if h.unsubscribe != nil {
		h.unsubscribe()
		h.unsubscribe = nil
	}
	if h.plugins != nil {
		h.plugins.close()
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
