// Package pluginhost is the part of the data plane that runs plugins: it compiles the
// plugins' routes and onRequest hooks into Caddy handlers, swaps them in as plugins change,
// and serves a request for uploaded code (Chain) through the hooks, then the plugin whose base
// is its first path segment, else the workers (package serving), every answer of them through
// the guard of the session cookie. It imports Caddy, whose handlers
// the plugins' routes are; the management API is elsewhere (package handlers), which it
// knows only through the small interfaces it declares.
package pluginhost

import (
	"context"
	"encoding/json"
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

	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/events"
	"github.com/caddy-runtime/runtime/internal/metrics"
	"github.com/caddy-runtime/runtime/internal/plugins"
	"github.com/caddy-runtime/runtime/internal/trace"
	"github.com/caddy-runtime/runtime/internal/troubleshooting"
	"github.com/caddy-runtime/runtime/packages"
)

// Options configure a Host.
type Options struct {
	// Plugins is the plugin catalog the tables are built from.
	Plugins *packages.Catalog
	// Workers is the worker catalog: a plugin's base may not hide one of them.
	Workers *packages.Catalog
	// Policy is what plugins may do.
	Policy plugins.Policy
	// Changes and Reloads are the shared state's: every host sharing the folders hears them.
	Changes *events.Bus[packages.Change]
	Reloads *events.Bus[Reload]
	// Metrics times the reloads; nil times nothing.
	Metrics *metrics.Set
	Logger  *zap.Logger
}

// Host serves the plugins for one handler: it compiles the load plan into a table of Caddy
// routes (by base) and request hooks, each table in its own child caddy.Context, and swaps
// tables atomically; an old table is cleaned up once its last request is done.
type Host struct {
	base caddy.Context // a fresh child of the handler's context, parent of every table
	opts Options

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

// New returns the plugin host of a handler; it hears the plugin changes and reload requests
// until the returned function is called. Its table is empty until Load.
func New(ctx caddy.Context, opts Options) (*Host, func()) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	// A fresh context of our own: canceling a child of Caddy's own context would also run
	// the cleanup functions registered on that context.
	base, _ := caddy.NewContext(ctx)
	h := &Host{base: base, opts: opts}
	offChanges := opts.Changes.Subscribe(h.onChange)
	offReloads := opts.Reloads.Subscribe(func(Reload) { h.Load() })
	return h, func() { offChanges(); offReloads() }
}

// Reload asks every plugin host of a shared state to rebuild its table from the disk.
type Reload struct{}

// onChange reloads after the plugin changes that take effect at once; an upload waits for an
// explicit reload.
func (h *Host) onChange(ch packages.Change) {
	switch ch.Op {
	case packages.OpEnabled, packages.OpDisabled, packages.OpRemoved:
		h.Load()
	}
}

// Load rebuilds this host's table from the plugins on disk and swaps it in.
func (h *Host) Load() {
	h.mu.Lock()
	defer h.mu.Unlock()
	start := time.Now()
	units, err := h.opts.Plugins.List()
	if err != nil {
		h.opts.Logger.Error("listing plugins", zap.Error(err))
	}
	workers, err := h.opts.Workers.List()
	if err != nil {
		// Without the workers no base can be checked against them: load nothing.
		h.opts.Logger.Error("listing workers; no plugin is loaded", zap.Error(err))
		units = nil
	}
	t := h.build(plugins.MakePlan(units, h.opts.Policy, packages.Names(workers)))
	h.opts.Metrics.PluginReload(time.Since(start), len(t.failed))
	if old := h.table.Swap(t); old != nil {
		old.retire()
	}
	names := make([]string, len(t.loaded))
	for i, p := range t.loaded {
		names[i] = p.Name
	}
	h.opts.Logger.Info("plugins loaded", zap.Strings("loaded", names), zap.Int("failed", len(t.failed)))
	for _, f := range t.failed {
		h.opts.Logger.Warn("plugin not loaded", zap.String("plugin", f.Name), zap.String("error", f.Error), troubleshooting.PluginNotLoaded.Field())
	}
}

// build compiles a plan; a plugin that fails to provision is reported, and so is every plugin
// that requires it, while the others go live.
func (h *Host) build(plan plugins.Plan) *pluginTable {
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
			return fmt.Errorf("routes[%d]: %w", i, err)
		}
		routes = append(routes, r)
	}
	var hookRoute caddyhttp.RouteList
	if len(p.Manifest.OnRequest) > 0 {
		hookRoute = caddyhttp.RouteList{{HandlersRaw: p.Manifest.OnRequest}}
	}
	for _, rl := range []caddyhttp.RouteList{routes, hookRoute} {
		if err := rl.Provision(ctx); err != nil {
			return fmt.Errorf("provisioning: %w", err)
		}
	}
	if len(routes) > 0 {
		base, dir, name := p.Manifest.Base, p.Dir, p.Name
		chain := routes.Compile(caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			return envelope.Errorf(http.StatusNotFound, envelope.CodeNotFound, "plugin %s has no route for %s", name, r.URL.Path)
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
func (h *Host) acquire() *pluginTable {
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

// Close retires the live table, for the handler's Cleanup.
func (h *Host) Close() {
	if t := h.table.Swap(nil); t != nil {
		t.retire()
	}
}

// Loaded returns the live table's loaded plugins, in load order, and the ones left out.
func (h *Host) Loaded() ([]plugins.Plugin, []plugins.Failure) {
	t := h.table.Load()
	if t == nil {
		return nil, nil
	}
	return slices.Clone(t.loaded), slices.Clone(t.failed)
}

// Reload asks every host sharing the plugin folders to reload, this one included, and
// returns once they have.
func (h *Host) Reload() {
	h.opts.Plugins.Forget()
	h.opts.Reloads.Publish(Reload{})
}
