package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/plugins"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// PluginHost is the live plugin table of this API's handler.
type PluginHost interface {
	// Loaded returns the loaded plugins, in load order, and the ones left out.
	Loaded() ([]plugins.Plugin, []plugins.Failure)
	// Reload rescans the plugin folders and swaps in a new table, on every handler.
	Reload()
}

func (a *unitsAPI) pluginRoutes() []route {
	namespace := errorResponse(http.StatusForbidden, "The plugin is outside the key's namespaces (NAMESPACE_DENIED)")
	badName := errorResponse(http.StatusBadRequest, "Malformed name (INVALID_PACKAGE_NAME)")
	toggle := func(enabled bool) route {
		verb := map[bool]string{true: "enable", false: "disable"}[enabled]
		return route{
			method: "POST", path: "/plugins/{name}/" + verb, id: verb + "Plugin", tag: "plugins",
			permission:  keystore.PluginsInstall,
			summary:     map[bool]string{true: "Enable a plugin", false: "Disable a plugin"}[enabled],
			description: "Flips enabled in the plugin's manifest, keeping comments. {name} is URL-encoded (@ as %40, / as %2F). " + clusterChangeDoc,
			responses: append([]response{
				{status: http.StatusOK, description: "The plugin's new state", body: api.PluginToggled{}},
				errorResponse(http.StatusNotFound, "No such plugin (PLUGIN_NOT_FOUND), or it has no manifest to edit (PLUGIN_MANIFEST_NOT_FOUND)"),
			}, toggleErrors("plugin", enabled, badName, namespace)...),
			handle: func(w http.ResponseWriter, r *http.Request) error { return a.togglePlugin(w, r, enabled) },
		}
	}
	return []route{
		{
			method: "GET", path: "/plugins", id: "listPlugins", tag: "plugins", permission: keystore.PluginsRead,
			summary:     "List plugins",
			description: "Plugins found in plugin_dirs, filtered to the key's namespaces.",
			responses:   []response{{status: http.StatusOK, description: "The plugins", body: []api.PluginRecord{}}},
			handle:      a.listPlugins,
		},
		{
			method: "POST", path: "/plugins/upload", id: "uploadPlugin", tag: "plugins", permission: keystore.PluginsInstall,
			summary: "Upload a plugin",
			description: "Installs the archive at <pluginDir>/<name>/, replacing an existing install atomically. " +
				"The response carries the manifest version. Installing does not load: POST plugins/reload does. " + manifestWarningsDoc + clusterUploadDoc +
				" In cluster mode every instance loads the plugin once it has installed it.",
			params:  dryRunParam,
			request: &request{contentType: "multipart/form-data", body: api.UploadForm{}},
			responses: append([]response{{status: http.StatusOK, description: "Installed; with dryRun, what the upload would install and the load plan the next reload would make (PluginDryRun)",
				body: api.PluginUploaded{}, alt: []any{api.PluginDryRun{}}}}, uploadErrors("plugin")...),
			handle: a.uploadHandler(func() *packages.Catalog { return a.plugins }, "plugin.upload", func(in api.InstalledUnit, _ []keystore.Share) any {
				var body api.PluginUploaded
				body.Success, body.Data.Plugin, body.Data.ReloadRequired = true, in, true
				body.Data.Message = "installed; POST " + a.prefix + "/plugins/reload to load it"
				if a.cluster != nil {
					body.Data.ReloadRequired = false
					body.Data.Message = "installed and loaded; every instance loads it once it has installed it"
				}
				return body
			}, a.pluginDryRun),
		},
		{
			method: "GET", path: "/plugins/loaded", id: "listLoadedPlugins", tag: "plugins", permission: keystore.PluginsRead,
			summary:     "List the loaded plugins",
			description: "The runtime's plugin registry: the plugins loaded, in load order (dependencies first), filtered to the key's namespaces.",
			responses:   []response{{status: http.StatusOK, description: "The loaded plugins", body: []api.LoadedPlugin{}}},
			handle:      a.listLoadedPlugins,
		},
		{
			method: "POST", path: "/plugins/reload", id: "reloadPlugins", tag: "plugins", permission: keystore.PluginsInstall,
			summary: "Reload the plugins",
			description: "Rescans the plugin folders and swaps in the new route table without a restart; requests in flight " +
				"finish on the old one. Plugins that cannot load are listed under failed; the others go live. " +
				"In cluster mode every instance reloads (the request is written to the desired state); this one has when the answer comes.",
			responses: []response{{status: http.StatusOK, description: "Reloaded", body: api.PluginReload{}}},
			handle:    a.reloadPlugins,
		},
		{
			method: "GET", path: "/plugins/{name}/config", id: "getPluginConfig", tag: "plugins", permission: keystore.PluginsConfig,
			summary: "Read a plugin's configuration",
			description: "The plugin's manifest as the runtime resolves it (checked against the plugin policy, file roots made absolute) " +
				"and its load record: loaded (with its place in the load order), failed (with the reason) or not loaded. {name} is URL-encoded (@ as %40, / as %2F).",
			responses: []response{
				{status: http.StatusOK, description: "The configuration and load record", body: api.PluginConfig{}},
				badName, namespace,
				errorResponse(http.StatusNotFound, "No such plugin (PLUGIN_NOT_FOUND)"),
			},
			handle: a.pluginConfig,
		},
		toggle(true),
		toggle(false),
		{
			method: "DELETE", path: "/plugins/{name}", id: "deletePlugin", tag: "plugins", permission: keystore.PluginsRemove,
			summary:     "Remove a plugin",
			description: "{name} is URL-encoded (@ as %40, / as %2F). " + clusterChangeDoc,
			responses: []response{
				{status: http.StatusOK, description: "Removed", body: api.Success{}},
				badName,
				errorResponse(http.StatusForbidden, "Built-in plugins cannot be removed (BUILT_IN_PLUGIN_REMOVE_FORBIDDEN), or NAMESPACE_DENIED"),
				errorResponse(http.StatusNotFound, "No such plugin (PLUGIN_NOT_FOUND)"),
			},
			handle: a.deletePlugin,
		},
	}
}

