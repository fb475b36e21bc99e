package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
	"github.com/caddy-runtime/runtime/plugins"
)

// PluginRecord is a plugin as listed.
type PluginRecord struct {
	Enabled   bool   `json:"enabled" doc:"the manifest's enabled flag"`
	Name      string `json:"name" doc:"from package metadata"`
	Path      string `json:"path" doc:"the plugin's folder"`
	Removable bool   `json:"removable" doc:"true only when source is uploaded"`
	Source    string `json:"source" enum:"built-in,uploaded"`
	Version   string `json:"version"`
}

// PluginUploaded is the body of a plugin upload.
type PluginUploaded struct {
	Success bool `json:"success"`
	Data    struct {
		Plugin InstalledUnit `json:"plugin"`
		// ReloadRequired is always true: an upload installs, a reload loads.
		ReloadRequired bool   `json:"reloadRequired" doc:"true: the plugin is installed, not loaded; POST plugins/reload loads it"`
		Message        string `json:"message"`
	} `json:"data"`
}

// PluginDryRun is the body of a plugin upload with ?dryRun=1.
type PluginDryRun struct {
	Success bool `json:"success"`
	DryRun  bool `json:"dryRun" doc:"true: nothing was installed"`
	Data    struct {
		Plugin   InstalledUnit `json:"plugin" doc:"what the upload would install; installedAt is where"`
		Replaces bool          `json:"replaces" doc:"true when a plugin of this name is installed there already and the upload would replace it"`
		Plan     PluginPlan    `json:"plan" doc:"the load plan of the next reload with this plugin installed, before provisioning"`
	} `json:"data"`
}

// PluginPlan is a load plan: what would load, in order, and what would be left out.
type PluginPlan struct {
	Load   []PluginVersion `json:"load"`
	Failed []PluginFailure `json:"failed"`
}

// PluginMenu is a navigation entry a plugin adds to the cpanel.
type PluginMenu struct {
	Title string `json:"title"`
	Icon  string `json:"icon"`
	Path  string `json:"path"`
}

// LoadedPlugin is a plugin the runtime has loaded, as listed.
type LoadedPlugin struct {
	Base                 string       `json:"base,omitempty" doc:"the URL base path of its routes; absent when it has none"`
	Dependencies         []string     `json:"dependencies"`
	Menus                []PluginMenu `json:"menus"`
	Name                 string       `json:"name"`
	OptionalDependencies []string     `json:"optionalDependencies"`
	Version              string       `json:"version"`
}

// PluginFailure is a plugin left out of the load, with why.
type PluginFailure struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

// PluginVersion names a loaded plugin.
type PluginVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// PluginReload is the body of POST plugins/reload.
type PluginReload struct {
	OK      bool            `json:"ok"`
	Plugins []PluginVersion `json:"plugins" doc:"the plugins loaded, in load order"`
	Failed  []PluginFailure `json:"failed" doc:"the plugins left out: invalid manifest, missing, disabled or failed dependency, cycle, or failed to provision"`
}

// PluginHost is the live plugin table of this API's handler.
type PluginHost interface {
	// Loaded returns the loaded plugins, in load order, and the ones left out.
	Loaded() ([]plugins.Plugin, []plugins.Failure)
	// Reload rescans the plugin folders and swaps in a new table, on every handler.
	Reload()
}

// PluginConfig is a plugin's configuration as the runtime resolves it, and its place in the
// live plugin table.
type PluginConfig struct {
	Name          string          `json:"name"`
	Version       string          `json:"version" doc:"the version installed on disk"`
	Enabled       bool            `json:"enabled"`
	Path          string          `json:"path" doc:"the plugin's folder"`
	Source        string          `json:"source" enum:"built-in,uploaded"`
	Manifest      *PluginManifest `json:"manifest,omitempty" doc:"the manifest as the runtime reads it; absent when it is invalid"`
	ManifestError string          `json:"manifestError,omitempty" doc:"why the manifest is invalid, under the current plugin policy"`
	Load          PluginLoad      `json:"load"`
}

// PluginManifest is a plugin's resolved manifest: checked against the plugin policy, file
// roots made absolute inside the plugin's folder.
type PluginManifest struct {
	Base                 string       `json:"base,omitempty"`
	Dependencies         []string     `json:"dependencies"`
	OptionalDependencies []string     `json:"optionalDependencies"`
	Menus                []PluginMenu `json:"menus"`
	Routes               []any        `json:"routes" doc:"Caddy HTTP routes in Caddy's JSON shape, served under base"`
	OnRequest            []any        `json:"onRequest" doc:"Caddy handlers run before worker and plugin dispatch"`
	OnRequestFailOpen    bool         `json:"onRequestFailOpen"`
	Handlers             []string     `json:"handlers" doc:"the handler modules its routes and hooks use"`
}

