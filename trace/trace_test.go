package trace

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func TestClientAddr(t *testing.T) {
	tests := []struct {
		name   string
		remote string
		vars   map[string]any // Caddy's per-request vars; nil outside Caddy
		want   string
	}{
		{"outside Caddy", "192.0.2.1:5555", nil, "192.0.2.1"},
		{"IPv6 peer", "[2001:db8::1]:5555", nil, "2001:db8::1"},
		{"a peer without a port", "192.0.2.1", nil, "192.0.2.1"},
		{"Caddy's client IP", "127.0.0.1:5555", map[string]any{caddyhttp.ClientIPVarKey: "203.0.113.7"}, "203.0.113.7"},
		{"in Caddy, before it has one", "127.0.0.1:5555", map[string]any{}, "127.0.0.1"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.remote
		if tt.vars != nil {
			r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, tt.vars))
		}
		if got := ClientAddr(r); got != tt.want {
			t.Errorf("%s: ClientAddr = %q, want %q", tt.name, got, tt.want)
		}
	}
}