func (a *unitsAPI) listPlugins(w http.ResponseWriter, r *http.Request) error {
	c, err := catalog(a.plugins)
	if err != nil {
		return err
	}
	return listUnits(w, r, c, &a.pluginList, arrayShape, 0, func(u packages.Unit) api.PluginRecord {
		v := u.Versions[0]
		return api.PluginRecord{Name: u.Name, Path: u.Path, Source: u.Source(), Removable: !u.Dir.BuiltIn,
			Version: v.Version, Enabled: v.Enabled}
	})
}

// pluginTarget reads and authorizes the plugin a request acts on, in the plugin catalog.
func (a *unitsAPI) pluginTarget(r *http.Request) (*packages.Catalog, string, error) {
	c, err := catalog(a.plugins)
	if err != nil {
		return nil, "", err
	}
	name, err := unitName(r)
	if err != nil {
		return nil, "", err
	}
	return c, name, authorizeUnit(principalOf(r.Context()), name)
}

func (a *unitsAPI) togglePlugin(w http.ResponseWriter, r *http.Request, enabled bool) error {
	c, name, err := a.pluginTarget(r)
	if err != nil {
		return err
	}
	body := &api.PluginToggled{Success: true, Data: api.PluginToggle{Name: name, Enabled: enabled}}
	return a.act(w, r, map[bool]string{true: "plugin.enable", false: "plugin.disable"}[enabled], name,
		func() (err error) {
			body.Data.Change, err = a.setEnabled(r, c, name, "", enabled)
			return err
		}, body)
}

func (a *unitsAPI) deletePlugin(w http.ResponseWriter, r *http.Request) error {
	c, name, err := a.pluginTarget(r)
	if err != nil {
		return err
	}
	return a.act(w, r, "plugin.delete", name, func() error { return a.removeUnit(r, c, name, "", func() error { return c.Remove(name) }) }, api.Success{Success: true})
}

func (a *unitsAPI) pluginConfig(w http.ResponseWriter, r *http.Request) error {
	c, name, err := a.pluginTarget(r)
	if err != nil {
		return err
	}
	host, err := a.pluginHost()
	if err != nil {
		return err
	}
	u, err := c.Lookup(name)
	if err != nil {
		return packageError(err)
	}
	v := u.Versions[0]
	out := api.PluginConfig{Name: u.Name, Version: v.Version, Enabled: v.Enabled, Path: u.Path, Source: u.Source()}
	if m, err := plugins.ReadManifest(v.Metadata, a.pluginPolicy, v.Path); err != nil {
		out.ManifestError = err.Error()
	} else if out.Manifest, err = pluginManifest(m); err != nil {
		return err
	}
	out.Load = pluginLoad(host, name, v.Enabled)
	envelope.WriteJSON(w, http.StatusOK, out)
	return nil
}

// pluginManifest is the API's view of a resolved manifest.
func pluginManifest(m plugins.Manifest) (*api.PluginManifest, error) {
	decode := func(parts []json.RawMessage) ([]any, error) {
		out := make([]any, len(parts))
		for i, part := range parts {
			if err := json.Unmarshal(part, &out[i]); err != nil {
				return nil, fmt.Errorf("decoding a resolved manifest: %w", err)
			}
		}
		return out, nil
	}
	routes, err := decode(m.Routes)
	if err != nil {
		return nil, err
	}
	hooks, err := decode(m.OnRequest)
	if err != nil {
		return nil, err
	}
	l := loadedPlugin(plugins.Plugin{Manifest: m})
	return &api.PluginManifest{Base: m.Base, Dependencies: l.Dependencies, OptionalDependencies: l.OptionalDependencies,
		Menus: l.Menus, Routes: routes, OnRequest: hooks, OnRequestFailOpen: m.OnRequestFailOpen, Handlers: nonNil(m.Handlers)}, nil
}

