package handlers

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"sync"
	"time"

	"github.com/caddy-runtime/runtime/envelope"
	"github.com/caddy-runtime/runtime/mount"
	"github.com/caddy-runtime/runtime/openapi"
)

// docsFiles are the reference page's template and, in docsui/dist, Swagger UI built by make ui
// (cpanel/ui/vite.docs.config.js) into one script and one stylesheet.
//
//go:embed docsui/index.html docsui/dist
var docsFiles embed.FS

// docsCSP allows the docs page to load only its own assets and call only its own origin, so
// it works with no internet and cannot leak a typed key elsewhere.
const docsCSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"

// docsUI is the interactive reference: its page, rendered once for the API path, and its assets.
type docsUI struct {
	page asset
	// assets are read on first use: Swagger UI is over a megabyte, which a runtime whose docs
	// nobody opens should not hold in memory.
	assets map[string]func() asset
}

// asset is an in-memory file with its content type and ETag.
type asset struct {
	body        *compressible
	contentType string
	etag        string
}

func newAsset(body []byte, contentType string) asset {
	sum := sha256.Sum256(body)
	return asset{body: newCompressible(body), contentType: contentType, etag: hex.EncodeToString(sum[:12])}
}

// serve answers with the asset, in gzip when r accepts it, honouring If-None-Match so
// clients revalidate cheaply; each form has its own ETag.
func (f asset) serve(w http.ResponseWriter, r *http.Request) {
	body, gzipped := f.body.pick(r)
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("Cache-Control", "no-cache")
	setEncoding(h, gzipped)
	if gzipped {
		h.Set("ETag", `"`+f.etag+`-gz"`)
	} else {
		h.Set("ETag", `"`+f.etag+`"`)
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

var docsPageTemplate = template.Must(template.ParseFS(docsFiles, "docsui/index.html"))

// docsPage renders the reference page for the API at apiPath.
func docsPage(apiPath string) (asset, error) {
	var page bytes.Buffer
	if err := docsPageTemplate.Execute(&page, struct{ Assets, Spec string }{apiPath + "/docs", apiPath + "/openapi.json"}); err != nil {
		return asset{}, fmt.Errorf("docs page: %v", err)
	}
	return newAsset(page.Bytes(), "text/html; charset=utf-8"), nil
}

func newDocsUI(prefix string) (docsUI, error) {
	page, err := docsPage(prefix)
	if err != nil {
		return docsUI{}, err
	}
	ui := docsUI{page: page, assets: map[string]func() asset{}}
	entries, err := fs.ReadDir(docsFiles, "docsui/dist")
	if err != nil {
		return docsUI{}, err
	}
	for _, e := range entries {
		ext := path.Ext(e.Name())
		if e.IsDir() {
			continue
		}
		name := "docsui/dist/" + e.Name()
		ui.assets[e.Name()] = sync.OnceValue(func() asset {
			body, _ := fs.ReadFile(docsFiles, name) // listed above: it is there
			return newAsset(body, mime.TypeByExtension(ext))
		})
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
				docs, err := a.docsAt(mount.Path(r.Context()))
				if err != nil {
					return err
				}
				docs.doc.serve(w, r)
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
				docs, err := a.docsAt(mount.Path(r.Context()))
				if err != nil {
					return err
				}
				w.Header().Set("Content-Security-Policy", docsCSP)
				w.Header().Set("Referrer-Policy", "no-referrer")
				docs.page.serve(w, r)
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

// mountedDocs are the OpenAPI document and the docs page of the API for one mount path; both
// name the path, the document as its server URL.
type mountedDocs struct {
	at        string
	doc, page asset
}

// docsAt returns the OpenAPI document and the docs page for a runtime mounted at at. Those
// of the root are built once; a runtime is mounted at one path in practice, so the last
// other one is kept.
func (a *API) docsAt(at string) (*mountedDocs, error) {
	if at == "" {
		return &mountedDocs{doc: a.doc, page: a.docs.page}, nil
	}
	if m := a.mounted.Load(); m != nil && m.at == at {
		return m, nil
	}
	spec := a.spec
	spec.Servers = []openapi.Server{{URL: at, Description: "the runtime's mount path; API paths are below it"}}
	doc, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encoding the OpenAPI document: %v", err)
	}
	page, err := docsPage(at + a.opts.Prefix)
	if err != nil {
		return nil, err
	}
	m := &mountedDocs{at: at, doc: newAsset(doc, "application/json"), page: page}
	a.mounted.Store(m)
	return m, nil
}

func (a *API) serveDocsAsset(w http.ResponseWriter, r *http.Request) error {
	f, ok := a.docs.assets[r.PathValue("asset")]
	if !ok {
		return envelope.Errorf(http.StatusNotFound, envelope.CodeNotFound, "no docs asset named %q", r.PathValue("asset"))
	}
	f().serve(w, r)
	return nil
}
