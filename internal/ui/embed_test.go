package ui

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"
)

// TestBundleSize keeps the panel's bundle under 250 KB gzipped, the most a first visit on a
// slow link should wait for (the API reference's Swagger UI is a separate bundle).
func TestBundleSize(t *testing.T) {
	const limit = 250_000
	var total int
	err := fs.WalkDir(files, "dist/cpanel", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(files, name)
		if err != nil {
			return err
		}
		var zipped bytes.Buffer
		w, _ := gzip.NewWriterLevel(&zipped, gzip.BestCompression)
		_, _ = w.Write(data)
		_ = w.Close()
		total += zipped.Len()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total == 0 || total > limit {
		t.Errorf("the bundle is %d bytes gzipped, want 1 to %d", total, limit)
	}
	t.Logf("the bundle is %d bytes gzipped", total)
}

// assetType is the content type each kind of asset is served with.
var assetType = map[string]string{".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}

// TestAssets serves every asset of both pages as a client would ask for it: kept for a year,
// in gzip when the client takes it, revalidated by ETag; a name that is not an asset's is
// left to the caller.
func TestAssets(t *testing.T) {
	_, cpanel, err := CPanel()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := DocsAssets()
	if err != nil {
		t.Fatal(err)
	}
	for page, assets := range map[string]*Assets{"cpanel": cpanel, "docs": docs} {
		if len(assets.names) < 2 {
			t.Errorf("the %s has assets %v, want a script and a stylesheet", page, assets.names)
		}
		for _, name := range assets.names {
			plain := get(t, assets, name, "")
			zipped := get(t, assets, name, "gzip")
			if plain.Code != 200 || zipped.Code != 200 {
				t.Fatalf("%s %s = %d, %d in gzip", page, name, plain.Code, zipped.Code)
			}
			for _, rec := range []*httptest.ResponseRecorder{plain, zipped} {
				h := rec.Header()
				if h.Get("Cache-Control") != "public, max-age=31536000, immutable" || !strings.Contains(h.Get("Vary"), "Accept-Encoding") ||
					!strings.HasPrefix(h.Get("Content-Type"), assetType[path.Ext(name)]) {
					t.Errorf("%s %s: headers %v", page, name, h)
				}
			}
			if plain.Body.Len() < 1400 { // below a packet gzip saves nothing: sent as it is
				if zipped.Header().Get("Content-Encoding") != "" || !bytes.Equal(zipped.Body.Bytes(), plain.Body.Bytes()) {
					t.Errorf("%s %s (%d bytes) is sent in gzip", page, name, plain.Body.Len())
				}
			} else if zipped.Header().Get("Content-Encoding") != "gzip" || zipped.Header().Get("ETag") == plain.Header().Get("ETag") {
				t.Errorf("%s %s in gzip: Content-Encoding %q, ETag %q beside %q", page, name,
					zipped.Header().Get("Content-Encoding"), zipped.Header().Get("ETag"), plain.Header().Get("ETag"))
			}
			if zipped.Header().Get("Content-Encoding") == "gzip" {
				zr, err := gzip.NewReader(zipped.Body)
				if err != nil {
					t.Fatal(err)
				}
				if unzipped, err := io.ReadAll(zr); err != nil || !bytes.Equal(unzipped, plain.Body.Bytes()) {
					t.Errorf("%s %s: the gzip form does not unpack to the plain one (%v)", page, name, err)
				}
			}
			req := httptest.NewRequest("GET", "/"+name, nil)
			req.Header.Set("If-None-Match", plain.Header().Get("ETag"))
			rec := httptest.NewRecorder()
			assets.Serve(rec, req, name)
			if rec.Code != http.StatusNotModified {
				t.Errorf("%s %s revalidated = %d, want 304", page, name, rec.Code)
			}
		}
		for _, name := range []string{"", "index.html", "../index.html", "assets", "nope.js"} {
			rec := httptest.NewRecorder()
			if assets.Serve(rec, httptest.NewRequest("GET", "/x", nil), name) || rec.Body.Len() > 0 || len(rec.Header()) > 0 {
				t.Errorf("%s asset %q was served: %d %v", page, name, rec.Code, rec.Header())
			}
		}
	}
}

func get(t *testing.T, a *Assets, name, encoding string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("GET", "/"+name, nil)
	if encoding != "" {
		req.Header.Set("Accept-Encoding", encoding)
	}
	rec := httptest.NewRecorder()
	if !a.Serve(rec, req, name) {
		t.Fatalf("%s is not served", name)
	}
	return rec
}

// TestDocsPage renders the reference's page for an API path: it names its hashed assets and
// the document under that path, and is revalidated on each use.
func TestDocsPage(t *testing.T) {
	assets, err := DocsAssets()
	if err != nil {
		t.Fatal(err)
	}
	f, err := DocsPage("/hp/_/api", assets)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	f.Serve(rec, httptest.NewRequest("GET", "/hp/_/api/docs", nil))
	page := rec.Body.String()
	if rec.Code != 200 || rec.Header().Get("Cache-Control") != "no-cache" || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("the page = %d %v", rec.Code, rec.Header())
	}
	for _, want := range append([]string{`data-spec="/hp/_/api/openapi.json"`, "<!doctype html>"}, assets.names...) {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s:\n%s", want, page)
		}
	}
	for _, name := range assets.names {
		if !strings.Contains(page, `"/hp/_/api/docs/`+name+`"`) {
			t.Errorf("the page does not load %s from /hp/_/api/docs/:\n%s", name, page)
		}
	}
	if strings.Contains(page, "<!--") {
		t.Errorf("the page keeps its template's comment:\n%s", page)
	}
}
