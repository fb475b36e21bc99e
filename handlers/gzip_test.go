package handlers

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestGzipAnswers checks that a large answer (the OpenAPI document) goes out in gzip to a
// client that accepts it, with its own ETag, and as it is to one that does not.
func TestGzipAnswers(t *testing.T) {
	a, v := testAPI(t, Options{Prefix: "/_/api"})
	plain := serve(t, a, v, httptest.NewRequest("GET", "/_/api/openapi.json", nil))
	raw := bodyOf(t, plain)
	if plain.Header.Get("Content-Encoding") != "" || !strings.Contains(plain.Header.Get("Vary"), "Accept-Encoding") {
		t.Fatalf("without Accept-Encoding: Content-Encoding %q, Vary %q", plain.Header.Get("Content-Encoding"), plain.Header.Get("Vary"))
	}
	req := httptest.NewRequest("GET", "/_/api/openapi.json", nil)
	req.Header.Set("Accept-Encoding", "br, gzip")
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Encoding") != "gzip" || rec.Body.Len() >= len(raw) {
		t.Fatalf("with gzip accepted: %d, Content-Encoding %q, %d bytes for %d", rec.Code, rec.Header().Get("Content-Encoding"), rec.Body.Len(), len(raw))
	}
	zr, err := gzip.NewReader(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	if unzipped, err := io.ReadAll(zr); err != nil || string(unzipped) != raw {
		t.Errorf("the gzip answer does not unpack to the plain one (%v)", err)
	}
	etag := rec.Header().Get("ETag")
	if etag == "" || etag == plain.Header.Get("ETag") {
		t.Errorf("the gzip form's ETag %q should differ from the plain one's %q", etag, plain.Header.Get("ETag"))
	}
	req = httptest.NewRequest("GET", "/_/api/openapi.json", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("If-None-Match", etag)
	rec = httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("revalidating the gzip form = %d, want 304", rec.Code)
	}
}
