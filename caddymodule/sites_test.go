package caddymodule

import (
	"slices"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func TestSameSite(t *testing.T) {
	tests := []struct {
		a, b   string
		domain string
		same   bool
	}{
		{"admin.example.test", "apps.example.test", "example.test", true},
		{"example.com", "apps.example.com", "example.com", true},
		{"Admin.Example.COM.", "*.apps.example.com", "example.com", true},
		{"admin.example.co.uk", "apps.example.co.uk", "example.co.uk", true},
		{"example.com", "example.com", "example.com", true}, // another port: cookies ignore it
		{"localhost", "localhost", "localhost", true},
		{"127.0.0.1", "127.0.0.1", "127.0.0.1", true},
		{"admin.example.com", "example-apps.com", "", false},
		{"api.cloudflare.com", "app.workers.dev", "", false},
		{"localhost", "apps.localhost", "", false},             // localhost is a public suffix: no Domain cookie for it
		{"me.github.io", "you.github.io", "", false},           // a private suffix of the list
		{"a.co.uk", "b.co.uk", "", false},                      // co.uk is a public suffix
		{"127.0.0.1", "127.0.0.2", "", false},                  // addresses have no parent domain
		{"admin.example.com", "{env.WORKERS_HOST}", "", false}, // a host the warning cannot tell
	}
	for _, tt := range tests {
		domain, same := sameSite(tt.a, tt.b)
		if same != tt.same || same && domain != tt.domain {
			t.Errorf("sameSite(%q, %q) = %q, %v; want %q, %v", tt.a, tt.b, domain, same, tt.domain, tt.same)
		}
	}
}

// TestHandlerHosts checks that a runtime handler gets the hosts of the innermost host matcher
// around it, through subroutes, as the Caddyfile's site blocks and handle blocks nest them.
func TestHandlerHosts(t *testing.T) {
	api, apps, anywhere := &Handler{}, &Handler{}, &Handler{}
	host := func(names ...string) caddyhttp.MatcherSets {
		return caddyhttp.MatcherSets{{caddyhttp.MatchHost(names)}}
	}
	routes := caddyhttp.RouteList{
		{MatcherSets: host("admin.example.test"), Handlers: []caddyhttp.MiddlewareHandler{&caddyhttp.Subroute{Routes: caddyhttp.RouteList{
			{Handlers: []caddyhttp.MiddlewareHandler{api}},
		}}}},
		{MatcherSets: host("example.test"), Handlers: []caddyhttp.MiddlewareHandler{&caddyhttp.Subroute{Routes: caddyhttp.RouteList{
			{MatcherSets: host("apps.example.test", "*.apps.example.test"), Handlers: []caddyhttp.MiddlewareHandler{apps}},
		}}}},
		{Handlers: []caddyhttp.MiddlewareHandler{anywhere}},
	}
	got := map[*Handler][]string{}
	handlerHosts(routes, nil, got)
	for h, want := range map[*Handler][]string{api: {"admin.example.test"}, apps: {"apps.example.test", "*.apps.example.test"}, anywhere: nil} {
		if names := got[h]; !slices.Equal(names, want) {
			t.Errorf("hosts %q, want %q", names, want)
		}
	}
}
