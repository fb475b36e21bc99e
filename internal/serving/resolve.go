package serving

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/Masterminds/semver/v3"

	"github.com/caddy-runtime/runtime/internal/workers"
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
// version Unpinned chooses from the worker's traffic split (split picks; nil: no split) and its
// activation on this instance (act; nil knows none), or pinned with
// /<name>@<version or semver range>/…, which no split changes.
func Resolve(c *packages.Catalog, act *workers.Activations, urlPath string, split func(packages.Unit) (packages.Version, bool)) (Target, string, error) {
	name, pin, base, rest, ok := splitPath(urlPath)
	if !ok {
		return Target{}, name, ErrNotWorkerPath
	}
	return resolveName(c, act, name, pin, base, rest, split)
}

// ResolveHost maps a request on worker name's own host (see package hosts) to a worker version:
// the whole path is the worker's, and the version is chosen as for an unpinned path, the
// traffic split (split; nil: none) included.
func ResolveHost(c *packages.Catalog, act *workers.Activations, name, urlPath string, split func(packages.Unit) (packages.Version, bool)) (Target, string, error) {
	if urlPath == "" {
		urlPath = "/"
	}
	return resolveName(c, act, name, "", "", urlPath, split)
}

// resolveName is the one choice of a version for a request, by path or by host.
func resolveName(c *packages.Catalog, act *workers.Activations, name, pin, base, rest string, split func(packages.Unit) (packages.Version, bool)) (Target, string, error) {
	u, ok := c.Find(name)
	if !ok {
		return Target{}, name, ErrNoSuchWorker
	}
	var v packages.Version
	var err error
	if pin == "" {
		v, err = Unpinned(u, act.Get(name), split)
	} else {
		v, err = choose(u, pin)
	}
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

// Unpinned chooses the version an unpinned request gets, in order: the traffic split's pick
// (split; nil: no split), unless that version is disabled or held on this instance (its check
// runs or failed, so it was not activated here: it gets no share); then the worker's active
// version on this instance (workers.ActiveVersion).
func Unpinned(u packages.Unit, a workers.Activation, split func(packages.Unit) (packages.Version, bool)) (packages.Version, error) {
	if split != nil {
		if v, ok := split(u); ok && v.Enabled && !a.Held(v.Version) {
			return v, nil
		}
	}
	v, ok := workers.ActiveVersion(u, a)
	if !ok {
		return packages.Version{}, ErrNoEnabledVersion
	}
	return v, nil
}

// choose picks the version a pinned request gets: the enabled version the pin names exactly,
// else the highest enabled one its semver range admits.
func choose(u packages.Unit, pin string) (packages.Version, error) {
	enabled := false
	for i := len(u.Versions) - 1; i >= 0; i-- {
		if v := u.Versions[i]; v.Enabled {
			if v.Version == pin {
				return v, nil
			}
			enabled = true
		}
	}
	if !enabled {
		return packages.Version{}, ErrNoEnabledVersion
	}
	constraint := constraintOf(pin)
	if constraint == nil {
		return packages.Version{}, ErrNoMatchingPin
	}
	for i := len(u.Versions) - 1; i >= 0; i-- {
		v := u.Versions[i]
		if sv, err := semver.StrictNewVersion(v.Version); v.Enabled && err == nil && constraint.Check(sv) {
			return v, nil
		}
	}
	return packages.Version{}, ErrNoMatchingPin
}

// constraints holds the pins parsed so far (nil for one that is not a range), so a pinned
// request parses nothing after the first. Pins come from URLs: past maxConstraints a new one is
// parsed and not kept.
var constraints struct {
	m sync.Map // pin → *semver.Constraints
	n atomic.Int64
}

const maxConstraints = 1024

// constraintOf returns pin parsed as a semver range, nil when it is not one.
func constraintOf(pin string) *semver.Constraints {
	if c, ok := constraints.m.Load(pin); ok {
		return c.(*semver.Constraints)
	}
	c, err := semver.NewConstraint(pin)
	if err != nil {
		c = nil
	}
	if constraints.n.Load() < maxConstraints {
		if _, loaded := constraints.m.LoadOrStore(pin, c); !loaded {
			constraints.n.Add(1)
		}
	}
	return c
}
