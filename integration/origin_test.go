package integration

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// splitConfig serves the API and the cpanel on localhost and workers on apps.localhost, on one
// port, both site blocks sharing one state; port must be free.
func splitConfig(port int) harness.Config {
	return harness.Config{
		Port: port,
		Env:  map[string]string{"RUNTIME_ROOT_KEY": rootKey},
		Hosts: []harness.Host{
			{Name: "localhost", Runtime: fmt.Sprintf("serve api cpanel\nworkers_url http://apps.localhost:%d", port)},
			{Name: "apps.localhost", Runtime: "serve workers"},
		},
	}
}

// sharedOriginWarnings counts the start-up warnings about workers sharing the API's origin,
// once the runtime has loaded its plugins loads times (each config start loads them once per
// site block), which it logs after the warning.
func sharedOriginWarnings(t *testing.T, s *harness.Server, loads int) int {
	t.Helper()
	if n := s.LogCount("plugins loaded", loads); n < loads {
		t.Fatalf("plugins loaded %d times, want %d", n, loads)
	}
	n := 0
	for _, line := range strings.Split(s.Logs(), "\n") {
		if strings.Contains(line, `"msg":"workers are served on the same origin as the API or the cpanel`) {
			if !strings.Contains(line, `"level":"warn"`) || !strings.Contains(line, "workers_url") {
				t.Errorf("the warning is not a warning naming the fix: %s", line)
			}
			n++
		}
	}
	return n
}

// TestSplitOrigins serves the API on one host and workers on another: each host serves its
// surfaces only and says where the others are, both see the same workers and plugins, and
// discovery tells clients where workers are.
func TestSplitOrigins(t *testing.T) {
	t.Parallel()
	port := harness.FreePort(t)
	s := harness.Start(t, splitConfig(port))
	apps := s.Host("apps.localhost")
	workersURL := fmt.Sprintf("http://apps.localhost:%d", port)
	spa(t, s, "site", "1.0.0", "")
	plugin(t, s, "greet", "base: /greet\n"+respond("hello from a plugin"), nil)
	plugin(t, s, "stamp", "onRequest:\n  - {handler: headers, response: {set: {X-Stamp: [\"1\"]}}}\n", nil)
	reload(t, s)

	var disc struct{ API, Version, Workers string }
	if resp := s.Get("/.well-known/runtime"); resp.Status != 200 || resp.JSON(&disc) != nil || disc.Workers != workersURL || disc.API != "/api" {
		t.Fatalf("discovery = %s, want workers %s", resp, workersURL)
	}
	if resp := s.Get(s.API+"/keys", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("the API host does not serve the API: %s", resp)
	}
	if resp := s.Get("/cpanel/"); resp.Status != 200 || !strings.Contains(body(resp), `<base href="/cpanel/" />`) {
		t.Errorf("the API host's /cpanel/ = %s", resp)
	}
	// / of the API's host says where everything is, the workers' origin included.
	if resp := s.Get("/"); resp.Status != 200 || !strings.Contains(body(resp), "workers: "+workersURL) {
		t.Errorf("the API host's / = %s, want 200 naming %s", resp, workersURL)
	}
	for _, path := range []string{"/site/", "/greet/"} {
		resp := s.Get(path)
		if resp.Status != 404 || resp.ErrorCode() != "NOT_FOUND" || !strings.Contains(body(resp), "served at "+workersURL) {
			t.Errorf("the API host's %s = %s, want 404 naming %s", path, resp, workersURL)
		}
		if resp.Header.Get("X-Stamp") != "" {
			t.Errorf("the API host's %s went through an onRequest hook", path)
		}
	}

	if resp := apps.Get("/site/"); resp.Status != 200 || !strings.Contains(body(resp), "site 1.0.0") || resp.Header.Get("X-Stamp") != "1" {
		t.Errorf("the workers host's /site/ = %s (X-Stamp %q)", resp, resp.Header.Get("X-Stamp"))
	}
	if resp := apps.Get("/greet/"); resp.Status != 200 || body(resp) != "hello from a plugin" {
		t.Errorf("the workers host's plugin route = %s", resp)
	}
	for _, path := range []string{"/.well-known/runtime", s.API + "/health", s.API + "/keys", s.API + "/admin/session", s.API + "/openapi.json", s.API + "/docs"} {
		resp := apps.Get(path, harness.WithKey(rootKey))
		if resp.Status != 404 || !strings.Contains(body(resp), "the API is not served on this host") {
			t.Errorf("the workers host's %s = %s, want 404 saying the API is not served there", path, resp)
		}
	}
	if resp := apps.Do("POST", s.API+"/keys", harness.WithKey(rootKey), harness.WithOrigin(""), harness.WithJSON(map[string]string{"name": "x"})); resp.Status != 404 {
		t.Errorf("the workers host created a key: %s", resp)
	}
	if resp := apps.Get("/cpanel/"); resp.Status != 404 || !strings.Contains(body(resp), "the cpanel is not served on this host") {
		t.Errorf("the workers host's /cpanel/ = %s", resp)
	}
	if n := sharedOriginWarnings(t, s, 2); n != 0 {
		t.Errorf("a split config logged %d shared-origin warnings", n)
	}
}

// TestSharedOriginWarning checks that a site block serving workers beside the API warns at
// start-up, once per process: a reload does not warn again.
func TestSharedOriginWarning(t *testing.T) {
	t.Parallel()
	cfg := harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}}
	s := harness.Start(t, cfg)
	if n := sharedOriginWarnings(t, s, 1); n != 1 {
		t.Fatalf("%d shared-origin warnings at start-up, want 1", n)
	}
	if err := s.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if n := sharedOriginWarnings(t, s, 2); n != 1 {
		t.Fatalf("%d shared-origin warnings after a reload, want still 1", n)
	}
}

