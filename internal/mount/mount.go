// Package mount carries the path a runtime is mounted at: the part of the request path that a
// handler in front of it stripped (Caddy's handle_path, uri strip_prefix), so that the URLs the
// runtime builds (discovery, redirects, <base href>, X-Forwarded-Prefix) keep it, and names the
// path segments the runtime keeps below it.
package mount

import (
	"context"
	"strings"
)

// The first path segments the runtime keeps below its mount path, whatever its API path; the
// API path cannot start with CPanelSegment or WellKnownSegment, and no worker or plugin takes
// any of them (packages.ReservedNames).
const (
	// APISegment starts the default API path: clients that assume it send their credentials
	// there.
	APISegment = "api"
	// CPanelSegment is the cpanel's.
	CPanelSegment = "cpanel"
	// WellKnownSegment holds the discovery document.
	WellKnownSegment = ".well-known"
)

type key struct{}

// With returns ctx carrying the mount path p ("/hp"); "" is the root.
func With(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, key{}, p)
}

// Path returns the mount path ctx carries, "" at the root.
func Path(ctx context.Context) string {
	p, _ := ctx.Value(key{}).(string)
	return p
}

// Stripped returns the mount path of a request: what was removed from the front of original,
// the path the client sent, to leave current, the path the runtime sees (both escaped). It is
// "" when nothing was stripped or when current is not a tail of original (a rewrite that
// replaced the path, not one that stripped a prefix). Leading slashes collapse to one, so the
// result never reads as a protocol-relative URL in a Location header.
func Stripped(original, current string) string {
	if original == current || !strings.HasPrefix(current, "/") || !strings.HasSuffix(original, current) {
		return ""
	}
	p := strings.Trim(original[:len(original)-len(current)], "/")
	if p == "" {
		return ""
	}
	return "/" + p
}
