package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
)

// siblingConfig serves the API and the cpanel on admin.example.test and workers on
// apps.example.test, on one port, over HTTPS when secure: two hosts of one registrable domain,
// where a page of one may set cookies for both.
func siblingConfig(port int, secure bool) harness.Config {
	scheme := "http"
	if secure {
		scheme = "https"
	}
	return harness.Config{
		Port: port,
		TLS:  secure,
		Env:  map[string]string{"RUNTIME_ROOT_KEY": rootKey},
		Hosts: []harness.Host{
			{Name: "admin.example.test", Runtime: fmt.Sprintf("serve api cpanel\nworkers_url %s://apps.example.test:%d", scheme, port)},
			{Name: "apps.example.test", Runtime: "serve workers"},
		},
	}
}

// startSiblings starts a runtime with siblingConfig and returns it with an admin key, a
// tenant's key restricted to @team and a session token of the tenant's, to plant.
func startSiblings(t *testing.T, secure bool) (s *harness.Server, admin, tenant harness.Key, token string) {
	t.Helper()
	s = harness.Start(t, siblingConfig(harness.FreePort(t), secure))
	admin = s.CreateKey(rootKey, map[string]any{"name": "boss", "role": "admin"})
	tenant = s.CreateKey(rootKey, map[string]any{"name": "tenant", "role": "editor", "namespaces": []string{"@team"}})
	return s, admin, tenant, cookieFrom(t, login(t, s, tenant.Secret))
}

// siblingBrowser is a browser in which every *.example.test name reaches 127.0.0.1 and the
// certificates of Caddy's internal issuer are accepted.
var siblingBrowser = []chromedp.ExecAllocatorOption{
	chromedp.Flag("host-resolver-rules", "MAP *.example.test 127.0.0.1"),
	chromedp.Flag("ignore-certificate-errors", true),
}

// tossPage is a tenant's worker page that sets the session cookie for the whole parent
// domain, on the API's path, for a year: the browser then sends it to the API's host too,
// before the admin's own (a longer path goes first).
func tossPage(token string, secure bool) string {
	attrs := "; Domain=example.test; Path=/api; Max-Age=31536000"
	if secure {
		attrs += "; Secure"
	}
	return `<!doctype html><html><head><title>toss</title></head><body><script>
document.cookie = "runtime_api_key=` + token + attrs + `";
window.planted = true;
</script></body></html>`
}

// plantCookie installs tossPage as worker "toss" and opens it at pageURL; it checks that the
// browser now holds the planted cookie for apiURL, so the attack really is in place.
func plantCookie(t *testing.T, ctx context.Context, s *harness.Server, pageURL, apiURL, token string, secure bool) {
	t.Helper()
	writeFiles(t, filepath.Join(s.DataDir, "apps", "toss", "1.0.0"), map[string]string{
		"manifest.yaml": "name: toss\nversion: 1.0.0\n",
		"index.html":    tossPage(token, secure),
	})
	if err := chromedp.Do(ctx, chromedp.Navigate(pageURL)); err != nil {
		t.Fatalf("opening the page at %s: %v", pageURL, err)
	}
	if _, err := poll[bool](ctx, "window.planted", time.Minute); err != nil {
		t.Fatalf("running the page at %s: %v", pageURL, err)
	}
	planted := slices.ContainsFunc(sessionCookies(t, ctx, apiURL), func(c *network.Cookie) bool {
		return c.Domain == ".example.test" && c.Value == token
	})
	if !planted {
		t.Fatalf("the page planted no cookie for %s: %v", apiURL, sessionCookies(t, ctx, apiURL))
	}
}

// sessionCookies are the cookies of the browser a request to url would carry whose name
// holds runtime_api_key.
func sessionCookies(t *testing.T, ctx context.Context, url string) []*network.Cookie {
	t.Helper()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
	if err != nil {
		t.Fatalf("reading the browser's cookies: %v", err)
	}
	var out []*network.Cookie
	for _, c := range res.Cookies {
		if strings.Contains(c.Name, "runtime_api_key") {
			out = append(out, c)
		}
	}
	return out
}

