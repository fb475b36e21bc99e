package serving

import (
	"errors"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/caddy-runtime/runtime/packages"
)

// Target is the worker version a request path resolves to.
type Target struct {
	Unit    packages.Unit
	Version packages.Version
	// Base is the URL path the worker is served under for this request, as requested: "/app",
	// "/@team/app" or, pinned, "/app@1.2.0".
	Base string
	// Rest is the request path after Base: "" for exactly Base, else starting with "/".
	Rest string
}

// Resolution errors; the API answers each with 404.
var (
	ErrNotWorkerPath    = errors.New("not a worker path")
	ErrNoSuchWorker     = errors.New("no such worker")
	ErrNoEnabledVersion = errors.New("no enabled version")
	ErrNoMatchingPin    = errors.New("no enabled version matches the pin")
)

// Resolve maps a URL path to a worker version: /<name>/… or /@scope/<name>/…, served by the
// highest enabled version ("latest" counts as the newest; a disabled version counts as not
// installed), or pinned with /<name>@<version or semver range>/….
func Resolve(c *packages.Catalog, urlPath string) (Target, string, error) {
	name, pin, base, rest, ok := splitPath(urlPath)
	if !ok {
		return Target{}, name, ErrNotWorkerPath
	}
	u, ok := c.Find(name)
	if !ok {
		return Target{}, name, ErrNoSuchWorker
	}
	v, err := choose(u, pin)
	if err != nil {
		return Target{}, name, err
	}
	return Target{Unit: u, Version: v, Base: base, Rest: rest}, name, nil
}

// splitPath reads a worker name, an optional @pin, the base and the rest from a path: the base
// is the first segment, or the first two for a scoped name, and a pin follows the name's last
// segment.
func splitPath(p string) (name, pin, base, rest string, ok bool) {
	if !strings.HasPrefix(p, "/") {
		return "", "", "", "", false
	}
	segs := strings.SplitN(p[1:], "/", 3)
	n := 1
	if strings.HasPrefix(segs[0], "@") {
		n = 2
	}
	if len(segs) < n || segs[n-1] == "" {
		return "", "", "", "", false
	}
	base = "/" + strings.Join(segs[:n], "/")
	rest = p[len(base):]
	last := segs[n-1]
	if i := strings.Index(last, "@"); i >= 0 {
		last, pin = last[:i], last[i+1:]
		if pin == "" {
			return "", "", "", "", false
		}
	}
	name = strings.Join(append(segs[:n-1:n-1], last), "/")
	return name, pin, base, rest, packages.ValidateName(name) == nil
}

// choose picks the version a request gets.
func choose(u packages.Unit, pin string) (packages.Version, error) {
	enabled := slices.DeleteFunc(slices.Clone(u.Versions), func(v packages.Version) bool { return !v.Enabled })
	if len(enabled) == 0 {
		return packages.Version{}, ErrNoEnabledVersion
	}
	if pin == "" {
		return enabled[len(enabled)-1], nil
	}
	for _, v := range enabled {
		if v.Version == pin {
			return v, nil
		}
	}
	constraint, err := semver.NewConstraint(pin)
	if err != nil {
		return packages.Version{}, ErrNoMatchingPin
	}
	for i := len(enabled) - 1; i >= 0; i-- {
		if sv, err := semver.StrictNewVersion(enabled[i].Version); err == nil && constraint.Check(sv) {
			return enabled[i], nil
		}
	}
	return packages.Version{}, ErrNoMatchingPin
}
