package handlers

import (
	"net/http"

	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
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
	} `json:"data"`
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
			responses: []response{
				{status: http.StatusOK, description: "The plugin's new state", body: PluginToggled{}},
				badName, namespace,
				errorResponse(http.StatusNotFound, "No such plugin (PLUGIN_NOT_FOUND), or it has no manifest to edit (PLUGIN_MANIFEST_NOT_FOUND)"),
			},
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
				"The response carries the manifest version.",
			request: &request{contentType: "multipart/form-data", body: UploadForm{}},
			responses: append([]response{{status: http.StatusOK, description: "Installed", body: PluginUploaded{}}},
				uploadErrors("plugin")...),
			handle: a.uploadHandler(func() *packages.Catalog { return a.opts.Plugins }, "plugin.upload", func(in InstalledUnit) any {
				var body PluginUploaded
				body.Success, body.Data.Plugin = true, in
				return body
			}),
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
	units, err := visibleUnits(c, principalOf(r.Context()))
	if err != nil {
		return err
	}
	records := make([]PluginRecord, 0, len(units))
	for _, u := range units {
		v := u.Versions[0]
		records = append(records, PluginRecord{Name: u.Name, Path: u.Path, Source: u.Source(), Removable: !u.Dir.BuiltIn,
			Version: v.Version, Enabled: v.Enabled})
	}
	writeJSON(w, http.StatusOK, records)
	return nil
}

// pluginTarget reads and authorizes the plugin a request acts on.
func pluginTarget(r *http.Request) (string, error) {
	name, err := unitName(r)
	if err != nil {
		return "", err
	}
	return name, authorizeUnit(principalOf(r.Context()), name)
}

func (a *API) togglePlugin(w http.ResponseWriter, r *http.Request, enabled bool) error {
	c, err := catalog(a.opts.Plugins)
	if err != nil {
		return err
	}
	name, err := pluginTarget(r)
	if err != nil {
		return err
	}
	return a.act(w, r, map[bool]string{true: "plugin.enable", false: "plugin.disable"}[enabled], name,
		func() error { return c.SetEnabled(name, "", enabled) },
		PluginToggled{Success: true, Data: PluginToggle{Name: name, Enabled: enabled}})
}

func (a *API) deletePlugin(w http.ResponseWriter, r *http.Request) error {
	c, err := catalog(a.opts.Plugins)
	if err != nil {
		return err
	}
	name, err := pluginTarget(r)
	if err != nil {
		return err
	}
	return a.act(w, r, "plugin.delete", name, func() error { return c.Remove(name) }, Success{Success: true})
}