// pluginLoad finds the plugin name in the live table.
func pluginLoad(host PluginHost, name string, enabled bool) api.PluginLoad {
	loaded, failed := host.Loaded()
	if i := slices.IndexFunc(loaded, func(p plugins.Plugin) bool { return p.Name == name }); i >= 0 {
		return api.PluginLoad{State: "loaded", Position: i + 1, Version: loaded[i].Version}
	}
	if i := slices.IndexFunc(failed, func(f plugins.Failure) bool { return f.Name == name }); i >= 0 {
		return api.PluginLoad{State: "failed", Reason: failed[i].Reason.String(), Error: failed[i].Error}
	}
	if !enabled {
		return api.PluginLoad{State: "not_loaded", Reason: "disabled"}
	}
	return api.PluginLoad{State: "not_loaded", Reason: "not_reloaded", Error: "installed since the last reload; POST plugins/reload loads it"}
}

// pluginHost returns the plugin table, or 503 while the runtime is starting.
func (a *unitsAPI) pluginHost() (PluginHost, error) {
	if a.host == nil {
		return nil, envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "the runtime is starting")
	}
	return a.host, nil
}

func (a *unitsAPI) listLoadedPlugins(w http.ResponseWriter, r *http.Request) error {
	host, err := a.pluginHost()
	if err != nil {
		return err
	}
	loaded, _ := host.Loaded()
	p := principalOf(r.Context())
	out := []api.LoadedPlugin{}
	for _, l := range loaded {
		if p.CanAccess(l.Name) {
			out = append(out, loadedPlugin(l))
		}
	}
	envelope.WriteJSON(w, http.StatusOK, out)
	return nil
}

// loadedPlugin is the spec's record of a loaded plugin.
func loadedPlugin(p plugins.Plugin) api.LoadedPlugin {
	m := p.Manifest
	menus := make([]api.PluginMenu, len(m.Menus))
	for i, menu := range m.Menus {
		menus[i] = api.PluginMenu{Title: menu.Title, Icon: menu.Icon, Path: menu.Path}
	}
	return api.LoadedPlugin{Base: m.Base, Dependencies: nonNil(m.Dependencies), Menus: menus, Name: p.Name,
		OptionalDependencies: nonNil(m.OptionalDependencies), Version: p.Version}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (a *unitsAPI) reloadPlugins(w http.ResponseWriter, r *http.Request) error {
	host, err := a.pluginHost()
	if err != nil {
		return err
	}
	var change int64
	if a.cluster != nil {
		// Every instance reloads; this one has when the request is written.
		if change, err = a.cluster.ReloadPlugins(r.Context(), principalOf(r.Context())); err != nil {
			return err
		}
	} else {
		host.Reload()
	}
	loaded, failed := host.Loaded()
	p := principalOf(r.Context())
	out := api.PluginReload{OK: true, Plugins: []api.PluginVersion{}, Failed: []api.PluginFailure{}, Change: change}
	for _, l := range loaded {
		if p.CanAccess(l.Name) {
			out.Plugins = append(out.Plugins, api.PluginVersion{Name: l.Name, Version: l.Version})
		}
	}
	for _, f := range failed {
		if p.CanAccess(f.Name) {
			out.Failed = append(out.Failed, api.PluginFailure{Name: f.Name, Error: f.Error})
		}
	}
	a.audit(r, "plugin.reload", "", "success", &p, zap.Int("loaded", len(out.Plugins)), zap.Int("failed", len(out.Failed)), zap.Int64("change", change))
	envelope.WriteJSON(w, http.StatusOK, out)
	return nil
}

// pluginDryRun answers a plugin upload's dry run: the staged plugin and the load plan that
// the installed plugins and it would make, filtered to the key's namespaces.
func (a *unitsAPI) pluginDryRun(r *http.Request, s *packages.Staged) (any, error) {
	installed, err := a.installed()
	if err != nil {
		return nil, err
	}
	candidate := packages.Unit{Name: s.Name, Path: s.Tree,
		Versions: []packages.Version{{Version: s.Version, Enabled: s.Metadata.Enabled, Path: s.Tree, Metadata: s.Metadata}}}
	units := slices.DeleteFunc(slices.Clone(installed[packages.PluginLayout.Noun]), func(u packages.Unit) bool { return u.Name == s.Name })
	plan := plugins.MakePlan(append(units, candidate), a.pluginPolicy, packages.Names(installed[packages.WorkerLayout.Noun]))
	var body api.PluginDryRun
	body.Success, body.DryRun, body.Data.Plugin, body.Data.Replaces = true, true, installedUnit(s.Installed, manifestWarnings(a.plugins, s.Metadata)), s.Replaces
	body.Data.Plan = api.PluginPlan{Load: []api.PluginVersion{}, Failed: []api.PluginFailure{}}
	p := principalOf(r.Context())
	for _, l := range plan.Load {
		if p.CanAccess(l.Name) {
			body.Data.Plan.Load = append(body.Data.Plan.Load, api.PluginVersion{Name: l.Name, Version: l.Version})
		}
	}
	for _, f := range plan.Failed {
		if p.CanAccess(f.Name) {
			body.Data.Plan.Failed = append(body.Data.Plan.Failed, api.PluginFailure{Name: f.Name, Error: f.Error})
		}
	}
	return body, nil
}