// PluginLoad is where a plugin stands in the live plugin table.
type PluginLoad struct {
	State    string `json:"state" enum:"loaded,failed,not_loaded"`
	Position int    `json:"position,omitempty" doc:"its place in the load order, from 1, when loaded"`
	Version  string `json:"version,omitempty" doc:"the version loaded; older than the installed one when an upload awaits a reload"`
	Reason   string `json:"reason,omitempty" enum:"invalid,unmet_dependency,cycle,base_taken,not_provisioned,disabled,not_reloaded" doc:"why it is not loaded"`
	Error    string `json:"error,omitempty" doc:"what kept it out of the last reload"`
}

// PluginToggled is the body of a plugin enable or disable.
type PluginToggled struct {
	Success bool         `json:"success"`
	Data    PluginToggle `json:"data"`
}

// PluginToggle reports a plugin's new state.
type PluginToggle struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
}

func (a *API) pluginRoutes() []route {
	namespace := errorResponse(http.StatusForbidden, "The plugin is outside the key's namespaces (NAMESPACE_DENIED)")
	badName := errorResponse(http.StatusBadRequest, "Malformed name (INVALID_PACKAGE_NAME)")
	toggle := func(enabled bool) route {
		verb := map[bool]string{true: "enable", false: "disable"}[enabled]
		return route{
			method: "POST", path: "/plugins/{name}/" + verb, id: verb + "Plugin", tag: "plugins",
			permission:  keystore.PluginsInstall,
			summary:     map[bool]string{true: "Enable a plugin", false: "Disable a plugin"}[enabled],
			description: "Flips enabled in the plugin's manifest, keeping comments. {name} is URL-encoded (@ as %40, / as %2F).",
			responses: append([]response{
				{status: http.StatusOK, description: "The plugin's new state", body: PluginToggled{}},
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
			responses:   []response{{status: http.StatusOK, description: "The plugins", body: []PluginRecord{}}},
			handle:      a.listPlugins,
		},
		{
			method: "POST", path: "/plugins/upload", id: "uploadPlugin", tag: "plugins", permission: keystore.PluginsInstall,
			summary: "Upload a plugin",
			description: "Installs the archive at <pluginDir>/<name>/, replacing an existing install atomically. " +
				"The response carries the manifest version. Installing does not load: POST plugins/reload does.",
			params:  dryRunParam,
			request: &request{contentType: "multipart/form-data", body: UploadForm{}},
			responses: append([]response{{status: http.StatusOK, description: "Installed; with dryRun, what the upload would install and the load plan the next reload would make (PluginDryRun)",
				body: PluginUploaded{}, alt: []any{PluginDryRun{}}}}, uploadErrors("plugin")...),
			handle: a.uploadHandler(func() *packages.Catalog { return a.opts.Plugins }, "plugin.upload", func(in InstalledUnit) any {
				var body PluginUploaded
				body.Success, body.Data.Plugin, body.Data.ReloadRequired = true, in, true
				body.Data.Message = "installed; POST " + a.opts.Prefix + "/plugins/reload to load it"
				return body
			}, a.pluginDryRun),
		},
		{
			method: "GET", path: "/plugins/loaded", id: "listLoadedPlugins", tag: "plugins", permission: keystore.PluginsRead,
			summary:     "List the loaded plugins",
			description: "The runtime's plugin registry: the plugins loaded, in load order (dependencies first), filtered to the key's namespaces.",
			responses:   []response{{status: http.StatusOK, description: "The loaded plugins", body: []LoadedPlugin{}}},
			handle:      a.listLoadedPlugins,
		},
		{
			method: "POST", path: "/plugins/reload", id: "reloadPlugins", tag: "plugins", permission: keystore.PluginsInstall,
			summary: "Reload the plugins",
			description: "Rescans the plugin folders and swaps in the new route table without a restart; requests in flight " +
				"finish on the old one. Plugins that cannot load are listed under failed; the others go live.",
			responses: []response{{status: http.StatusOK, description: "Reloaded", body: PluginReload{}}},
			handle:    a.reloadPlugins,
		},
		{
			method: "GET", path: "/plugins/{name}/config", id: "getPluginConfig", tag: "plugins", permission: keystore.PluginsConfig,
			summary: "Read a plugin's configuration",
			description: "The plugin's manifest as the runtime resolves it (checked against the plugin policy, file roots made absolute) " +
				"and its load record: loaded (with its place in the load order), failed (with the reason) or not loaded. {name} is URL-encoded (@ as %40, / as %2F).",
			responses: []response{
				{status: http.StatusOK, description: "The configuration and load record", body: PluginConfig{}},
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
			description: "{name} is URL-encoded (@ as %40, / as %2F).",
			responses: []response{
				{status: http.StatusOK, description: "Removed", body: Success{}},
				badName,
				errorResponse(http.StatusForbidden, "Built-in plugins cannot be removed (BUILT_IN_PLUGIN_REMOVE_FORBIDDEN), or NAMESPACE_DENIED"),
				errorResponse(http.StatusNotFound, "No such plugin (PLUGIN_NOT_FOUND)"),
			},
			handle: a.deletePlugin,
		},
	}
}

func (a *API) listPlugins(w http.ResponseWriter, r *http.Request) error {
	c, err := catalog(a.opts.Plugins)
	if err != nil {
		return err
	}
	return listUnits(w, r, c, &a.pluginList, func(u packages.Unit) PluginRecord {
		v := u.Versions[0]
		return PluginRecord{Name: u.Name, Path: u.Path, Source: u.Source(), Removable: !u.Dir.BuiltIn,
			Version: v.Version, Enabled: v.Enabled}
	})
}

// pluginTarget reads and authorizes the plugin a request acts on, in the plugin catalog.
func (a *API) pluginTarget(r *http.Request) (*packages.Catalog, string, error) {
	c, err := catalog(a.opts.Plugins)
	if err != nil {
		return nil, "", err
	}
	name, err := unitName(r)
	if err != nil {
		return nil, "", err
	}
	return c, name, authorizeUnit(principalOf(r.Context()), name)
}

func (a *API) togglePlugin(w http.ResponseWriter, r *http.Request, enabled bool) error {
	c, name, err := a.pluginTarget(r)
	if err != nil {
		return err
	}
	return a.act(w, r, map[bool]string{true: "plugin.enable", false: "plugin.disable"}[enabled], name,
		func() error { return a.setEnabled(r, c, name, "", enabled) },
		PluginToggled{Success: true, Data: PluginToggle{Name: name, Enabled: enabled}})
}

func (a *API) deletePlugin(w http.ResponseWriter, r *http.Request) error {
	c, name, err := a.pluginTarget(r)
	if err != nil {
		return err
	}
	return a.act(w, r, "plugin.delete", name, func() error { return c.Remove(name) }, Success{Success: true})
}

func (a *API) pluginConfig(w http.ResponseWriter, r *http.Request) error {
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
	out := PluginConfig{Name: u.Name, Version: v.Version, Enabled: v.Enabled, Path: u.Path, Source: u.Source()}
	if m, err := plugins.ReadManifest(v.Metadata, a.opts.PluginPolicy, v.Path); err != nil {
		out.ManifestError = err.Error()
	} else if out.Manifest, err = pluginManifest(m); err != nil {
		return err
	}
	out.Load = pluginLoad(host, name, v.Enabled)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// pluginManifest is the API's view of a resolved manifest.
func pluginManifest(m plugins.Manifest) (*PluginManifest, error) {
	decode := func(parts []json.RawMessage) ([]any, error) {
		out := make([]any, len(parts))
		for i, part := range parts {
			if err := json.Unmarshal(part, &out[i]); err != nil {
				return nil, fmt.Errorf("decoding a resolved manifest: %v", err)
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
	return &PluginManifest{Base: m.Base, Dependencies: l.Dependencies, OptionalDependencies: l.OptionalDependencies,
		Menus: l.Menus, Routes: routes, OnRequest: hooks, OnRequestFailOpen: m.OnRequestFailOpen, Handlers: nonNil(m.Handlers)}, nil
}

// pluginLoad finds the plugin name in the live table.
func pluginLoad(host PluginHost, name string, enabled bool) PluginLoad {
	loaded, failed := host.Loaded()
	if i := slices.IndexFunc(loaded, func(p plugins.Plugin) bool { return p.Name == name }); i >= 0 {
		return PluginLoad{State: "loaded", Position: i + 1, Version: loaded[i].Version}
	}
	if i := slices.IndexFunc(failed, func(f plugins.Failure) bool { return f.Name == name }); i >= 0 {
		return PluginLoad{State: "failed", Reason: failed[i].Reason.String(), Error: failed[i].Error}
	}
	if !enabled {
		return PluginLoad{State: "not_loaded", Reason: "disabled"}
	}
	return PluginLoad{State: "not_loaded", Reason: "not_reloaded", Error: "installed since the last reload; POST plugins/reload loads it"}
}

// pluginHost returns the plugin table, or 503 while the runtime is starting.
func (a *API) pluginHost() (PluginHost, error) {
	if a.opts.PluginHost == nil {
		return nil, Errorf(http.StatusServiceUnavailable, CodeNotReady, "the runtime is starting")
	}
	return a.opts.PluginHost, nil
}

func (a *API) listLoadedPlugins(w http.ResponseWriter, r *http.Request) error {
	host, err := a.pluginHost()
	if err != nil {
		return err
	}
	loaded, _ := host.Loaded()
	p := principalOf(r.Context())
	out := []LoadedPlugin{}
	for _, l := range loaded {
		if p.CanAccess(l.Name) {
			out = append(out, loadedPlugin(l))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// loadedPlugin is the spec's record of a loaded plugin.
func loadedPlugin(p plugins.Plugin) LoadedPlugin {
	m := p.Manifest
	menus := make([]PluginMenu, len(m.Menus))
	for i, menu := range m.Menus {
		menus[i] = PluginMenu{Title: menu.Title, Icon: menu.Icon, Path: menu.Path}
	}
	return LoadedPlugin{Base: m.Base, Dependencies: nonNil(m.Dependencies), Menus: menus, Name: p.Name,
		OptionalDependencies: nonNil(m.OptionalDependencies), Version: p.Version}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (a *API) reloadPlugins(w http.ResponseWriter, r *http.Request) error {
	host, err := a.pluginHost()
	if err != nil {
		return err
	}
	host.Reload()
	loaded, failed := host.Loaded()
	p := principalOf(r.Context())
	out := PluginReload{OK: true, Plugins: []PluginVersion{}, Failed: []PluginFailure{}}
	for _, l := range loaded {
		if p.CanAccess(l.Name) {
			out.Plugins = append(out.Plugins, PluginVersion{Name: l.Name, Version: l.Version})
		}
	}
	for _, f := range failed {
		if p.CanAccess(f.Name) {
			out.Failed = append(out.Failed, PluginFailure{Name: f.Name, Error: f.Error})
		}
	}
	a.audit(r, "plugin.reload", "", "success", &p, zap.Int("loaded", len(out.Plugins)), zap.Int("failed", len(out.Failed)))
	writeJSON(w, http.StatusOK, out)
	return nil
}

// pluginDryRun answers a plugin upload's dry run: the staged plugin and the load plan that
// the installed plugins and it would make, filtered to the key's namespaces.
func (a *API) pluginDryRun(r *http.Request, s *packages.Staged) (any, error) {
	installed, err := a.installed()
	if err != nil {
		return nil, err
	}
	candidate := packages.Unit{Name: s.Name, Path: s.Tree,
		Versions: []packages.Version{{Version: s.Version, Enabled: s.Metadata.Enabled, Path: s.Tree, Metadata: s.Metadata}}}
	units := slices.DeleteFunc(slices.Clone(installed[packages.PluginLayout.Noun]), func(u packages.Unit) bool { return u.Name == s.Name })
	plan := plugins.MakePlan(append(units, candidate), a.opts.PluginPolicy, packages.Names(installed[packages.WorkerLayout.Noun]))
	var body PluginDryRun
	body.Success, body.DryRun, body.Data.Plugin, body.Data.Replaces = true, true, installedUnit(s.Installed), s.Replaces
	body.Data.Plan = PluginPlan{Load: []PluginVersion{}, Failed: []PluginFailure{}}
	p := principalOf(r.Context())
	for _, l := range plan.Load {
		if p.CanAccess(l.Name) {
			body.Data.Plan.Load = append(body.Data.Plan.Load, PluginVersion{Name: l.Name, Version: l.Version})
		}
	}
	for _, f := range plan.Failed {
		if p.CanAccess(f.Name) {
			body.Data.Plan.Failed = append(body.Data.Plan.Failed, PluginFailure{Name: f.Name, Error: f.Error})
		}
	}
	return body, nil
}
