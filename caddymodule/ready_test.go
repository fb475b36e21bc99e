package caddymodule

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddytls"

	"github.com/caddy-runtime/runtime/internal/config"
)

// TestSurfacesOf checks the URLs of the ready line, as the Caddyfile's site blocks compile:
// a route per host around a subroute holding the runtime, handle_path's path matcher, a
// listener on every address, a default port, TLS.
func TestSurfacesOf(t *testing.T) {
	handler := func(api, cpanel bool, prefix string) *Handler {
		return &Handler{settings: config.Settings{Serve: config.Surfaces{API: api, CPanel: cpanel}, APIPrefix: prefix}}
	}
	site := func(host string, inner ...caddyhttp.Route) caddyhttp.Route {
		r := caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{&caddyhttp.Subroute{Routes: inner}}}
		if host != "" {
			r.MatcherSets = caddyhttp.MatcherSets{{caddyhttp.MatchHost{host}}}
		}
		return r
	}
	with := func(h caddyhttp.MiddlewareHandler, matchers ...any) caddyhttp.Route {
		r := caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{h}}
		if len(matchers) > 0 {
			r.MatcherSets = caddyhttp.MatcherSets{matchers}
		}
		return r
	}
	tests := []struct {
		name    string
		servers map[string]*caddyhttp.Server
		want    surfaceURLs
	}{
		{"Caddyfile.example", map[string]*caddyhttp.Server{"srv0": {Listen: []string{":8080"}, Routes: caddyhttp.RouteList{
			site("localhost", with(handler(true, true, "/api"))),
			site("apps.localhost", with(handler(false, false, "/api"))),
		}}}, surfaceURLs{CPanel: []string{"http://localhost:8080/cpanel/"}, API: []string{"http://localhost:8080/api"}}},
		{"mounted with handle_path, an API prefix", map[string]*caddyhttp.Server{"srv0": {Listen: []string{"tcp/127.0.0.1:9000"}, Routes: caddyhttp.RouteList{
			site("", with(&caddyhttp.Subroute{Routes: caddyhttp.RouteList{with(handler(true, true, "/_/api"))}}, caddyhttp.MatchPath{"/hp/*"})),
		}}}, surfaceURLs{CPanel: []string{"http://127.0.0.1:9000/hp/cpanel/"}, API: []string{"http://127.0.0.1:9000/hp/_/api"}}},
		{"HTTPS on 443, a wildcard host first", map[string]*caddyhttp.Server{"srv0": {Listen: []string{":443"},
			TLSConnPolicies: caddytls.ConnectionPolicies{{}}, Routes: caddyhttp.RouteList{
				with(handler(true, false, "/api"), &caddyhttp.MatchHost{"*.example.com", "admin.example.com"}),
			}}}, surfaceURLs{API: []string{"https://admin.example.com/api"}}},
		{"unix listener only", map[string]*caddyhttp.Server{"srv0": {Listen: []string{"unix//run/rt.sock"}, Routes: caddyhttp.RouteList{
			with(handler(true, true, "/api")),
		}}}, surfaceURLs{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := surfacesOf(tt.servers); !reflect.DeepEqual(got, tt.want) {
				got, _ := json.Marshal(got)
				t.Errorf("surfacesOf = %s, want %+v", got, tt.want)
			}
		})
	}
}

func TestReadyLine(t *testing.T) {
	tests := []struct {
		urls      surfaceURLs
		bootstrap string
		want      string
	}{
		{surfaceURLs{CPanel: []string{"http://localhost:8080/cpanel/"}, API: []string{"http://localhost:8080/api"}}, "data/state/bootstrap-key",
			"runtime ready: cpanel http://localhost:8080/cpanel/, API http://localhost:8080/api, bootstrap key in data/state/bootstrap-key"},
		{surfaceURLs{API: []string{"http://a/api", "http://b/api"}}, "",
			"runtime ready: API http://a/api and http://b/api"},
		{surfaceURLs{}, "", "runtime ready: no site block of this config serves the API or the cpanel"},
	}
	for _, tt := range tests {
		if got := readyLine(tt.urls, tt.bootstrap); got != tt.want {
			t.Errorf("readyLine = %q, want %q", got, tt.want)
		}
	}
}

func TestDisplayPath(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(filepath.Dir(wd), "elsewhere", "bootstrap-key")
	for path, want := range map[string]string{
		filepath.Join(wd, "data", "state", "bootstrap-key"): filepath.Join("data", "state", "bootstrap-key"),
		filepath.Join("data", "bootstrap-key"):              filepath.Join("data", "bootstrap-key"),
		outside:                                             outside,
	} {
		if got := displayPath(path); got != want {
			t.Errorf("displayPath(%q) = %q, want %q", path, got, want)
		}
	}
}
