package caddymodule

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/caddy-runtime/runtime/internal/cpanel"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/mount"
)

// rootIndex is the answer to / for a client other than a browser: where the cpanel and the
// API are, as paths on this host, and the workers' base URL (a worker is at <workers>/<name>/;
// absent when they are served elsewhere and workers_url does not say where).
type rootIndex struct {
	CPanel  string `json:"cpanel,omitempty"`
	API     string `json:"api,omitempty"`
	Docs    string `json:"docs,omitempty"`
	Workers string `json:"workers,omitempty"`
}

// servesRoot reports whether / of this site block is the runtime's to answer: GET or HEAD on
// a block that serves the API or the cpanel (a block of workers alone leaves / to them).
func (h *Handler) servesRoot(r *http.Request) bool {
	return r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(h.settings.Serve.API || h.settings.Serve.CPanel)
}

// serveRoot answers / where no worker or plugin does: a browser is sent to the cpanel; any
// other client (curl, a script) is told where the cpanel and the API are, in JSON when it asks
// for JSON, else in a few lines of text. The root is nobody's, so a first request to it
// should not look like a broken install.
func (h *Handler) serveRoot(w http.ResponseWriter, r *http.Request) {
	w.Header().Add("Vary", "Accept")
	base := mount.Path(r.Context())
	var idx rootIndex
	if h.settings.Serve.CPanel {
		idx.CPanel = base + cpanel.Path + "/"
	}
	if h.settings.Serve.API {
		idx.API = base + h.api.Prefix()
		idx.Docs = idx.API + "/docs"
	}
	switch {
	case h.settings.Serve.Workers:
		idx.Workers = origin(r) + base
	default:
		idx.Workers = strings.TrimRight(h.settings.WorkersURL, "/")
	}
	switch {
	case browser(r) && idx.CPanel != "":
		http.Redirect(w, r, idx.CPanel, http.StatusFound)
	case accepts(r, "application/json"):
		envelope.WriteJSON(w, http.StatusOK, idx)
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprint(w, idx.text(origin(r)))
	}
}

// text is the index for a person at a terminal, with absolute URLs on origin.
func (idx rootIndex) text(origin string) string {
	var b strings.Builder
	b.WriteString("This is a runtime (Caddy with the runtime module).\n")
	if idx.CPanel != "" {
		fmt.Fprintf(&b, "  cpanel:  %s%s (open it in a browser)\n", origin, idx.CPanel)
	}
	if idx.API != "" {
		fmt.Fprintf(&b, "  API:     %s%s (reference: %s%s)\n", origin, idx.API, origin, idx.Docs)
	}
	if idx.Workers != "" {
		fmt.Fprintf(&b, "  workers: %s/<name>/\n", idx.Workers)
	}
	return b.String()
}

// origin is the scheme and host the request was sent to.
func origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// accepts reports whether r's Accept header names mediaType.
func accepts(r *http.Request, mediaType string) bool {
	for _, accept := range r.Header.Values("Accept") {
		if strings.Contains(accept, mediaType) {
			return true
		}
	}
	return false
}
