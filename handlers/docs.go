package handlers

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"time"

	"github.com/caddy-runtime/runtime/openapi"
)

//go:embed docsui
var docsFiles embed.FS

// docsCSP allows the docs page to load only its own assets and call only its own origin, so
// it works with no internet and cannot leak a typed key elsewhere.
const docsCSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"

// docsUI is the interactive reference: its page, rendered once for the API path, and its assets.
type docsUI struct {
	page   asset
	assets map[string]asset
}

// asset is an in-memory file with its content type and ETag.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

func newAsset(body []byte, contentType string) asset {
	sum := sha256.Sum256(body)
	return asset{body: body, contentType: contentType, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

// serve answers with the asset, honouring If-None-Match so clients revalidate cheaply.
func (f asset) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", f.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}

func newDocsUI(prefix string) (docsUI, error) {
	tmpl, err := template.ParseFS(docsFiles, "docsui/index.html")
	if err != nil {
		return docsUI{}, fmt.Errorf("docs page: %v", err)
	}
	var page bytes.Buffer
	if err := tmpl.Execute(&page, struct{ Assets, Spec string }{prefix + "/docs", prefix + "/openapi.json"}); err != nil {
		return docsUI{}, fmt.Errorf("docs page: %v", err)
	}
	ui := docsUI{page: newAsset(page.Bytes(), "text/html; charset=utf-8"), assets: map[string]asset{}}
	entries, err := fs.ReadDir(docsFiles, "docsui")
	if err != nil {
		return docsUI{}, err
	}
	for _, e := range entries {
		ext := path.Ext(e.Name())
		if e.IsDir() || ext == ".html" {
			continue
		}
		body, err := fs.ReadFile(docsFiles, "docsui/"+e.Name())
		if err != nil {
			return docsUI{}, err
		}
		ui.assets[e.Name()] = newAsset(body, mime.TypeByExtension(ext))
	}
	return ui, nil
}

func (a *API) docsRoutes() []route {
	text := func(types ...string) map[string]*openapi.Schema {
		m := map[string]*openapi.Schema{}
		for _, t := range types {
			m[t] = &openapi.Schema{Type: "string"}
		}
		return m
	}
	return []route{
		{
			method: "GET", path: "/openapi.json", id: "openapi", tag: "documentation", public: true,
			summary: "This OpenAPI 3.1 document",
			responses: []response{
				{status: http.StatusOK, description: "The OpenAPI document", content: map[string]*openapi.Schema{"application/json": {Type: "object"}}},
				{status: http.StatusNotModified, description: "Unchanged since the ETag sent in If-None-Match"},
			},
			handle: func(w http.ResponseWriter, r *http.Request) error {
				a.doc.serve(w, r)
				return nil
			},
		},
		{
			method: "GET", path: "/docs", id: "docs", tag: "documentation", public: true,
			summary:     "Interactive API reference",
			description: "Served from assets embedded in the binary; it needs no internet access.",
			responses: []response{
				{status: http.StatusOK, description: "The reference page", content: text("text/html")},
				{status: http.StatusNotModified, description: "Unchanged since the ETag sent in If-None-Match"},
			},
			handle: func(w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("Content-Security-Policy", docsCSP)
				w.Header().Set("Referrer-Policy", "no-referrer")
				a.docs.page.serve(w, r)
				return nil
			},
		},
		{
			method: "GET", path: "/docs/{asset}", id: "docsAsset", tag: "documentation", public: true,
			summary: "An asset of the interactive reference",
			responses: []response{
				{status: http.StatusOK, description: "The asset", content: text("text/javascript", "text/css")},
				{status: http.StatusNotModified, description: "Unchanged since the ETag sent in If-None-Match"},
				errorResponse(http.StatusNotFound, "No such asset"),
			},
			handle: a.serveDocsAsset,
		},
	}
}

func (a *API) serveDocsAsset(w http.ResponseWriter, r *http.Request) error {
	f, ok := a.docs.assets[r.PathValue("asset")]
	if !ok {
		return Errorf(http.StatusNotFound, CodeNotFound, "no docs asset named %q", r.PathValue("asset"))
	}
	f.serve(w, r)
	return nil
}
