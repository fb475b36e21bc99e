package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/envelope"
	"github.com/caddy-runtime/runtime/events"
	"github.com/caddy-runtime/runtime/handlers"
	"github.com/caddy-runtime/runtime/packages"
	"github.com/caddy-runtime/runtime/plugins"
	"github.com/caddy-runtime/runtime/trace"
)

// pluginHost serves the plugins for one handler: it compiles the load plan into a table of
// Caddy routes (by base) and request hooks, each table in its own child caddy.Context, and
// swaps tables atomically; an old table is cleaned up once its last request is done.
type pluginHost struct {
	base    caddy.Context // a fresh child of the handler's context, parent of every table
	catalog *packages.Catalog
	workers *packages.Catalog // a plugin's base may not hide one of them
	policy  plugins.Policy
	logger  *zap.Logger
	reloads *events.Bus[reloadRequest] // the state's: every host sharing the folders hears it

	mu    sync.Mutex // one reload at a time
	table atomic.Pointer[pluginTable]
}

// pluginTable is one compiled generation of the plugins.
type pluginTable struct {
	cancel  context.CancelFunc // cleans up the table's modules
	loaded  []plugins.Plugin
	failed  []plugins.Failure
	bases   map[string]caddyhttp.Handler // first path segment → the plugin's routes
	hooks   []hook
	refs    atomic.Int64
	closed  atomic.Bool
	cleanup sync.Once
}

// hook is one plugin's onRequest handlers.
type hook struct {
	plugin   string
	handler  caddyhttp.Handler
	failOpen bool
}

// newPluginHost returns the plugin host of a handler using the state s; it hears the state's
// plugin changes and reload requests until the returned function is called.
func newPluginHost(ctx caddy.Context, s *state, policy plugins.Policy, logger *zap.Logger) (*pluginHost, func()) {
	// A fresh context of our own: canceling a child of Caddy's own context would also run
	// the cleanup functions registered on that context.
	base, _ := caddy.NewContext(ctx)
	h := &pluginHost{base: base, catalog: s.plugins, workers: s.workers, policy: policy, logger: logger, reloads: &s.pluginReloads}
	offChanges := s.pluginChanges.Subscribe(h.onChange)
	offReloads := s.pluginReloads.Subscribe(func(reloadRequest) { h.reload() })
	return h, func() { offChanges(); offReloads() }
}

// reloadRequest asks every plugin host of a state to rebuild its table from the disk.
type reloadRequest struct{}

// onChange reloads after the plugin changes that take effect at once; an upload waits for an
// explicit reload.
func (h *pluginHost) onChange(ch packages.Change) {
	switch ch.Op {
	case packages.OpEnabled, packages.OpDisabled, packages.OpRemoved:
		h.reload()
	}
}

// reload rebuilds the table from the plugins on disk and swaps it in.
func (h *pluginHost) reload() *pluginTable {
	h.mu.Lock()
	defer h.mu.Unlock()
	start := time.Now()
	units, err := h.catalog.List()
	if err != nil {
		h.logger.Error("listing plugins", zap.Error(err))
	}
	workers, err := h.workers.List()
	if err != nil {
		// Without the workers no base can be checked against them: load nothing.
		h.logger.Error("listing workers; no plugin is loaded", zap.Error(err))
		units = nil
	}
	t := h.build(plugins.MakePlan(units, h.policy, packages.Names(workers)))
	runtimeMetrics.PluginReload(time.Since(start), len(t.failed))
	if old := h.table.Swap(t); old != nil {
		old.retire()
	}
	names := make([]string, len(t.loaded))
	for i, p := range t.loaded {
		names[i] = p.Name
	}
	h.logger.Info("plugins loaded", zap.Strings("loaded", names), zap.Int("failed", len(t.failed)))
	for _, f := range t.failed {
		h.logger.Warn("plugin not loaded", zap.String("plugin", f.Name), zap.String("error", f.Error))
	}
	return t
}

// build compiles a plan; a plugin that fails to provision is reported, and so is every plugin
// that requires it, while the others go live.
func (h *pluginHost) build(plan plugins.Plan) *pluginTable {
	ctx, cancel := caddy.NewContext(h.base)
	t := &pluginTable{cancel: cancel, failed: plan.Failed, bases: map[string]caddyhttp.Handler{}}
	for _, p := range plan.Load {
		if dep := slices.IndexFunc(p.Manifest.Dependencies, func(d string) bool {
			return slices.ContainsFunc(t.failed, func(f plugins.Failure) bool { return f.Name == d })
		}); dep >= 0 {
			t.failed = append(t.failed, plugins.Failure{Name: p.Name, Reason: plugins.Unmet, Error: fmt.Sprintf("requires %s, which is not loaded", p.Manifest.Dependencies[dep])})
			continue
		}
		if err := t.add(ctx, p); err != nil {
			t.failed = append(t.failed, plugins.Failure{Name: p.Name, Reason: plugins.NotProvisioned, Error: err.Error()})
			continue
		}
		t.loaded = append(t.loaded, p)
	}
	return t
}

