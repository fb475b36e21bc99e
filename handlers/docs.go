package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/mount"
	"github.com/caddy-runtime/runtime/internal/openapi"
	"github.com/caddy-runtime/runtime/internal/ui"
)

// docsCSP allows the docs page to load only its own assets and call only its own origin, so
// it works with no internet and cannot leak a typed key elsewhere.
const docsCSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"

// docsAPI serves the OpenAPI document and the API reference: its page, at the API path and at
// each mount path the runtime is reached under, and the page's assets.
type docsAPI struct {
	*pipeline
	spec    openapi.Document // generated from the route table once it is built
	doc     *ui.File         // the OpenAPI document, encoded once
	page    *ui.File         // the docs page for the API path at the root
	assets  *ui.Assets
	mounted atomic.Pointer[mountedDocs] // the last mount path's document and page
}

func (a *docsAPI) docsRoutes() []route {
	text := func(types ...string) map[string]*openapi.Schema {
		m := map[string]*openapi.Schema{}
		for _, t := range types {
			m[t] = &openapi.Schema{Type: "string"}
		}
		return m
	}
	return []route{
		{
			method: "GET", path: "/openapi.json", id: "openapi", tag: "documentation", public: true, file: true,
			summary:     "This OpenAPI 3.1 document",
			description: "Generated from the route table that serves the API, so it cannot drift from it. Its server is the path the runtime is mounted at, `/` at the root.",
			responses: []response{
				{status: http.StatusOK, description: "The OpenAPI document", content: map[string]*openapi.Schema{"application/json": {Type: "object"}}},
			},
			handle: func(w http.ResponseWriter, r *http.Request) error {
				docs, err := a.docsAt(mount.Path(r.Context()))
				if err != nil {
					return err
				}
				docs.doc.Serve(w, r)
				return nil
			},
		},
		{
			method: "GET", path: "/docs", id: "docs", tag: "documentation", public: true, file: true,
			summary:     "Interactive API reference",
			description: "Served from assets embedded in the binary; it needs no internet access.",
			responses: []response{
				{status: http.StatusOK, description: "The reference page", content: text("text/html")},
			},
			handle: func(w http.ResponseWriter, r *http.Request) error {
				docs, err := a.docsAt(mount.Path(r.Context()))
				if err != nil {
					return err
				}
				w.Header().Set("Content-Security-Policy", docsCSP)
				w.Header().Set("Referrer-Policy", "no-referrer")
				docs.page.Serve(w, r)
				return nil
			},
		},
		{
			method: "GET", path: "/docs/{asset}", id: "docsAsset", tag: "documentation", public: true, file: true,
			summary:     "An asset of the interactive reference",
			description: "Its name carries a hash of its content: it may be kept for a year.",
			responses: []response{
				{status: http.StatusOK, description: "The asset", content: text("text/javascript", "text/css")},
				errorResponse(http.StatusNotFound, "No such asset"),
			},
			handle: a.serveDocsAsset,
		},
	}
}

// mountedDocs are the OpenAPI document and the docs page of the API for one mount path; both
// name the path, the document as its server URL.
type mountedDocs struct {
	at        string
	doc, page *ui.File
}

// docsAt returns the OpenAPI document and the docs page for a runtime mounted at at. Those
// of the root are built once; a runtime is mounted at one path in practice, so the last
// other one is kept.
func (a *docsAPI) docsAt(at string) (*mountedDocs, error) {
	if at == "" {
		return &mountedDocs{doc: a.doc, page: a.page}, nil
	}
	if m := a.mounted.Load(); m != nil && m.at == at {
		return m, nil
	}
	spec := a.spec
	spec.Servers = servers(at)
	doc, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encoding the OpenAPI document: %w", err)
	}
	page, err := ui.DocsPage(at+a.prefix, a.assets)
	if err != nil {
		return nil, err
	}
	m := &mountedDocs{at: at, doc: ui.NewFile(doc, "application/json"), page: page}
	a.mounted.Store(m)
	return m, nil
}

func (a *docsAPI) serveDocsAsset(w http.ResponseWriter, r *http.Request) error {
	if !a.assets.Serve(w, r, r.PathValue("asset")) {
		return envelope.Errorf(http.StatusNotFound, envelope.CodeNotFound, "no docs asset named %q", r.PathValue("asset"))
	}
	return nil
}
