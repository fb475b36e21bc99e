package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
	"github.com/caddy-runtime/runtime/internal/troubleshooting"
)

// TestMakeRunPort checks that make run takes the port from PORT and hands it to
// Caddyfile.example as RUNTIME_PORT, saying what it does before the slow build.
func TestMakeRunPort(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skipf("no make: %v", err)
	}
	out, err := exec.Command("make", "-C", "..", "-n", "run", "PORT=9090").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	for _, want := range []string{"echo \"building bin/runtime (the first build compiles Caddy", "on port 9090",
		"RUNTIME_PORT=9090 ./bin/runtime run --config Caddyfile.example --adapter caddyfile"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make -n run PORT=9090 does not contain %q:\n%s", want, out)
		}
	}
}

// startExample starts the runtime as make run PORT=… does: Caddyfile.example, its port from
// RUNTIME_PORT, data under ./data of a scratch folder.
func startExample(t *testing.T) *harness.Server {
	t.Helper()
	example, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "data", "run"), 0o700))
	port := harness.FreePort(t)
	return harness.Start(t, harness.Config{File: string(example), Dir: dir, Port: port, Hosts: []harness.Host{{Name: "localhost"}},
		Env: map[string]string{"RUNTIME_PORT": strconv.Itoa(port)}})
}

// TestReadyLine checks the line the runtime logs once it serves: the cpanel's and the API's
// URLs as a browser on this machine opens them, and the bootstrap key file relative to the
// working directory; under a mount path, the URLs are below it.
func TestReadyLine(t *testing.T) {
	t.Parallel()
	s := startExample(t)
	want := fmt.Sprintf("runtime ready: cpanel http://localhost:%d/cpanel/, API http://localhost:%d/api, bootstrap key in data/state/bootstrap-key",
		s.Port, s.Port)
	entry, err := s.WaitLog(want, 10*time.Second)
	if err != nil {
		t.Fatalf("%v\nlogs:\n%s", err, s.Logs())
	}
	if entry["level"] != "info" || entry["bootstrap_key_file"] != "data/state/bootstrap-key" {
		t.Errorf("the ready line is %v, want info with the file", entry)
	}
	if n := len(readyLines(s)); n != 1 {
		t.Errorf("%d ready lines, want 1", n)
	}
	// The bootstrap key's warning links the paragraph that explains it.
	created := s.LogEntries("no root key and no API key: created the bootstrap admin key; read it from the file, create your own keys, then revoke it")
	if len(created) != 1 || created[0]["docs"] != troubleshooting.BootstrapKeyCreated.URL() {
		t.Errorf("the bootstrap key's warning is %v, want one with docs %s", created, troubleshooting.BootstrapKeyCreated.URL())
	}

	mounted := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, Mount: "/hp",
		Sites: func(port int) string {
			return fmt.Sprintf(":%d {\n\thandle_path /hp/* {\n\t\truntime {\n\t\t\tserve api cpanel\n\t\t}\n\t}\n}\n", port)
		}})
	want = fmt.Sprintf("runtime ready: cpanel http://127.0.0.1:%d/hp/cpanel/, API http://127.0.0.1:%d/hp/api", mounted.Port, mounted.Port)
	if _, err := mounted.WaitLog(want, 10*time.Second); err != nil {
		t.Fatalf("%v\nlogs:\n%s", err, mounted.Logs())
	}
}

// readyLines are the server's ready lines.
func readyLines(s *harness.Server) []string {
	var out []string
	for _, line := range strings.Split(s.Logs(), "\n") {
		var entry struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && strings.HasPrefix(entry.Msg, "runtime ready") {
			out = append(out, entry.Msg)
		}
	}
	return out
}

// TestRootRedirectsBrowsers checks that a browser opening the root of the cpanel's host is
// sent to the cpanel, below the mount path where there is one, while other clients (curl, a
// script asking for JSON) are told where the cpanel and the API are; the workers' host
// answers as it did. On a single host serving everything, / answers the same.
func TestRootRedirectsBrowsers(t *testing.T) {
	t.Parallel()
	s := startExample(t)
	site := *s // the root is not an API route: no contract to check
	site.Validator = nil
	html := harness.WithHeader("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	for _, method := range []string{"GET", "HEAD"} {
		resp := site.Do(method, "/", html)
		if resp.Status != 302 || resp.Header.Get("Location") != "/cpanel/" || resp.Header.Get("Vary") != "Accept" {
			t.Errorf("%s / as a browser = %s, Location %q, Vary %q; want 302 to /cpanel/, Vary Accept", method, resp,
				resp.Header.Get("Location"), resp.Header.Get("Vary"))
		}
	}
	checkRootIndex(t, &site, fmt.Sprintf("http://apps.localhost:%d/<name>/", s.Port))
	if resp := site.Do("POST", "/", html); resp.Status == 302 {
		t.Errorf("POST / as a browser = %s; want no redirect", resp)
	}
	apps := *site.Host("apps.localhost")
	apps.Validator = nil
	if resp := apps.Get("/", html); resp.Status == 302 {
		t.Errorf("GET / on the workers' host = %s, Location %q; want no redirect", resp, resp.Header.Get("Location"))
	}

	// One host serving everything: no worker is named by /, so it answers the same.
	all := *startWithRoot(t)
	all.Validator = nil
	if resp := all.Get("/", html); resp.Status != 302 || resp.Header.Get("Location") != "/cpanel/" {
		t.Errorf("GET / as a browser on a host serving everything = %s, Location %q; want 302 to /cpanel/", resp, resp.Header.Get("Location"))
	}
	checkRootIndex(t, &all, all.URL+"/<name>/")

	mounted := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, Mount: "/hp",
		Sites: func(port int) string {
			return fmt.Sprintf(":%d {\n\thandle_path /hp/* {\n\t\truntime {\n\t\t\tserve api cpanel\n\t\t}\n\t}\n}\n", port)
		}})
	m := *mounted
	m.Validator = nil
	if resp := m.Get("/hp/", html); resp.Status != 302 || resp.Header.Get("Location") != "/hp/cpanel/" {
		t.Errorf("GET /hp/ as a browser = %s, Location %q; want 302 to /hp/cpanel/", resp, resp.Header.Get("Location"))
	}
}