// add compiles one plugin's routes and hooks into the table.
func (t *pluginTable) add(ctx caddy.Context, p plugins.Plugin) error {
	var routes caddyhttp.RouteList
	for i, raw := range p.Manifest.Routes {
		var r caddyhttp.Route
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("routes[%d]: %v", i, err)
		}
		routes = append(routes, r)
	}
	var hookRoute caddyhttp.RouteList
	if len(p.Manifest.OnRequest) > 0 {
		hookRoute = caddyhttp.RouteList{{HandlersRaw: p.Manifest.OnRequest}}
	}
	for _, rl := range []caddyhttp.RouteList{routes, hookRoute} {
		if err := rl.Provision(ctx); err != nil {
			return fmt.Errorf("provisioning: %v", err)
		}
	}
	if len(routes) > 0 {
		base, dir, name := p.Manifest.Base, p.Dir, p.Name
		chain := routes.Compile(caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			envelope.Write(w, envelope.Errorf(http.StatusNotFound, envelope.CodeNotFound, "plugin %s has no route for %s", name, r.URL.Path))
			return nil
		}))
		t.bases[base[1:]] = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			// Routes are written relative to the base, and file_server's root defaults to the
			// plugin's folder.
			caddyhttp.SetVar(r.Context(), "root", dir)
			trace.LogField(r.Context(), zap.String("plugin", name))
			r.URL.Path = strings.TrimPrefix(r.URL.Path, base)
			r.URL.RawPath = ""
			if r.URL.Path == "" {
				r.URL.Path = "/"
			}
			return chain.ServeHTTP(w, r)
		})
	}
	if hookRoute != nil {
		next := hookNext{i: len(t.hooks)}
		t.hooks = append(t.hooks, hook{plugin: p.Name, handler: hookRoute.Compile(next), failOpen: p.Manifest.OnRequestFailOpen})
	}
	return nil
}

// acquire returns the live table for one request, or nil; release it when the request ends.
func (h *pluginHost) acquire() *pluginTable {
	for {
		t := h.table.Load()
		if t == nil {
			return nil
		}
		t.refs.Add(1)
		if !t.closed.Load() {
			return t
		}
		t.release() // swapped out meanwhile: take the new one
	}
}

func (t *pluginTable) release() {
	if t.refs.Add(-1) == 0 && t.closed.Load() {
		t.cleanup.Do(t.cancel)
	}
}

// retire closes the table to new requests; its modules are cleaned up after the last one.
func (t *pluginTable) retire() {
	t.closed.Store(true)
	if t.refs.Load() == 0 {
		t.cleanup.Do(t.cancel)
	}
}

// close retires the live table, for the handler's Cleanup.
func (h *pluginHost) close() {
	if t := h.table.Swap(nil); t != nil {
		t.retire()
	}
}

// hookRun is one request's pass through the hooks; it lives in the request's context, so the
// hooks' handler chains, compiled once, can go on to the next hook.
type hookRun struct {
	t      *pluginTable
	final  caddyhttp.Handler
	passed []bool // passed[i]: hook i handed the request on
	logger *zap.Logger
}

type hookRunKey struct{}

// hookNext ends hook i's handler chain: the hook handed the request on, so the next one runs.
type hookNext struct{ i int }

func (n hookNext) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	run := r.Context().Value(hookRunKey{}).(*hookRun)
	run.passed[n.i] = true
	return run.from(w, r, n.i+1)
}

// hookError is an error a hook itself returned, as opposed to one from what it wraps.
type hookError struct {
	plugin string
	err    error
}

func (e *hookError) Error() string { return fmt.Sprintf("plugin %s: onRequest: %v", e.plugin, e.err) }

// runHooks runs the hooks in load order, then final. A hook that answers ends the request
// there; one that fails ends it with a hookError, unless its plugin chose to fail open.
func (t *pluginTable) runHooks(w http.ResponseWriter, r *http.Request, final caddyhttp.Handler, logger *zap.Logger) error {
	run := &hookRun{t: t, final: final, passed: make([]bool, len(t.hooks)), logger: logger}
	return run.from(w, r.WithContext(context.WithValue(r.Context(), hookRunKey{}, run)), 0)
}

func (run *hookRun) from(w http.ResponseWriter, r *http.Request, i int) error {
	for ; i < len(run.t.hooks); i++ {
		h := run.t.hooks[i]
		err := h.handler.ServeHTTP(w, r)
		if err == nil || run.passed[i] {
			return err // answered by the hook, or by what came after it
		}
		if !h.failOpen {
			return &hookError{plugin: h.plugin, err: err}
		}
		run.logger.Warn("onRequest hook failed; going on (fail open)", zap.String("plugin", h.plugin), zap.Error(err))
	}
	return run.final.ServeHTTP(w, r)
}

// pluginError is the answer to an error a plugin route returned: its status and a message
// without the error's text, which for Caddy's handlers names a Go source line and the
// server's own file paths; the log has the text.
func pluginError(err error, requestID string) *envelope.Error {
	var he caddyhttp.HandlerError
	status := http.StatusInternalServerError
	if errors.As(err, &he) && he.StatusCode != 0 {
		status = he.StatusCode
	}
	if status >= 500 {
		return envelope.Errorf(status, "PLUGIN_ERROR", "the plugin route failed; report request id %s to the operator", requestID)
	}
	return envelope.Errorf(status, "PLUGIN_ERROR", "the plugin route answered %d %s", status, http.StatusText(status))
}

// Loaded returns the live table's loaded plugins, in load order, and the ones left out.
func (h *pluginHost) Loaded() ([]plugins.Plugin, []plugins.Failure) {
	t := h.table.Load()
	if t == nil {
		return nil, nil
	}
	return slices.Clone(t.loaded), slices.Clone(t.failed)
}

// Reload asks every host sharing the plugin folders to reload, this one included, and
// returns once they have.
func (h *pluginHost) Reload() {
	h.catalog.Forget()
	h.reloads.Publish(reloadRequest{})
}

var _ handlers.PluginHost = (*pluginHost)(nil)
