package cpanel

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/mount"
)

func TestOwns(t *testing.T) {
	for path, want := range map[string]bool{
		"/cpanel": true, "/cpanel/": true, "/cpanel/keys": true, "/cpanelx": false, "/app/cpanel/": false, "/": false,
	} {
		if got := Owns(path); got != want {
			t.Errorf("Owns(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestServe(t *testing.T) {
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path, mount string
		status      int
		has         string
	}{
		{"/cpanel/", "", 200, `<base href="/cpanel/" />`},
		{"/cpanel/keys", "/hp", 200, `<base href="/hp/cpanel/" />`},
		{"/cpanel/assets/../index.html", "", 404, "NOT_FOUND"},
		{"/cpanel/assets/", "", 404, "NOT_FOUND"},
		{"/cpanel/assets/nope.js", "", 404, "NOT_FOUND"},
	} {
		req := httptest.NewRequest("GET", "http://x"+tt.path, nil)
		if tt.mount != "" {
			req = req.WithContext(mount.With(req.Context(), tt.mount))
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.has) || rec.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s (at %q) = %d %q", tt.path, tt.mount, rec.Code, rec.Body.String())
		}
	}
}

// TestBundleSize keeps the panel's bundle under 250 KB gzipped, the most a first visit on a
// slow link should wait for (the API reference's Swagger UI is a separate bundle).
func TestBundleSize(t *testing.T) {
	const limit = 250_000
	var total int
	err := fs.WalkDir(dist, "dist", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(dist, name)
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
