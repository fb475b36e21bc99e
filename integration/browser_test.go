package integration

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// chromium returns the Chromium binary of the browser tests: $CHROMIUM, else
// /usr/bin/chromium (make deps installs it).
func chromium(t *testing.T) string {
	t.Helper()
	return testProgram(t, "Chromium", "CHROMIUM", "/usr/bin/chromium")
}

// testProgram returns the program a test needs: $env, else path (make deps installs it).
// Where it is missing the test fails in CI (CI=true), so a green CI run has really run it, and
// is skipped elsewhere.
func testProgram(t *testing.T, name, env, path string) string {
	t.Helper()
	path = cmp.Or(os.Getenv(env), path)
	if _, err := exec.LookPath(path); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the test needs %s at %s (%v): run make deps, or set %s", name, path, err, env)
		}
		t.Skipf("skipping: no %s at %s (%v); run make deps as root to install it, or set %s (in CI this fails)", name, path, err, env)
	}
	return path
}

// browser starts a headless Chromium for the test, with a profile of its own and the extra
// options, if any.
func browser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // the tests may run as root, where Chromium's sandbox refuses to start
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("no-proxy-server", true),
		// Chromium leaves its singleton socket's folder in $TMPDIR when it is stopped: the test's
		// own folder goes with the test.
		chromedp.Env("TMPDIR="+t.TempDir()),
	)
	opts = append(opts, extra...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(alloc)
	// A safety net against a hung browser, not a timed assertion.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() {
		cancel()
		cancelBrowser()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// poll waits until expression (JavaScript) is truthy in the page's document, reading it
// every 10 ms for at most timeout, and returns its value. It evaluates in the document's own
// context, not, as chromedp.Poll does, in the context chromedp recorded: chromedp records a new
// document's context on another goroutine than the one that ends Navigate, so a Poll just after
// a navigation can name the old document's ("Cannot find context with specified id").
func poll[T any](ctx context.Context, expression string, timeout time.Duration) (T, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[T](fmt.Sprintf(`new Promise((done, fail) => {
	const until = Date.now() + %d;
	const look = () => {
		try {
			const v = (%s);
			if (v) return done(v);
		} catch (e) {
			return fail(e);
		}
		if (Date.now() > until) return fail(new Error("still false after %s"));
		setTimeout(look, 10);
	};
	look();
})`, timeout.Milliseconds(), expression, timeout), chromedp.EvalAwaitPromise))
}

// fetchStatus opens url and returns the status of a fetch the page makes with init (a
// JavaScript object literal).
func fetchStatus(ctx context.Context, url, path, init string) (int, error) {
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		return 0, err
	}
	return chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf("fetch(%q, %s).then(r => r.status)", path, init), chromedp.EvalAwaitPromise))
}

// signIn signs key in on the API's origin as the cpanel does: POST admin/session from a page
// of that origin, which sets the session cookie in the browser; it checks that the cookie then
// works from that origin.
func signIn(t *testing.T, ctx context.Context, apiOrigin, key string) {
	t.Helper()
	page := apiOrigin + "/.well-known/runtime"
	login, err := fetchStatus(ctx, page, "/api/admin/session",
		fmt.Sprintf(`{method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({key: %q})}`, key))
	if err != nil || login != 200 {
		t.Fatalf("signing in from %s: %d, %v", apiOrigin, login, err)
	}
	if session, err := fetchStatus(ctx, page, "/api/admin/session", "{}"); err != nil || session != 200 {
		t.Fatalf("the session from %s after signing in: %d, %v", apiOrigin, session, err)
	}
}

// attackResult is what the attacking page saw of one request.
type attackResult struct {
	Name   string `json:"name"`
	Read   bool   `json:"read"` // the fetch resolved
	Status int    `json:"status"`
	Type   string `json:"type"`
	Body   string `json:"body"`
	Error  string `json:"error"`
}

// attackPage is a worker page that, on load, tries to create admin keys and to read the
// key list through the API at api, riding the browser's session, and leaves what it saw in
// window.results: a JSON request (preflighted), a text/plain one (a simple request, sent
// without asking), a no-cors one and a read.
func attackPage(api string) string {
	return `<!doctype html><html><head><title>attack</title></head><body><script>
const api = ` + fmt.Sprintf("%q", api) + `;
async function attempt(name, init) {
	try {
		const r = await fetch(api, init);
		let body = "";
		try { body = await r.text(); } catch (e) {}
		return {name, read: true, status: r.status, type: r.type, body};
	} catch (e) {
		return {name, read: false, error: String(e)};
	}
}
(async () => {
	const results = [];
	results.push(await attempt("json", {method: "POST", credentials: "include",
		headers: {"Content-Type": "application/json"}, body: JSON.stringify({name: "stolen-json", role: "admin"})}));
	results.push(await attempt("text", {method: "POST", credentials: "include",
		headers: {"Content-Type": "text/plain"}, body: JSON.stringify({name: "stolen-text", role: "admin"})}));
	results.push(await attempt("no-cors", {method: "POST", credentials: "include", mode: "no-cors",
		headers: {"Content-Type": "text/plain"}, body: JSON.stringify({name: "stolen-no-cors", role: "admin"})}));
	results.push(await attempt("read", {credentials: "include"}));
	window.results = results;
})();
</script></body></html>`
}

