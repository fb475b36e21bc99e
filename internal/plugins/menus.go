package plugins

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// checkMenus checks the menu entries of a plugin served under base ("" for none) and returns
// them with each path written from the site's root (see menuPath).
func checkMenus(base string, menus []Menu) ([]Menu, error) {
	if len(menus) == 0 {
		return menus, nil
	}
	out := make([]Menu, len(menus))
	for i, menu := range menus {
		if menu.Title == "" || menu.Path == "" {
			return nil, invalid("menus[%d] needs a title and a path", i)
		}
		p, err := menuPath(base, menu.Path)
		switch {
		case err != nil && base == "":
			return nil, invalid("menus[%d] path %q %v; a menu of a plugin without a base links to a path of the workers' site written from its root, such as /docs/", i, menu.Path, err)
		case err != nil:
			return nil, invalid("menus[%d] path %q %v; a menu links to a path under the plugin's base: %s, %s/… or a path relative to it such as docs/", i, menu.Path, err, base, base)
		}
		menu.Path = p
		out[i] = menu
	}
	return out, nil
}

// menuPath checks a menu path (the cpanel puts it in every admin's navigation, after the
// workers' origin and mount path) and returns it written from the site's root: for a plugin
// with a base, /<base>, /<base>/…, or a path relative to the base (docs/ is /<base>/docs/); for
// one without, any path from the site's root (/, /docs/), since there is no base to keep to or
// resolve against; with a query and fragment if any. Whatever a browser could read as another
// scheme or host is refused: a scheme, "//", a backslash (read as "/"), blanks and control
// characters (dropped or trimmed), and "." or ".." segments, percent-encoded ones included
// (browsers resolve %2e%2e), which could climb out of the base. A path not starting with "/"
// is never written out as it is, as the panel's origin and it would run together.
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
	switch {
	case !absolute && base == "":
		return "", errors.New("is relative, and the plugin has no base it could be relative to")
	case absolute && base != "":
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
