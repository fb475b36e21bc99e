package trace

import (
	"context"
	"crypto/tls"
	"net/http/httptest"
	"testing"
)

// hostVarsKey stands for a host server's per-request vars key (Caddy's caddyhttp.VarsCtxKey).
type hostVarsKey struct{}

func TestClientAddr(t *testing.T) {
	UseHostVars(hostVarsKey{})
	t.Cleanup(func() { UseHostVars(nil) })
	tests := []struct {
		name   string
		remote string
		attach bool   // the host server attached the request
		client string // the client address it judged
		want   string
	}{
		{"outside a host server", "192.0.2.1:5555", false, "", "192.0.2.1"},
		{"IPv6 peer", "[2001:db8::1]:5555", false, "", "2001:db8::1"},
		{"a peer without a port", "192.0.2.1", false, "", "192.0.2.1"},
		{"the host's client address", "127.0.0.1:5555", true, "203.0.113.7", "203.0.113.7"},
		{"attached without one", "127.0.0.1:5555", true, "", "127.0.0.1"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.remote
		if tt.attach {
			vars := map[string]any{}
			r = r.WithContext(context.WithValue(r.Context(), hostVarsKey{}, vars))
			Attach(vars, nil, tt.client, false)
		}
		if got := ClientAddr(r); got != tt.want {
			t.Errorf("%s: ClientAddr = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestHTTPS(t *testing.T) {
	UseHostVars(hostVarsKey{})
	t.Cleanup(func() { UseHostVars(nil) })
	tests := []struct {
		name    string
		proto   string
		tls     bool
		trusted bool // the host server trusts the peer as a proxy
		want    bool
	}{
		{"plain", "", false, false, false},
		{"TLS", "", true, false, true},
		{"TLS whatever the header", "http", true, false, true},
		{"untrusted client says https", "https", false, false, false},
		{"trusted proxy says https", "https", false, true, true},
		{"trusted proxy says http", "http", false, true, false},
		{"first value counts", "http, https", false, true, false},
		{"first value https", " HTTPS , http", false, true, true},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/", nil)
		if tt.proto != "" {
			r.Header.Set("X-Forwarded-Proto", tt.proto)
		}
		if tt.tls {
			r.TLS = &tls.ConnectionState{}
		}
		vars := map[string]any{}
		r = r.WithContext(context.WithValue(r.Context(), hostVarsKey{}, vars))
		Attach(vars, nil, "", tt.trusted)
		if got := HTTPS(r); got != tt.want {
			t.Errorf("%s: HTTPS = %v, want %v", tt.name, got, tt.want)
		}
	}
	// Outside a host server nobody is trusted: only the connection counts.
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("X-Forwarded-Proto", "https")
	if HTTPS(r) {
		t.Error("a request no host server attached is HTTPS by its own X-Forwarded-Proto")
	}
}
