package plugins

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/packages"
)

// Policy is what the operator lets plugins do.
type Policy struct {
	// Handlers are the handler modules routes and hooks may use (plugin_handlers).
	Handlers []string
	// Reserved are the first path segments the runtime keeps (packages.ReservedNames).
	Reserved []string
}

// DefaultHandlers are the handler modules of plugin_handlers' default. A plugin using any
// other needs a key with every namespace, whatever plugin_handlers allows.
var DefaultHandlers = strings.Fields(config.Lookup("plugin_handlers").Default)

// Matchers are the request matchers plugin routes may use: Caddy's standard ones but
// expression, whose CEL reads any placeholder by a name it can build at run time.
var Matchers = []string{"client_ip", "file", "header", "header_regexp", "host", "method", "not", "path",
	"path_regexp", "protocol", "query", "remote_ip", "tls", "url_pattern", "vars", "vars_regexp"}

// encoders are the compression modules encode's encodings and file_server's precompressed
// may name.
var encoders = []string{"br", "gzip", "zstd"}

// RefusedPlaceholders start the placeholders no string of a plugin may hold, escaped or not:
// they read the server rather than the request (its environment, any file, its host name and
// working folder).
var RefusedPlaceholders = []string{"env.", "file.", "system."}

// rootVar is the placeholder of the request's root folder: a plugin's own folder.
const rootVar = "{http.vars.root}"

// notAllowed is a refusal of a manifest's Caddy configuration.
func notAllowed(format string, args ...any) error {
	return &packages.Error{Kind: packages.Forbidden, Code: CodeNotAllowed, Message: fmt.Sprintf(format, args...)}
}

// checker walks the Caddy JSON of a plugin's routes and hooks (as decoded from YAML), refusing
// whatever could reach beyond the plugin and the request: handlers outside the allow-list,
// matchers and modules that read the server, file roots outside the plugin's folder and
// placeholders of the environment or files. With dir set, it also writes every file root as
// an absolute path in dir, so no root depends on the working folder or on a variable.
type checker struct {
	policy   Policy
	dir      string
	handlers []string // handler modules used, sorted
}

// check walks v, found at where ("routes[0].handle[1]"), and returns it with its roots
// rewritten.
func (c *checker) check(where string, v any) (any, error) {
	switch v := v.(type) {
	case string:
		return v, checkText(where, v)
	case []any:
		for i, e := range v {
			var err error
			if v[i], err = c.check(fmt.Sprintf("%s[%d]", where, i), e); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		return v, c.object(where, v)
	}
	return v, nil
}

// object checks one JSON object. Keys are compared as Go's encoding/json matches struct
// fields (Caddy decodes "Root" or "ROOT" into root), module names exactly, as Caddy looks
// them up.
func (c *checker) object(where string, obj map[string]any) error {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		at := where + "." + k
		if err := checkText(at, k); err != nil {
			return err
		}
		val := obj[k]
		s, isString := val.(string)
		switch fold(k) {
		case "ROOT", "FILE_ROOT":
			if isString {
				root, err := c.root(at, s)
				if err != nil {
					return err
				}
				obj[k] = root
				continue
			}
		case "FS":
			if isString {
				return notAllowed("%s names a Caddy file system; plugins serve files from their own folder only", at)
			}
		case "TEMPLATE_FILE":
			return notAllowed("%s: a custom browse template runs template code that can read the environment; plugins use the built-in listing", at)
		case "ENCODINGS", "PRECOMPRESSED":
			if err := moduleKeys(at, val, encoders, "encoder"); err != nil {
				return err
			}
		case "TRANSPORT":
			if t, ok := val.(map[string]any); ok && t["protocol"] != "http" {
				return notAllowed("%s uses transport %v; plugins may only proxy over http", at, t["protocol"])
			}
		}
		var err error
		if obj[k], err = c.check(at, val); err != nil {
			return err
		}
		if fold(k) == "MATCH" {
			if err := c.matcherSets(at, val); err != nil {
				return err
			}
		}
	}
	if h, ok := obj["handler"].(string); ok {
		if !slices.Contains(c.policy.Handlers, h) {
			return notAllowed("%s uses handler %q, which plugins may not use (plugin_handlers allows %s)", where, h, strings.Join(c.policy.Handlers, ", "))
		}
		if i, found := slices.BinarySearch(c.handlers, h); !found {
			c.handlers = slices.Insert(c.handlers, i, h)
		}
		if h == "file_server" {
			c.defaultRoot(obj)
		}
	}
	return nil
}

