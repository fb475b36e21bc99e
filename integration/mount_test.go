package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// mountedSites mounts one runtime three ways in one site: under handle_path, under route with
// uri strip_prefix, and with a path matcher on the directive. The root's discovery document
// redirects to the first mount; every other path is the site's own.
func mountedSites(port int) string {
	return fmt.Sprintf(`:%d {
	redir /.well-known/runtime /hp/.well-known/runtime
	handle_path /hp/* {
		runtime
	}
	route /x/* {
		uri strip_prefix /x
		runtime
	}
	runtime /rt/*
	respond "the site's own" 200
}
`, port)
}

// TestMountBelowAPath serves the runtime below a path in each supported form: discovery names
// the API as the client sees it, the API answers there with a document whose server is the
// mount, and workers, their redirects, <base href> and X-Base, and the cpanel stay below it.
func TestMountBelowAPath(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, Sites: mountedSites, Mount: "/hp"})
	spa(t, s, "shop", "1.0.0", "injectBase: true\n")
	processWorker(t, s, "echo", "1.0.0", "")

	site := *s // the site's own answers are not the runtime's: no contract to check
	site.Validator = nil
	if resp := site.Get("/.well-known/runtime"); resp.Status != 302 || resp.Header.Get("Location") != "/hp/.well-known/runtime" {
		t.Errorf("the root's discovery = %s %q, want the site's redirect to /hp", resp, resp.Header.Get("Location"))
	}
	if resp := site.Get("/shop/"); resp.Status != 200 || body(resp) != "the site's own" {
		t.Errorf("a path outside every mount = %s, want the site's own answer", resp)
	}
	for _, tc := range []struct{ form, at string }{
		{"handle_path", "/hp"},
		{"route with uri strip_prefix", "/x"},
		{"path matcher on the directive", "/rt"},
	} {
		t.Run(tc.form, func(t *testing.T) {
			at := tc.at
			m := s.At(at)
			var disc map[string]string
			if resp := m.Get(at + "/.well-known/runtime"); resp.Status != 200 || resp.JSON(&disc) != nil || disc["api"] != at+"/api" || disc["workers"] != "" {
				t.Fatalf("discovery = %s, want api %s/api and no workers URL", resp, at)
			}
			if resp := m.Get(at + "/api/health"); resp.Status != 200 {
				t.Errorf("health = %s", resp)
			}
			var listed []struct{ Name string }
			if resp := m.Get(at+"/api/workers", harness.WithKey(rootKey)); resp.Status != 200 || resp.JSON(&listed) != nil || len(listed) != 2 {
				t.Errorf("workers = %s, want shop and echo", resp)
			}
			if resp := m.Get(at + "/api/nope"); resp.Status != 404 || !strings.Contains(body(resp), "see "+at+"/api/openapi.json") {
				t.Errorf("an unknown API path = %s, want it to point at %s/api/openapi.json", resp, at)
			}
			if resp := m.Get(at + "/api/docs"); resp.Status != 200 || !strings.Contains(body(resp), `data-spec="`+at+`/api/openapi.json"`) ||
				!strings.Contains(body(resp), `src="`+at+`/api/docs/docs-`) {
				t.Errorf("the docs page does not load its document and assets below %s: %s", at, resp)
			}
			if servers := m.Validator.Document().Servers; len(servers) != 1 || servers[0].URL != at {
				t.Errorf("the OpenAPI document's servers = %v, want %s", servers, at)
			}

			// A static worker: its redirect and <base href> keep the mount.
			if resp := m.Get(at + "/shop?tab=1"); resp.Status != 308 || resp.Header.Get("Location") != at+"/shop/?tab=1" {
				t.Errorf("GET %s/shop = %s %q, want 308 to %s/shop/?tab=1", at, resp, resp.Header.Get("Location"), at)
			}
			for _, p := range []string{"/shop/", "/shop/cart/42", "/shop@1.0.0/deep/link"} {
				base := strings.SplitN(p[1:], "/", 2)[0]
				if resp := m.Get(at + p); resp.Status != 200 || !strings.Contains(body(resp), `<head><base href="`+at+"/"+base+`/">`) {
					t.Errorf("GET %s%s = %s, want <base href=%q>", at, p, resp, at+"/"+base+"/")
				}
			}
			if resp := m.Get(at + "/shop/assets/app.js"); resp.Status != 200 || body(resp) != "console.log('1.0.0')" {
				t.Errorf("a file of the static worker = %s", resp)
			}

			// A process worker: its redirect keeps the mount and it learns its base with it.
			if resp := m.Get(at + "/echo"); resp.Status != 308 || resp.Header.Get("Location") != at+"/echo/" {
				t.Errorf("GET %s/echo = %s %q, want 308 to %s/echo/", at, resp, resp.Header.Get("Location"), at)
			}
			e := echoOf(t, m.Get(at+"/echo/items?x=1", harness.WithHeader("X-Forwarded-Prefix", "/forged")))
			if e.Path != "/items" || e.Query != "x=1" || e.Headers["X-Base"] != at+"/echo" || e.Headers["X-Forwarded-Prefix"] != at+"/echo" {
				t.Errorf("the process worker got %s?%s with X-Base %q, X-Forwarded-Prefix %q; want /items below %s/echo",
					e.Path, e.Query, e.Headers["X-Base"], e.Headers["X-Forwarded-Prefix"], at)
			}

			if resp := m.Get(at + "/cpanel/keys"); resp.Status != 200 || !strings.Contains(body(resp), `<base href="`+at+`/cpanel/" />`) {
				t.Errorf("the cpanel = %s, want the app based below %s", resp, at)
			}
			if resp := m.Get(at + "/nobody/"); resp.Status != 404 || resp.ErrorCode() != "WORKER_NOT_FOUND" {
				t.Errorf("an unknown worker = %s", resp)
			}
		})
	}
}
