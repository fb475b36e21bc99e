// Package cpanel serves the runtime's web control panel at /cpanel/: a single-page app whose
// bundle package ui embeds. Every path below /cpanel/ answers the app (it routes in the
// browser) without a credential; the app signs in through the API's session endpoints.
package cpanel

import (
	"bytes"
	"errors"
	"html"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/mount"
	"github.com/caddy-runtime/runtime/internal/ui"
)

// Path is where the cpanel is served, below the runtime's mount path.
const Path = "/" + mount.CPanelSegment

// securityHeaders are set on every answer of the panel: nothing but the runtime's own origin
// may run, style, frame or receive anything.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; font-src 'self'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'; object-src 'none'",
	"X-Content-Type-Options": "nosniff",
	"X-Frame-Options":        "DENY",
	"Referrer-Policy":        "no-referrer",
}

// Owns reports whether urlPath is the cpanel's.
func Owns(urlPath string) bool {
	return urlPath == Path || strings.HasPrefix(urlPath, Path+"/")
}

// Handler serves the cpanel.
type Handler struct {
	index  []byte // index.html, with the <base href> to fill in
	assets *ui.Assets
}

// baseTag is the <base href> of the built index.html, which names where the panel is mounted.
const baseTag = `<base href="/cpanel/" />`

// New returns the cpanel's handler over the embedded bundle.
func New() (*Handler, error) {
	index, assets, err := ui.CPanel()
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(index, []byte(baseTag)) {
		return nil, errNoBase
	}
	return &Handler{index: index, assets: assets}, nil
}

var errNoBase = errors.New("cpanel: the built index.html has no " + baseTag + "; rebuild it with make ui")

// ServeHTTP serves a request for the cpanel: an asset, or the app for any other path.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	for k, v := range securityHeaders {
		hdr.Set(k, v)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		envelope.Write(w, envelope.Errorf(http.StatusMethodNotAllowed, envelope.CodeMethodNotAllowed, "the cpanel answers GET and HEAD only"))
		return
	}
	at := mount.Path(r.Context())
	if r.URL.Path == Path {
		http.Redirect(w, r, at+Path+"/", http.StatusPermanentRedirect)
		return
	}
	if name, ok := strings.CutPrefix(r.URL.Path, Path+"/assets/"); ok {
		if !h.assets.Serve(w, r, name) {
			envelope.Write(w, envelope.Errorf(http.StatusNotFound, envelope.CodeNotFound, "no cpanel asset at %s", r.URL.Path))
		}
		return
	}
	// The app routes in the browser: every other path is the app, told where it is mounted.
	base := `<base href="` + html.EscapeString(at+Path+"/") + `" />`
	body := bytes.Replace(h.index, []byte(baseTag), []byte(base), 1)
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(body))
}