// matcherSets checks the request matcher sets of a route's match (or of a not matcher): only
// Matchers, and a file matcher's root defaults to the plugin's folder. Anything else keyed
// match (encode's response matcher, a variable of that name) is not a list of objects and is
// only walked.
func (c *checker) matcherSets(where string, v any) error {
	sets, ok := v.([]any)
	if !ok {
		return nil
	}
	for i, set := range sets {
		m, ok := set.(map[string]any)
		if !ok {
			continue
		}
		at := fmt.Sprintf("%s[%d]", where, i)
		if err := moduleKeys(at, m, Matchers, "matcher"); err != nil {
			return err
		}
		if file, ok := m["file"].(map[string]any); ok {
			c.defaultRoot(file)
		}
		if err := c.matcherSets(at+".not", m["not"]); err != nil {
			return err
		}
	}
	return nil
}

// moduleKeys refuses module names (the keys of a module map) outside allowed.
func moduleKeys(where string, v any, allowed []string, kind string) error {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	for name := range m {
		if !slices.Contains(allowed, name) {
			return notAllowed("%s uses %s %q, which plugins may not use (allowed: %s)", where, kind, name, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// defaultRoot gives a file_server or file matcher without a root the plugin's folder, rather
// than the request's root variable, which hooks do not set.
func (c *checker) defaultRoot(obj map[string]any) {
	if c.dir == "" {
		return
	}
	for k := range obj {
		if fold(k) == "ROOT" {
			return
		}
	}
	obj["root"] = c.dir
}

// root checks a file root: a fixed path relative to the plugin's folder, optionally after
// {http.vars.root} (the folder itself). It returns the root resolved in c.dir, when set.
func (c *checker) root(where, root string) (string, error) {
	rel := root
	if after, ok := strings.CutPrefix(rel, rootVar); ok {
		rel = strings.TrimPrefix(after, "/")
	}
	switch {
	case strings.ContainsAny(rel, "{}"):
		return "", notAllowed("%s %q holds a placeholder; a root is a fixed path inside the plugin's folder, such as public", where, root)
	case strings.ContainsAny(rel, "\\\x00"), path.IsAbs(rel), filepath.IsAbs(rel), filepath.VolumeName(rel) != "":
		return "", notAllowed("%s %q is outside the plugin's folder; write a path relative to it, such as public", where, root)
	}
	clean := path.Clean(rel)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", notAllowed("%s %q leads outside the plugin's folder; write a path inside it, such as public", where, root)
	}
	if c.dir == "" {
		return root, nil
	}
	return filepath.Join(c.dir, filepath.FromSlash(clean)), nil
}

// checkText refuses a string holding a refused placeholder. It looks for "{" followed by
// one, ignoring case, spaces and backslashes, so no escaped or unusual spelling slips by.
func checkText(where, s string) error {
	lower := strings.ToLower(s)
	for i := strings.IndexByte(lower, '{'); i >= 0; {
		rest := strings.TrimLeft(lower[i+1:], " \t\r\n\\")
		for _, p := range RefusedPlaceholders {
			if strings.HasPrefix(rest, p) {
				return notAllowed("%s uses the placeholder {%s…}, which reads the server's %s; plugins may not use {env.*}, {file.*} or {system.*}",
					where, p, map[string]string{"env.": "environment", "file.": "files", "system.": "host details"}[p])
			}
		}
		next := strings.IndexByte(lower[i+1:], '{')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return nil
}

// fold is a JSON object key as encoding/json folds it to compare it with struct field names:
// ASCII letters upper-cased, any other rune the smallest of its case-folding set (so "ſ"
// matches "S").
func fold(k string) string {
	return strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf {
			return unicode.ToUpper(r)
		}
		for {
			next := unicode.SimpleFold(r)
			if next <= r {
				return next
			}
			r = next
		}
	}, k)
}
