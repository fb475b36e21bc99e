// Package cpanel is the runtime's web control panel, served at /cpanel/. It has no pages
// yet: its path is kept from workers and plugins, and answers that it is not installed.
package cpanel

import (
	"net/http"
	"strings"

	"github.com/caddy-runtime/runtime/envelope"
	"github.com/caddy-runtime/runtime/mount"
	"github.com/caddy-runtime/runtime/packages"
)

// Path is where the cpanel is served, below the runtime's mount path.
const Path = "/" + packages.CPanelSegment

// Owns reports whether urlPath is the cpanel's.
func Owns(urlPath string) bool {
	return urlPath == Path || strings.HasPrefix(urlPath, Path+"/")
}

// Handler serves the cpanel.
type Handler struct{}

// ServeHTTP serves a request for the cpanel.
func (Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	envelope.Write(w, envelope.Errorf(http.StatusNotFound, envelope.CodeNotFound, "no cpanel is installed at %s%s/", mount.Path(r.Context()), Path))
}