// attack installs the attack page as worker "evil" and opens it at pageURL.
func attack(t *testing.T, ctx context.Context, s *harness.Server, pageURL, api string) []attackResult {
	t.Helper()
	writeFiles(t, filepath.Join(s.DataDir, "apps", "evil", "1.0.0"), map[string]string{
		"manifest.yaml": "name: evil\nversion: 1.0.0\n",
		"index.html":    attackPage(api),
	})
	if err := chromedp.Do(ctx, chromedp.Navigate(pageURL)); err != nil {
		t.Fatalf("opening the attack page at %s: %v", pageURL, err)
	}
	results, err := poll[[]attackResult](ctx, "window.results", time.Minute)
	if err != nil {
		t.Fatalf("running the attack page at %s: %v", pageURL, err)
	}
	return results
}

// keyNames lists the names of the keys, through the root key.
func keyNames(t *testing.T, s *harness.Server) []string {
	t.Helper()
	var out struct{ Keys []struct{ Name string } }
	if resp := s.Get(s.API+"/keys", harness.WithKey(rootKey)); resp.Status != 200 || resp.JSON(&out) != nil {
		t.Fatalf("listing keys: %s", resp)
	}
	var names []string
	for _, k := range out.Keys {
		names = append(names, k.Name)
	}
	slices.Sort(names)
	return names
}

// TestBrowserWorkerPageCannotActAsAdmin is attack 3 of issue 9 in a real browser: an admin
// is signed in on the API's host, and a worker page on the workers' host calls the API with
// the browser's credentials. It creates no key and reads nothing.
func TestBrowserWorkerPageCannotActAsAdmin(t *testing.T) {
	ctx := browser(t)
	port := harness.FreePort(t)
	s := harness.Start(t, splitConfig(port))
	apiOrigin := fmt.Sprintf("http://localhost:%d", port)
	admin := s.CreateKey(rootKey, map[string]any{"name": "admin", "role": "admin"})
	signIn(t, ctx, apiOrigin, admin.Secret)
	before := keyNames(t, s)

	results := attack(t, ctx, s, fmt.Sprintf("http://apps.localhost:%d/evil/", port), apiOrigin+"/api/keys")
	t.Logf("the page saw %+v", results)
	if len(results) != 4 {
		t.Fatalf("the page reported %+v", results)
	}
	for _, r := range results {
		// A request the browser refused to expose rejects, or (no-cors) resolves opaque.
		if r.Read && (r.Type != "opaque" || r.Status != 0 || r.Body != "") {
			t.Errorf("the worker page read the API's answer to %s: %+v", r.Name, r)
		}
	}
	if after := keyNames(t, s); !slices.Equal(after, before) {
		t.Errorf("keys changed from %v to %v", before, after)
	}
	// The admin is still signed in on the API's host.
	if session, err := fetchStatus(ctx, apiOrigin+"/.well-known/runtime", "/api/admin/session", "{}"); err != nil || session != 200 {
		t.Errorf("the admin's session after the attack = %d, %v", session, err)
	}
}

// TestBrowserSharedOrigin is the same page with workers on the API's origin, the layout the
// start-up warning is about: the warning is logged, and the page does create a key, which
// shows the attack page works and that the split is what stops it.
func TestBrowserSharedOrigin(t *testing.T) {
	ctx := browser(t)
	s := startWithRoot(t)
	if n := sharedOriginWarnings(t, s, 1); n != 1 {
		t.Errorf("%d shared-origin warnings, want 1", n)
	}
	origin := fmt.Sprintf("http://localhost:%d", s.Port)
	admin := s.CreateKey(rootKey, map[string]any{"name": "admin", "role": "admin"})
	signIn(t, ctx, origin, admin.Secret)

	results := attack(t, ctx, s, origin+"/evil/", origin+"/api/keys")
	if len(results) == 0 || !results[0].Read || results[0].Status != 200 || !strings.Contains(results[0].Body, "rtk_") {
		t.Fatalf("on a shared origin the page's JSON request = %+v, want a created key it can read", results)
	}
	if names := keyNames(t, s); !slices.Contains(names, "stolen-json") {
		t.Errorf("keys = %v, want the page's stolen-json", names)
	}
}