// signedInAs waits for a panel just opened to show either who is signed in or the sign-in
// form, and returns the name it shows ("" for the form).
func (p panel) signedInAs() string {
	p.t.Helper()
	p.do("waiting for the panel", chromedp.WaitVisible(chromedp.CSS(".who, form.signin")))
	who, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(document.querySelector(".who strong") || {textContent: ""}).textContent`))
	if err != nil {
		p.t.Fatal(err)
	}
	return who
}

// TestBrowserPlantedCookieHTTPS is attack 3 of issue 22 in a real browser over HTTPS: an
// admin is signed in to the cpanel on admin.example.test, and a tenant's page on
// apps.example.test sets runtime_api_key to the tenant's own session for all of
// example.test. The panel still shows the admin, and signing out leaves no session behind, the
// planted one included.
func TestBrowserPlantedCookieHTTPS(t *testing.T) {
	t.Parallel()
	s, admin, _, token := startSiblings(t, true)
	p, problems := openPanel(t, s, siblingBrowser...)
	apiURL := s.URL + s.API + "/admin/session"

	p.do("opening the panel", chromedp.Navigate(p.base+"/"))
	p.signIn(admin.Secret)
	p.do("waiting for the overview", chromedp.WaitVisible(chromedp.CSS("nav")))
	if who := p.signedInAs(); who != "boss" {
		t.Fatalf("signed in as %q, want boss", who)
	}
	plantCookie(t, p.ctx, s, s.Host("apps.example.test").URL+"/toss/", apiURL, token, true)

	p.do("opening the panel again", chromedp.Navigate(p.base+"/"))
	if who := p.signedInAs(); who != "boss" {
		t.Errorf("after the tenant's page the panel shows %q, want boss", who)
	}

	// Signing out ends the admin's session and clears every session cookie the browser sends
	// the API, the planted one included: the panel does not come back as the tenant.
	p.do("signing out", chromedp.Click(chromedp.Search(`//header//button[normalize-space()="Sign out"]`)), chromedp.WaitVisible(chromedp.CSS("form.signin")))
	p.do("opening the panel after signing out", chromedp.Navigate(p.base+"/"))
	if who := p.signedInAs(); who != "" {
		t.Errorf("after signing out the panel shows %q, want the sign-in form", who)
	}
	if left := sessionCookies(t, p.ctx, apiURL); len(left) != 0 {
		t.Errorf("session cookies left after signing out: %v", cookieList(left))
	}
	p.signIn(admin.Secret)
	p.do("waiting for the overview", chromedp.WaitVisible(chromedp.CSS("nav")))
	if who := p.signedInAs(); who != "boss" {
		t.Errorf("signed in again as %q, want boss", who)
	}
	problems.check(t)
}

// TestBrowserPlantedCookieHTTP is the same attack over plain HTTP, where no __Host- cookie
// exists: the two session cookies are refused with DUPLICATE_SESSION_COOKIE, whose message
// says what to do, and signing out clears both.
func TestBrowserPlantedCookieHTTP(t *testing.T) {
	t.Parallel()
	s, admin, _, token := startSiblings(t, false)
	ctx := browser(t, siblingBrowser...)
	apiURL := s.URL + s.API + "/admin/session"
	signIn(t, ctx, s.URL, admin.Secret)
	plantCookie(t, ctx, s, s.Host("apps.example.test").URL+"/toss/", apiURL, token, false)

	page := s.URL + "/.well-known/runtime"
	answer := func(method string) fetchAnswer {
		t.Helper()
		got, err := pageFetch(ctx, page, method, s.API+"/admin/session")
		if err != nil {
			t.Fatalf("%s admin/session from the API's page: %v", method, err)
		}
		return got
	}
	if got := answer("GET"); got.Status != 401 || got.Code != "DUPLICATE_SESSION_COOKIE" || !strings.Contains(got.Message, "sign out") || !strings.Contains(got.Message, "cookies") {
		t.Fatalf("the session with a planted cookie = %+v, want 401 DUPLICATE_SESSION_COOKIE saying to sign out or clear the cookies", got)
	}
	if got := answer("DELETE"); got.Status != 204 {
		t.Fatalf("signing out = %+v", got)
	}
	if left := sessionCookies(t, ctx, apiURL); len(left) != 0 {
		t.Errorf("session cookies left after signing out: %v", cookieList(left))
	}
	if got := answer("GET"); got.Status != 401 || got.Code != "AUTH_REQUIRED" {
		t.Errorf("the session after signing out = %+v, want 401 AUTH_REQUIRED", got)
	}
	signIn(t, ctx, s.URL, admin.Secret)
	if got := answer("GET"); got.Status != 200 || got.Name != "boss" {
		t.Errorf("the session after signing in again = %+v, want boss", got)
	}
}

