// Package plugins turns the plugins on disk into a load plan: each plugin's manifest read and
// checked, the load order (dependencies first), and the plugins left out with the reason.
package plugins

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

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
	// Handlers are the handler modules the routes and hooks use, sorted.
	Handlers []string `yaml:"-"`
}

// Schemas declare every key of a plugin's manifest, for packages.UnknownKeys.
var Schemas = []any{Manifest{}, rawParts{}}

// rawParts are the Caddy configuration parts of a manifest, decoded generically.
type rawParts struct {
	Routes    []any `yaml:"routes"`
	OnRequest []any `yaml:"onRequest"`
}

// Error codes of plugin admission.
const (
	// CodeNotAllowed refuses Caddy configuration that could reach beyond the plugin.
	CodeNotAllowed = "PLUGIN_NOT_ALLOWED"
	// CodeConflict refuses a base that would hide a worker or another plugin.
	CodeConflict = "PLUGIN_CONFLICT"
)

var basePattern = regexp.MustCompile(`^/[a-z0-9][a-z0-9._-]*$`)

// ReadManifest reads and checks a plugin's manifest: its keys, and its routes and hooks
// against the policy (see checker). With dir, the plugin's folder, the routes' file roots
// come back as absolute paths inside it.
func ReadManifest(md packages.Metadata, policy Policy, dir string) (Manifest, error) {
	var m Manifest
	if err := md.Decode(&m); err != nil {
		return m, err
	}
	var raw rawParts
	if err := md.Decode(&raw); err != nil {
		return m, err
	}
	if m.Base != "" {
		if !basePattern.MatchString(m.Base) {
			return m, invalid("base %q must be one path segment such as /hello (lower-case letters, digits, '.', '_', '-')", m.Base)
		}
		if packages.IsReserved(m.Base[1:], policy.Reserved) {
			return m, invalid("base %q is reserved by the runtime", m.Base)
		}
	}
	c := checker{policy: policy, dir: dir}
	var err error
	if m.Routes, err = c.parts("routes", raw.Routes); err != nil {
		return m, err
	}
	if m.OnRequest, err = c.parts("onRequest", raw.OnRequest); err != nil {
		return m, err
	}
	m.Handlers = c.handlers
	if len(m.Routes) > 0 && m.Base == "" {
		return m, invalid("routes need a base to be served under")
	}
	for _, dep := range slices.Concat(m.Dependencies, m.OptionalDependencies) {
		if err := packages.ValidateName(dep); err != nil {
			return m, invalid("dependency %q: %v", dep, err)
		}
	}
	if m.Menus, err = checkMenus(m.Base, m.Menus); err != nil {
		return m, err
	}
	return m, nil
}

// Privileged says why installing or enabling the plugin needs a key with every namespace, or
// returns "": hooks see (and can change) every request of the runtime, and handlers beyond
// the default allow-list are trusted by the operator, not by a tenant.
func (m Manifest) Privileged() string {
	if len(m.OnRequest) > 0 {
		return "it declares onRequest hooks, which see every request of the runtime"
	}
	if extra := slices.DeleteFunc(slices.Clone(m.Handlers), func(h string) bool { return slices.Contains(DefaultHandlers, h) }); len(extra) > 0 {
		return fmt.Sprintf("it uses handler %s, beyond the default plugin_handlers (%s)", strings.Join(extra, ", "), strings.Join(DefaultHandlers, ", "))
	}
	return ""
}

func invalid(format string, args ...any) error {
	return &packages.Error{Kind: packages.Invalid, Code: packages.CodeInvalidManifest, Message: fmt.Sprintf(format, args...)}
}

// parts checks the Caddy objects of a manifest key and turns each into its JSON form.
func (c *checker) parts(key string, items []any) ([]json.RawMessage, error) {
	for i, item := range items {
		if _, ok := item.(map[string]any); !ok {
			return nil, invalid("%s[%d] must be a mapping (a Caddy %s object)", key, i, map[string]string{"routes": "route", "onRequest": "handler"}[key])
		}
	}
	if _, err := c.check(key, items); err != nil {
		return nil, err
	}
	return toJSON(key, items)
}

// toJSON turns each YAML-decoded Caddy object into its JSON form.
func toJSON(key string, items []any) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(items))
	for i, item := range items {
		b, err := json.Marshal(item)
		if err != nil {
			return nil, invalid("%s[%d]: %v", key, i, err)
		}
		out = append(out, b)
	}
	return out, nil
}