// checkRootIndex checks / for clients other than browsers: curl (no Accept, or */*) gets a
// few lines of text with the cpanel's, the API's and the workers' URLs, a client asking for
// JSON the same as paths.
func checkRootIndex(t *testing.T, s *harness.Server, workers string) {
	t.Helper()
	for _, opts := range [][]harness.Option{nil, {harness.WithHeader("Accept", "*/*")}} {
		resp := s.Get("/", opts...)
		for _, want := range []string{"  cpanel:  " + s.URL + "/cpanel/ (open it in a browser)\n",
			"  API:     " + s.URL + "/api (reference: " + s.URL + "/api/docs)\n", "  workers: " + workers + "\n"} {
			if resp.Status != 200 || resp.Header.Get("Location") != "" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") ||
				!strings.Contains(string(resp.Body), want) {
				t.Errorf("GET / as curl (%d options) = %s; want 200 text saying %q", len(opts), resp, want)
			}
		}
	}
	var idx struct{ CPanel, API, Docs, Workers string }
	resp := s.Get("/", harness.WithHeader("Accept", "application/json"))
	if resp.Status != 200 || resp.JSON(&idx) != nil || idx.CPanel != "/cpanel/" || idx.API != "/api" || idx.Docs != "/api/docs" ||
		idx.Workers+"/<name>/" != workers {
		t.Errorf("GET / as a JSON client = %s (%+v); want where the cpanel, the API and the workers are", resp, idx)
	}
}

// TestBrowserNoFaviconRequest loads the cpanel in Chromium: it declares its own icon, so the
// browser asks for no /favicon.ico, and its console stays clean. A page without an icon on
// the workers' host, opened after it, shows that this browser does ask where none is
// declared.
func TestBrowserNoFaviconRequest(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Site: "log", Hosts: []harness.Host{
		{Name: "localhost", Runtime: "serve api cpanel"},
		{Name: "apps.localhost", Runtime: "serve workers"},
	}})
	p, problems := openPanel(t, s)
	p.do("loading the cpanel", chromedp.Navigate(p.base+"/"), chromedp.WaitVisible(chromedp.CSS("#key")))
	icon, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('link[rel="icon"]')?.href ?? ""`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(icon, p.base+"/assets/icon-") || !strings.HasSuffix(icon, ".svg") {
		t.Errorf("the cpanel's icon is %q, want one of its assets", icon)
	}
	if resp := s.Get(strings.TrimPrefix(icon, s.URL)); resp.Status != 200 || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Errorf("the icon %s = %s, %q", icon, resp, resp.Header.Get("Content-Type"))
	}
	p.do("loading a page without an icon", chromedp.Navigate(fmt.Sprintf("http://apps.localhost:%d/", s.Port)))
	testkit.Eventually(t, "the browser asks the workers' host for /favicon.ico", 20*time.Second, func() bool {
		return len(faviconRequests(s, "apps.localhost")) > 0
	})
	if hosts := faviconRequests(s, "localhost"); len(hosts) > 0 {
		t.Errorf("the browser asked the cpanel's host for /favicon.ico %d times", len(hosts))
	}
	problems.check(t)
}

// faviconRequests are the access log's requests for /favicon.ico to host.
func faviconRequests(s *harness.Server, host string) []string {
	var out []string
	for _, line := range strings.Split(s.Logs(), "\n") {
		var entry struct {
			Request struct {
				Host string `json:"host"`
				URI  string `json:"uri"`
			} `json:"request"`
		}
		if json.Unmarshal([]byte(line), &entry) != nil || entry.Request.URI != "/favicon.ico" {
			continue
		}
		if h, _, _ := strings.Cut(entry.Request.Host, ":"); h == host {
			out = append(out, line)
		}
	}
	return out
}