// evilCookies are Set-Cookie lines a worker could use to set, replace or clear the session.
var evilCookies = []string{
	"runtime_api_key=evil; Path=/",
	"Runtime_API_Key=evil; Path=/",
	"runtime_api_key=; Max-Age=0; Path=/",
	"runtime_api_key; Path=/api",
	"runtime_api_key=evil; Domain=localhost; Path=/",
	"__Host-runtime_api_key=evil; Secure; Path=/",
}

// checkNoSessionCookie fails unless the response's Set-Cookie lines are exactly want and it
// has no Clear-Site-Data.
func checkNoSessionCookie(t *testing.T, what string, h http.Header, want ...string) {
	t.Helper()
	if got := h.Values("Set-Cookie"); !slices.Equal(got, want) {
		t.Errorf("%s: Set-Cookie %q reached the client, want %q", what, got, want)
	}
	if got := h.Values("Clear-Site-Data"); len(got) > 0 {
		t.Errorf("%s: Clear-Site-Data %q reached the client", what, got)
	}
}

// TestUnitsCannotSetSessionCookie has a process worker, a plugin route and an onRequest hook
// (on a static worker) answer with Set-Cookie lines for runtime_api_key: none reaches the
// client, while their other cookies do, and the API's own login still sets the session.
func TestUnitsCannotSetSessionCookie(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	processWorker(t, s, "echo", "1.0.0", "")
	q := url.Values{}
	for _, c := range append(slices.Clone(evilCookies), "theme=dark") {
		q.Add("set", "Set-Cookie:"+c)
	}
	q.Add("set", `Clear-Site-Data:"cookies"`)
	resp := s.Get("/echo/?" + q.Encode())
	if resp.Status != 200 {
		t.Fatalf("process worker = %s", resp)
	}
	checkNoSessionCookie(t, "process worker", resp.Header, "theme=dark")

	// A protocol switch writes its header past the response writer.
	up := switchProtocols(t, s.URL+"/echo/upgrade?"+q.Encode())
	checkNoSessionCookie(t, "process worker switching protocols", up.Header, "theme=dark")

	cookieList := func(extra string) string {
		quoted := []string{}
		for _, c := range append(slices.Clone(evilCookies), extra) {
			quoted = append(quoted, fmt.Sprintf("%q", c))
		}
		return "[" + strings.Join(quoted, ", ") + "]"
	}
	plugin(t, s, "jar", "base: /jar\nroutes:\n  - handle:\n"+
		"      - {handler: headers, response: {add: {Set-Cookie: "+cookieList("jar=1")+", Clear-Site-Data: ['\"*\"']}}}\n"+
		"      - {handler: static_response, body: jar, status_code: 200}\n", nil)
	reload(t, s)
	resp = s.Get("/jar/")
	if resp.Status != 200 || body(resp) != "jar" {
		t.Fatalf("plugin route = %s", resp)
	}
	checkNoSessionCookie(t, "plugin route", resp.Header, "jar=1")

	spa(t, s, "site", "1.0.0", "")
	plugin(t, s, "hook", "onRequest:\n  - {handler: headers, response: {add: {Set-Cookie: "+cookieList("hook=1")+"}}}\n", nil)
	reload(t, s)
	for _, path := range []string{"/site/", "/site/assets/app.js", "/ghost/"} {
		resp := s.Get(path)
		checkNoSessionCookie(t, "onRequest hook on "+path, resp.Header, "hook=1")
	}

	if !strings.HasPrefix(cookieFrom(t, login(t, s, rootKey)), "rts_") {
		t.Error("the API's login no longer sets the session cookie")
	}
}

// TestSessionCookieNeedsSameOrigin checks that a cookie session is honoured only on requests
// a browser marks as coming from the API's own origin (or that carry no Sec-Fetch-Site, as
// non-browser clients), on reads and writes alike; header keys are not affected.
func TestSessionCookieNeedsSameOrigin(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	cookie := harness.WithCookie("runtime_api_key", cookieFrom(t, login(t, s, rootKey)))
	for _, tt := range []struct {
		site string
		ok   bool
	}{{"", true}, {"same-origin", true}, {"same-site", false}, {"cross-site", false}, {"none", false}} {
		opts := []harness.Option{cookie}
		if tt.site != "" {
			opts = append(opts, harness.WithHeader("Sec-Fetch-Site", tt.site))
		}
		for _, send := range []func() *harness.Response{
			func() *harness.Response { return s.Get(s.API+"/keys", opts...) },
			func() *harness.Response {
				return s.Do("POST", s.API+"/keys", append(opts, harness.WithOrigin(""), harness.WithJSON(map[string]string{"name": "k-" + tt.site}))...)
			},
		} {
			resp := send()
			if tt.ok && resp.Status != 200 {
				t.Errorf("cookie with Sec-Fetch-Site %q = %s, want 200", tt.site, resp)
			}
			if !tt.ok && (resp.Status != 403 || resp.ErrorCode() != "CSRF_REJECTED" || !strings.Contains(body(resp), "Sec-Fetch-Site: "+tt.site)) {
				t.Errorf("cookie with Sec-Fetch-Site %q = %s, want 403 CSRF_REJECTED naming it", tt.site, resp)
			}
		}
	}
	if resp := s.Get(s.API+"/keys", harness.WithKey(rootKey), harness.WithHeader("Sec-Fetch-Site", "cross-site")); resp.Status != 200 {
		t.Errorf("a header key with Sec-Fetch-Site cross-site = %s, want 200", resp)
	}
}
