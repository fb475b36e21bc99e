// Package plugins turns the plugins on disk into a load plan: each plugin's manifest read and
// checked, the load order (dependencies first), and the plugins left out with the reason.
package plugins

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/caddy-runtime/runtime/packages"
)

// Menu is an entry a plugin adds to the cpanel's navigation.
type Menu struct {
	Title string `json:"title" yaml:"title"`
	Icon  string `json:"icon" yaml:"icon"`
	Path  string `json:"path" yaml:"path"`
}

// Manifest holds a plugin's keys beyond name, version and enabled.
type Manifest struct {
	// Base is the path the plugin's routes are served under, one segment: "/hello".
	Base                 string   `yaml:"base"`
	Dependencies         []string `yaml:"dependencies"`
	OptionalDependencies []string `yaml:"optionalDependencies"`
	Menus                []Menu   `yaml:"menus"`
	// Routes are Caddy HTTP routes in Caddy's JSON shape, written as YAML.
	Routes []json.RawMessage `yaml:"-"`
	// OnRequest are Caddy handlers run before worker and plugin dispatch.
	OnRequest         []json.RawMessage `yaml:"-"`
	OnRequestFailOpen bool              `yaml:"onRequestFailOpen"`
}

// rawParts are the Caddy configuration parts of a manifest, decoded generically.
type rawParts struct {
	Routes    []any `yaml:"routes"`
	OnRequest []any `yaml:"onRequest"`
}

var basePattern = regexp.MustCompile(`^/[a-z0-9][a-z0-9._-]*$`)

// ReadManifest reads and checks a plugin's manifest. reserved lists the first path segments
// the runtime keeps for itself.
func ReadManifest(md packages.Metadata, reserved []string) (Manifest, error) {
	var m Manifest
	if err := md.Decode(&m); err != nil {
		return m, err
	}
	var raw rawParts
	if err := md.Decode(&raw); err != nil {
		return m, err
	}
	var err error
	if m.Routes, err = toJSON("routes", raw.Routes); err != nil {
		return m, err
	}
	if m.OnRequest, err = toJSON("onRequest", raw.OnRequest); err != nil {
		return m, err
	}
	if m.Base != "" {
		if !basePattern.MatchString(m.Base) {
			return m, fmt.Errorf("base %q must be one path segment such as /hello (lower-case letters, digits, '.', '_', '-')", m.Base)
		}
		if slices.Contains(reserved, m.Base[1:]) {
			return m, fmt.Errorf("base %q is reserved by the runtime", m.Base)
		}
	}
	if len(m.Routes) > 0 && m.Base == "" {
		return m, fmt.Errorf("routes need a base to be served under")
	}
	for _, dep := range slices.Concat(m.Dependencies, m.OptionalDependencies) {
		if err := packages.ValidateName(dep); err != nil {
			return m, fmt.Errorf("dependency %q: %v", dep, err)
		}
	}
	for i, menu := range m.Menus {
		if menu.Title == "" || menu.Path == "" {
			return m, fmt.Errorf("menu %d needs a title and a path", i+1)
		}
	}
	return m, nil
}

// toJSON turns each YAML-decoded Caddy object into its JSON form.
func toJSON(key string, items []any) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(items))
	for i, item := range items {
		if _, ok := item.(map[string]any); !ok {
			return nil, fmt.Errorf("%s[%d] must be a mapping (a Caddy %s object)", key, i, map[string]string{"routes": "route", "onRequest": "handler"}[key])
		}
		b, err := json.Marshal(item)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %v", key, i, err)
		}
		out = append(out, b)
	}
	return out, nil
}