// fetchAnswer is what a page saw of an API answer: its status, the error's code and message,
// or the principal's name.
type fetchAnswer struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Name    string `json:"name"`
}

// pageFetch opens page and returns what a fetch from it of path with method answered.
func pageFetch(ctx context.Context, page, method, path string) (fetchAnswer, error) {
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		return fetchAnswer{}, err
	}
	return chromedp.Run(ctx, chromedp.Evaluate[fetchAnswer](fmt.Sprintf(`fetch(%q, {method: %q}).then(async r => {
		const text = await r.text();
		const body = text ? JSON.parse(text) : {};
		return {status: r.status, code: body.error ? body.error.code : "", message: body.error ? body.error.message : "",
			name: body.principal ? body.principal.name : ""};
	})`, path, method), chromedp.EvalAwaitPromise))
}

// cookieList describes cookies for a failure message.
func cookieList(cookies []*network.Cookie) []string {
	var out []string
	for _, c := range cookies {
		out = append(out, fmt.Sprintf("%s (domain %s, path %s)", c.Name, c.Domain, c.Path))
	}
	return out
}

// TestSessionCookiesOverHTTPS checks the session cookies without a browser, over real TLS:
// the __Host- twin is set beside runtime_api_key and read first, two runtime_api_key cookies
// alone are refused, a header credential still wins, the spec's key-valued cookie still works,
// and signing out ends and clears every session cookie the request carries.
func TestSessionCookiesOverHTTPS(t *testing.T) {
	t.Parallel()
	s, admin, tenant, planted := startSiblings(t, true)

	resp := login(t, s, admin.Secret)
	own := cookieFrom(t, resp)
	want := []string{
		"runtime_api_key=" + own + "; Max-Age=86400; Path=/; HttpOnly; Secure; SameSite=Strict",
		"__Host-runtime_api_key=" + own + "; Max-Age=86400; Path=/; HttpOnly; Secure; SameSite=Strict",
	}
	if got := resp.Header.Values("Set-Cookie"); !slices.Equal(got, want) {
		t.Fatalf("Set-Cookie of a sign-in over HTTPS = %q, want %q", got, want)
	}

	cookies := func(header string) harness.Option { return harness.WithHeader("Cookie", header) }
	tossed := "runtime_api_key=" + planted + "; runtime_api_key=" + own
	for _, tt := range []struct {
		name   string
		opts   []harness.Option
		status int
		who    string
		code   string
	}{
		{"the browser's order after a toss", []harness.Option{cookies(tossed + "; __Host-runtime_api_key=" + own)}, 200, "boss", ""},
		{"the __Host- cookie alone", []harness.Option{cookies("__Host-runtime_api_key=" + own)}, 200, "boss", ""},
		{"two runtime_api_key cookies alone", []harness.Option{cookies(tossed)}, 401, "", "DUPLICATE_SESSION_COOKIE"},
		{"two cookies and X-API-Key", []harness.Option{cookies(tossed), harness.WithKey(tenant.Secret)}, 200, "tenant", ""},
		{"two cookies and a Bearer key", []harness.Option{cookies(tossed), harness.WithBearer(admin.Secret)}, 200, "boss", ""},
		{"one cookie holding a key (spec part 5)", []harness.Option{cookies("runtime_api_key=" + rootKeyCookie)}, 200, "root", ""},
	} {
		got := s.Get(s.API+"/admin/session", tt.opts...)
		var body api.Session
		got.JSON(&body)
		if got.Status != tt.status || got.ErrorCode() != tt.code || tt.who != "" && body.Principal.Name != tt.who {
			t.Errorf("%s: %s, want %d %s %s", tt.name, got, tt.status, tt.code, tt.who)
		}
		if tt.code != "" && got.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: a 401 without WWW-Authenticate", tt.name)
		}
	}

	out := s.Do("DELETE", s.API+"/admin/session", harness.WithOrigin(""), cookies(tossed+"; __Host-runtime_api_key="+own))
	lines := out.Header.Values("Set-Cookie")
	if out.Status != 204 || len(lines) < 3 ||
		lines[0] != "runtime_api_key=; Max-Age=0; Path=/; Secure; SameSite=Strict" ||
		lines[1] != "__Host-runtime_api_key=; Max-Age=0; Path=/; Secure; SameSite=Strict" ||
		!slices.Contains(lines, "runtime_api_key=; Max-Age=0; Path=/api; Domain=example.test; Secure; SameSite=Strict") {
		t.Fatalf("sign-out = %s, Set-Cookie %q", out, lines)
	}
	// Both sessions named by a cookie of the request ended: a copy of either is worthless.
	for name, token := range map[string]string{"own": own, "planted": planted} {
		if got := s.Get(s.API+"/admin/session", cookies("runtime_api_key="+token)); got.Status != 401 || got.ErrorCode() != "AUTH_REQUIRED" {
			t.Errorf("the %s session after signing out = %s", name, got)
		}
	}
}

