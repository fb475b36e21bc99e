package handlers

import (
	"crypto/tls"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/caddy-runtime/runtime/internal/mount"
)

func TestCookiePaths(t *testing.T) {
	for p, want := range map[string][]string{
		"/":                  {"/"},
		"/api":               {"/", "/api"},
		"/api/":              {"/", "/api", "/api/"},
		"/api/admin/session": {"/", "/api", "/api/", "/api/admin", "/api/admin/", "/api/admin/session"},
	} {
		if got := cookiePaths(p); !slices.Equal(got, want) {
			t.Errorf("cookiePaths(%q) = %q, want %q", p, got, want)
		}
	}
}

// TestSetSessionCookies checks the Set-Cookie lines of a sign-in and a sign-out: the spec's
// runtime_api_key line first, its __Host- twin over HTTPS only, and, when the request carries a
// runtime_api_key cookie the runtime may not have set, a clear for every domain and path such
// a cookie can have on the request's way.
func TestSetSessionCookies(t *testing.T) {
	const (
		set      = "runtime_api_key=tok; Max-Age=60; Path=/; HttpOnly; SameSite=Strict"
		setTLS   = "runtime_api_key=tok; Max-Age=60; Path=/; HttpOnly; Secure; SameSite=Strict"
		hostSet  = "__Host-runtime_api_key=tok; Max-Age=60; Path=/; HttpOnly; Secure; SameSite=Strict"
		clear    = "runtime_api_key=; Max-Age=0; Path=/; SameSite=Strict"
		clearTLS = "runtime_api_key=; Max-Age=0; Path=/; Secure; SameSite=Strict"
		hostClr  = "__Host-runtime_api_key=; Max-Age=0; Path=/; Secure; SameSite=Strict"
	)
	tests := []struct {
		name     string
		host     string
		mount    string
		https    bool
		cookie   string
		value    string // "" to clear
		first    []string
		n        int      // lines in all
		includes []string // among the rest
	}{
		{"sign-in over HTTP", "admin.example.test", "", false, "", "tok", []string{set}, 1, nil},
		{"sign-in over HTTPS", "admin.example.test", "", true, "", "tok", []string{setTLS, hostSet}, 2, nil},
		{"sign-out over HTTPS with its own pair", "admin.example.test", "", true, "runtime_api_key=a; __Host-runtime_api_key=a", "", []string{clearTLS, hostClr}, 2, nil},
		{"sign-out over HTTPS with a planted cookie", "admin.example.test:8443", "", true,
			"runtime_api_key=p; runtime_api_key=a; __Host-runtime_api_key=a", "", []string{clearTLS, hostClr}, 2 + 5 + 6 + 6,
			[]string{"runtime_api_key=; Max-Age=0; Path=/api; Domain=example.test; Secure; SameSite=Strict",
				"runtime_api_key=; Max-Age=0; Path=/; Domain=admin.example.test; Secure; SameSite=Strict",
				"runtime_api_key=; Max-Age=0; Path=/api/admin/session; Secure; SameSite=Strict"}},
		{"sign-in over HTTPS with only a plain cookie", "admin.example.test", "", true, "runtime_api_key=p", "tok", []string{setTLS, hostSet}, 2 + 5 + 6 + 6, nil},
		{"sign-out over HTTP, where any cookie may be planted", "a.b.example.co.uk", "", false, "runtime_api_key=a", "", []string{clear}, 1 + 5 + 3*6,
			[]string{"runtime_api_key=; Max-Age=0; Path=/api/; Domain=example.co.uk; SameSite=Strict"}},
		{"under a mount path", "admin.example.test", "/hp", false, "runtime_api_key=a", "", []string{clear}, 1 + 7 + 2*8,
			[]string{"runtime_api_key=; Max-Age=0; Path=/hp; Domain=example.test; SameSite=Strict"}},
		{"an address has no parent domain", "127.0.0.1:8080", "", false, "runtime_api_key=a", "", []string{clear}, 1 + 5, nil},
		{"a public suffix has none either", "localhost:8080", "", false, "runtime_api_key=a", "", []string{clear}, 1 + 5, nil},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("DELETE", "/api/admin/session", nil)
		r.Host = tt.host
		if tt.mount != "" {
			r = r.WithContext(mount.With(r.Context(), tt.mount))
		}
		if tt.https {
			r.TLS = &tls.ConnectionState{}
		}
		if tt.cookie != "" {
			r.Header.Set("Cookie", tt.cookie)
		}
		w := httptest.NewRecorder()
		maxAge := 0
		if tt.value != "" {
			maxAge = 60
		}
		setSessionCookies(w, r, tt.value, maxAge)
		got := w.Header().Values("Set-Cookie")
		if len(got) != tt.n || !slices.Equal(got[:len(tt.first)], tt.first) {
			t.Errorf("%s: %d lines %q, want %d starting with %q", tt.name, len(got), got, tt.n, tt.first)
			continue
		}
		for _, line := range tt.includes {
			if !slices.Contains(got, line) {
				t.Errorf("%s: no %q among %q", tt.name, line, got)
			}
		}
		if slices.Contains(got[len(tt.first):], clear) || slices.Contains(got[len(tt.first):], clearTLS) {
			t.Errorf("%s: the runtime's own cookie is cleared again after %q", tt.name, tt.first)
		}
	}
}
