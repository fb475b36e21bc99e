// Package caddymodule is the Caddy glue of the runtime: module registration, the Caddyfile
// adapter, provisioning from settings and the environment, and the state kept across reloads.
package caddymodule

import (
	"errors"
	"net/http"
	"os"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/config"
	"github.com/caddy-runtime/runtime/handlers"
	"github.com/caddy-runtime/runtime/version"
)

func init() {
	caddy.RegisterModule(Handler{})
	caddy.RegisterModule(new(App))
}

// Handler is the http.handlers.runtime module: it serves the management API and the discovery
// document, and hands every other request to the next handler.
//
// Each setting left unset falls back to its RUNTIME_* environment variable, then a default.
type Handler struct {
	config.Values

	settings    config.Settings
	api         *handlers.API
	plugins     *pluginHost
	unsubscribe func()
	state       *state
	stateKey    string // set while the state is held, so Cleanup releases it exactly once
	logger      *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.runtime",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision resolves the settings and acquires the shared state. It has no irreversible side
// effects (caddy validate runs it): folders and files are touched only when the runtime app
// starts.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	values := h.Values
	repl := caddy.NewReplacer()
	for _, field := range []*string{&values.APIPrefix, &values.StateDir, &values.RootKey, &values.SessionTTL, &values.KeyStore} {
		*field = repl.ReplaceKnown(*field, "")
	}
	values.WorkerDirs = replaceAll(repl, values.WorkerDirs)
	values.PluginDirs = replaceAll(repl, values.PluginDirs)
	settings, err := config.Resolve(values, os.Getenv)
	if err != nil {
		return err
	}
	h.settings = settings
	if h.RootKey != "" && !strings.Contains(h.RootKey, "{") {
		h.logger.Warn("root_key is written literally in the config, where the admin API and adapted JSON show it; " +
			"use {env.RUNTIME_ROOT_KEY} instead")
	}

	appModule, err := ctx.App(appID)
	if err != nil {
		return err
	}
	key := stateKey(settings)
	val, _, err := states.LoadOrNew(key, func() (caddy.Destructor, error) {
		return newState(settings, caddy.Log().Named("runtime")), nil
	})
	if err != nil {
		return err
	}
	h.state, h.stateKey = val.(*state), key
	h.plugins = newPluginHost(ctx, h.state.plugins, settings.APIPrefix, h.logger.Named("plugins"))
	h.unsubscribe = h.state.plugins.Subscribe(h.plugins.onChange)
	appModule.(*App).track(h.state, settings.RootKey != "", h.plugins)

	h.api, err = handlers.New(handlers.Options{
		Prefix:     settings.APIPrefix,
		Version:    version.String(),
		Logger:     h.logger,
		Ready:      h.state.ready,
		RootKey:    settings.RootKey,
		Keys:       h.state.keyStore,
		SessionTTL: settings.SessionTTL,
		Workers:    h.state.workers,
		Plugins:    h.state.plugins,
		Pool:       h.state.workerPool,
		Versions:   h.state.versions,
		PluginHost: h.plugins,
	})
	return err
}

func replaceAll(repl *caddy.Replacer, in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = repl.ReplaceKnown(s, "")
	}
	return out
}

// ServeHTTP serves the API and discovery paths; every other request goes through the plugins'
// onRequest hooks (unless it carries a valid header credential) and then to the plugin whose
// base is its first path segment, else to a worker. Every response carries X-Request-Id.
// Other handlers compose with it through matchers.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	r = handlers.EnsureRequestID(w, r)
	if h.api.Owns(r.URL.Path) {
		h.api.ServeHTTP(w, r)
		return nil
	}
	t := h.plugins.acquire()
	if t == nil {
		h.api.ServeWorker(w, r)
		return nil
	}
	defer t.release()
	dispatch := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if routes, ok := t.bases[first]; ok {
			return routes.ServeHTTP(w, r)
		}
		h.api.ServeWorker(w, r)
		return nil
	})
	var err error
	if len(t.hooks) > 0 && !h.api.SkipsHooks(r) {
		err = t.runHooks(w, r, dispatch, h.logger)
	} else {
		err = dispatch.ServeHTTP(w, r)
	}
	var he *hookError
	switch {
	case errors.As(err, &he):
		h.logger.Warn("onRequest hook failed", zap.String("plugin", he.plugin), zap.String("request_id", handlers.RequestID(r.Context())), zap.Error(he.err))
		handlers.WriteError(w, handlers.Errorf(http.StatusServiceUnavailable, "PLUGIN_ONREQUEST_FAILED",
			"plugin %s could not handle the request before it was served; try again later", he.plugin))
	case err != nil:
		handlers.WriteError(w, pluginError(err))
	}
	return nil
}

// Cleanup releases the shared state; it runs after a failed Provision too, and releases at
// most once.
func (h *Handler) Cleanup() error {
	if h.unsubscribe != nil {
		h.unsubscribe()
		h.unsubscribe = nil
	}
	if h.plugins != nil {
		h.plugins.close()
	}
	if h.stateKey == "" {
		return nil
	}
	key := h.stateKey
	h.stateKey = ""
	_, err := states.Delete(key)
	return err
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