// sameSiteWarning begins the start-up warning of workers served on the API's registrable
// domain.
const sameSiteWarning = `"msg":"workers are served on a host of the API's registrable domain`

// TestSameSiteWorkersWarning checks the start-up warning of workers on the API's registrable
// domain, where their pages can set cookies the API receives: it names both hosts and the
// remedy, and is absent when the workers' host is a site of its own.
func TestSameSiteWorkersWarning(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		config func(port int) harness.Config
		warns  bool
	}{
		{"two hosts of example.test", func(port int) harness.Config { return siblingConfig(port, false) }, true},
		{"workers_url on another site", func(port int) harness.Config {
			return harness.Config{Port: port, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, Hosts: []harness.Host{
				{Name: "admin.example.test", Runtime: "serve api cpanel\nworkers_url https://apps.example-usercontent.test"},
			}}
		}, false},
		{"localhost and apps.localhost", splitConfig, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := harness.Start(t, tt.config(harness.FreePort(t)))
			if n := s.LogCount("plugins loaded", 1); n < 1 {
				t.Fatal("the plugins were not loaded")
			}
			var warnings []string
			for _, line := range strings.Split(s.Logs(), "\n") {
				if strings.Contains(line, sameSiteWarning) {
					warnings = append(warnings, line)
				}
			}
			if !tt.warns {
				if len(warnings) > 0 {
					t.Errorf("warned: %q", warnings)
				}
				return
			}
			if len(warnings) != 1 {
				t.Fatalf("%d warnings, want 1: %q", len(warnings), warnings)
			}
			for _, want := range []string{`"level":"warn"`, `"api_host":"admin.example.test"`, `"workers_host":"apps.example.test"`, `"registrable_domain":"example.test"`, "workers.dev"} {
				if !strings.Contains(warnings[0], want) {
					t.Errorf("the warning lacks %s: %s", want, warnings[0])
				}
			}
		})
	}
}
