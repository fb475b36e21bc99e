package cpanel

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/internal/mount"
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
