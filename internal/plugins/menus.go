package plugins

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// checkMenus checks the menu entries of a plugin served under base and returns them with
// each path written from the site's root (see menuPath).
func checkMenus(base string, menus []Menu) ([]Menu, error) {
	if len(menus) == 0 {
		return menus, nil
	}
	out := make([]Menu, len(menus))
	for i, menu := range menus {
		if menu.Title == "" || menu.Path == "" {
			return nil, invalid("menus[%d] needs a title and a path", i)
		}
		if base == "" {
			return nil, invalid("menus[%d] path %q: a menu links to a path under the plugin's base, and the plugin has none", i, menu.Path)
		}
		p, err := menuPath(base, menu.Path)
		if err != nil {
			return nil, invalid("menus[%d] path %q %v; a menu links to a path under the plugin's base: %s, %s/… or a path relative to it such as docs/", i, menu.Path, err, base, base)
		}
		menu.Path = p
		out[i] = menu
	}
	return out, nil
}

// menuPath checks a menu path (the cpanel puts it in every admin's navigation) and returns it
// written from the site's root: /<base>, /<base>/…, or a path relative to the base (docs/ is
// /<base>/docs/), with a query and fragment if any. Whatever a browser could read as another
// scheme or host is refused: a scheme, "//", a backslash (read as "/"), blanks and control
// characters (dropped or trimmed), and "." or ".." segments, percent-encoded ones included
// (browsers resolve %2e%2e), which could climb out of the base.
func menuPath(base, p string) (string, error) {
	if strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '\\' }) {
		return "", errors.New("holds a blank, a control character or a backslash")
	}
	if strings.HasPrefix(p, "//") {
		return "", errors.New("names a host")
	}
	u, err := url.Parse(p)
	switch {
	case err != nil:
		return "", errors.New("is not a URL path")
	case u.Scheme != "":
		return "", fmt.Errorf("names a scheme (%s:)", u.Scheme)
	case u.Host != "" || u.User != nil:
		return "", errors.New("names a host")
	case strings.ContainsFunc(u.Path, func(r rune) bool { return r < ' ' || r == 0x7f || r == '\\' }):
		return "", errors.New("holds an encoded control character or backslash")
	}
	rel, absolute := strings.CutPrefix(u.Path, "/")
	if absolute {
		if u.Path != base && !strings.HasPrefix(u.Path, base+"/") {
			return "", errors.New("is outside the plugin's base")
		}
		rel = strings.TrimPrefix(strings.TrimPrefix(u.Path, base), "/")
	}
	segments := strings.Split(rel, "/")
	for i, s := range segments {
		if s == "." || s == ".." || s == "" && i < len(segments)-1 {
			return "", errors.New("is not clean: it has a \".\", \"..\" or empty segment")
		}
	}
	if absolute {
		return p, nil
	}
	return base + "/" + p, nil
}
