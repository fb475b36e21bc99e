package integration

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// panelProblems collects what the page must never do: log an error or throw.
type panelProblems struct {
	mu   sync.Mutex
	list []string
}

func (p *panelProblems) watch(t *testing.T, ctx context.Context) {
	t.Helper()
	err := chromedp.Listen(ctx, func(ev any) {
		var problem string
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				problem = fmt.Sprintf("console error: %v", e.Args)
			}
		case *runtime.EventExceptionThrown:
			problem = "exception: " + e.ExceptionDetails.Text
		case *cdplog.EventEntryAdded:
			// The browser's own errors, such as a content security policy refusing a script,
			// a style or a request; an API answer's status is the panel's business.
			if e.Entry.Level == cdplog.EntryLevelError && e.Entry.Source != cdplog.EntrySourceNetwork {
				problem = fmt.Sprintf("browser error (%s): %s", e.Entry.Source, e.Entry.Text)
			}
		}
		if problem != "" {
			p.mu.Lock()
			p.list = append(p.list, problem)
			p.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (p *panelProblems) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, problem := range p.list {
		t.Error(problem)
	}
}

// panel drives the cpanel of one runtime in a browser.
type panel struct {
	t    *testing.T
	ctx  context.Context
	base string // e.g. http://127.0.0.1:1234/cpanel
	shot string // where screenshots go
}

func (p panel) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

func (p panel) text(sel string) string {
	p.t.Helper()
	text, err := chromedp.Run(p.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		p.t.Fatalf("reading %s: %v", sel, err)
	}
	return text
}

func (p panel) signIn(key string) {
	p.t.Helper()
	p.do("signing in", chromedp.WaitVisible(chromedp.CSS("#key")), chromedp.SetValue(chromedp.CSS("#key"), key),
		chromedp.Click(chromedp.CSS("form.signin button[type=submit]")))
}

// onlyFrom checks that everything the page loaded came from origin.
func (p panel) onlyFrom(origin string) {
	p.t.Helper()
	urls, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string]("performance.getEntriesByType('resource').map(e => e.name)"))
	if err != nil {
		p.t.Fatal(err)
	}
	for _, u := range urls {
		if !strings.HasPrefix(u, origin+"/") {
			p.t.Errorf("the page requested %s, outside its origin %s", u, origin)
		}
	}
}

// screenshot writes the page at width px into the test's screenshot folder, for a reviewer,
// and returns to a desktop width, where the navigation is not folded behind Menu.
func (p panel) screenshot(name string, width int64) {
	p.t.Helper()
	p.do("resizing", chromedp.EmulateViewport(width, 900))
	p.capture(name, width)
	p.do("resizing back", chromedp.EmulateViewport(1280, 900))
}

// capture writes the page as it is, width px wide, into the screenshot folder.
func (p panel) capture(name string, width int64) {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(p.shot, fmt.Sprintf("%s-%d.png", name, width)), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// openPanel starts a browser (with the extra options, if any) for the panel of s, watching it
// for console errors.
func openPanel(t *testing.T, s *harness.Server, extra ...chromedp.ExecAllocatorOption) (panel, *panelProblems) {
	t.Helper()
	ctx := browser(t, extra...)
	problems := &panelProblems{}
	problems.watch(t, ctx)
	return panel{t: t, ctx: ctx, base: s.URL + "/cpanel", shot: screenshotDir(t)}, problems
}

// screenshotDir is where the browser tests leave screenshots: $RUNTIME_SCREENSHOTS, else
// bin/screenshots of the checkout.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("RUNTIME_SCREENSHOTS")
	if dir == "" {
		wd, _ := os.Getwd()
		dir = filepath.Join(filepath.Dir(wd), "bin", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCPanelSignIn loads the panel without a credential, refuses a wrong key with the
// server's message, signs in with the root key and a generated one, follows deep links across
// a reload, signs out, and stays on its own origin without a console error; also under an API
// prefix, where it finds the API through discovery.
func TestCPanelSignIn(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, runtime string }{{"default", ""}, {"api prefix", "api_prefix /_"}} {
		t.Run(tt.name, func(t *testing.T) {
			s := harness.Start(t, harness.Config{Runtime: tt.runtime, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
			viewer := s.CreateKey(rootKey, map[string]any{"name": "watcher", "role": "viewer"})
			p, problems := openPanel(t, s)
			ctx := p.ctx

			p.do("opening the panel", chromedp.Navigate(p.base+"/"), chromedp.WaitVisible(chromedp.CSS("form.signin")))
			if label := p.text("label[for=key]"); label != "API key" {
				t.Errorf("the key field is labelled %q", label)
			}
			if tt.name == "default" {
				p.screenshot("signin", 1280)
				p.screenshot("signin", 375)
			}
			p.signIn("rk_this-is-not-a-key-0123456789")
			p.do("waiting for the refusal", chromedp.WaitVisible(chromedp.CSS("form.signin .error")))
			if msg := p.text("form.signin .error"); !strings.Contains(msg, "neither the root key nor an active API key") || !strings.Contains(msg, "Request id") {
				t.Errorf("the refusal says %q, want the server's message and the request id", msg)
			}

			p.signIn(rootKey)
			p.do("waiting for the overview", chromedp.WaitVisible(chromedp.CSS("nav")), chromedp.WaitVisible(chromedp.CSS("#sessions-h")))
			if who := p.text(".who"); !strings.Contains(who, "root") {
				t.Errorf("signed in as %q", who)
			}
			if h := p.text("main h1"); h != "Overview" {
				t.Errorf("the first section is %q", h)
			}
			// The counts' labels are drawn at once, their values as they come: the section is
			// aria-busy until the last (the keys and the audit) has answered.
			p.do("waiting for the counts and the audit", chromedp.WaitVisible(chromedp.CSS("#audit-h")),
				chromedp.WaitVisible(chromedp.CSS(`section[aria-labelledby=runtime-h][aria-busy=false]`)))
			if counts := p.text("dl.counts"); !strings.Contains(counts, "Active keys") || !strings.Contains(counts, "ready") {
				t.Errorf("the overview counts say %q", counts)
			}
			if latest := p.text("table.audit"); !strings.Contains(latest, "session.login") || !strings.Contains(latest, "key.create") {
				t.Errorf("the latest actions say %q", latest)
			}
			if tt.name == "default" {
				p.screenshot("overview", 1280)
				p.screenshot("overview", 375)
			}
			// A deep link survives a reload, and back returns to the overview.
			p.do("opening keys", chromedp.Click(chromedp.CSS(`nav a[href$="/keys"]`)), chromedp.Sleep(0))
			p.do("reloading", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("nav")))
			if h := p.text("main h1"); h != "Keys" {
				t.Errorf("after a reload the section is %q, want Keys", h)
			}
			path, err := chromedp.Run(ctx, chromedp.Evaluate[string]("location.pathname"))
			if err != nil || path != "/cpanel/keys" {
				t.Errorf("the address is %q, %v", path, err)
			}
			p.do("going back", chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.CSS("#sessions-h")))
			// The overview's own requests finish first: any of them would meet the ended session.
			p.do("waiting for the overview", chromedp.WaitVisible(chromedp.CSS(`section[aria-labelledby=runtime-h][aria-busy=false]`)),
				chromedp.WaitVisible(chromedp.CSS(`table.sessions[aria-busy=false]`)))

			// The session ends on the server: the next request returns to sign-in, and signing in
			// again returns to the section the user was on.
			var sessions struct{ Sessions []struct{ ID int64 } }
			if resp := s.Get(s.API+"/admin/sessions", harness.WithKey(rootKey)); resp.Status != 200 || resp.JSON(&sessions) != nil || len(sessions.Sessions) != 1 {
				t.Fatalf("the root key's sessions = %s", resp)
			}
			if resp := s.Do("DELETE", fmt.Sprintf("%s/admin/sessions/%d", s.API, sessions.Sessions[0].ID), harness.WithKey(rootKey)); resp.Status != 204 && resp.Status != 200 {
				t.Fatalf("ending the panel's session = %s", resp)
			}
			p.do("opening apps with the session gone", chromedp.Click(chromedp.CSS(`nav a[href$="/apps"]`)), chromedp.WaitVisible(chromedp.CSS("form.signin")))
			p.signIn(rootKey)
			p.do("back on apps", chromedp.WaitVisible(chromedp.CSS("nav")))
			if h := p.text("main h1"); h != "Apps" {
				t.Errorf("after signing in again the section is %q, want Apps", h)
			}

			p.do("signing out", chromedp.Click(chromedp.Search(`//header//button[normalize-space()="Sign out"]`)), chromedp.WaitVisible(chromedp.CSS("form.signin")))
			p.signIn(viewer.Secret)
			p.do("waiting for the viewer's panel", chromedp.WaitVisible(chromedp.CSS("nav")))
			if who := p.text(".who"); !strings.Contains(who, "watcher") || !strings.Contains(who, "viewer") {
				t.Errorf("signed in as %q", who)
			}

			p.onlyFrom(s.URL)
			problems.check(t)
		})
	}
}

// TestCPanelServing checks the panel's answers without a browser: the app at every path
// below /cpanel/ with its security headers and no caching, hashed assets kept for a year.
func TestCPanelServing(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	if resp := s.Get("/cpanel"); resp.Status != 308 || resp.Header.Get("Location") != "/cpanel/" {
		t.Errorf("/cpanel = %s, want a redirect to /cpanel/", resp)
	}
	var asset string
	for _, path := range []string{"/cpanel/", "/cpanel/apps", "/cpanel/plugins/x/y"} {
		resp := s.Get(path)
		h := resp.Header
		if resp.Status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || h.Get("Cache-Control") != "no-cache" ||
			!strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("GET %s = %s %v", path, resp, h)
		}
		_, rest, _ := strings.Cut(body(resp), `src="./assets/`)
		asset, _, _ = strings.Cut(rest, `"`)
	}
	resp := s.Get("/cpanel/assets/" + asset)
	if resp.Status != 200 || resp.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" || !strings.Contains(resp.Header.Get("Content-Type"), "javascript") {
		t.Errorf("the script %s = %s %v", asset, resp, resp.Header)
	}
	if resp := s.Do("POST", "/cpanel/", harness.WithOrigin("")); resp.Status != 405 || resp.ErrorCode() != "METHOD_NOT_ALLOWED" {
		t.Errorf("POST /cpanel/ = %s", resp)
	}
}

// TestCPanelKeys creates a key in the panel, uses its secret against the API, checks that the
// secret is gone from the page after Done, revokes the key so that it stops working, and
// checks that a viewer is offered neither.
func TestCPanelKeys(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	viewer := s.CreateKey(rootKey, map[string]any{"name": "watcher", "role": "viewer"})
	p, problems := openPanel(t, s)
	ctx := p.ctx

	p.do("opening keys", chromedp.Navigate(p.base+"/keys"))
	p.signIn(rootKey)
	p.do("waiting for the table", chromedp.WaitVisible(chromedp.CSS("table.keys")), chromedp.WaitVisible(chromedp.CSS(`table.keys td`)))
	if h := p.text("main h1"); h != "Keys" {
		t.Fatalf("after sign-in the section is %q, want the one asked for", h)
	}
	p.screenshot("keys", 1280)
	p.screenshot("keys", 375)
	p.do("creating a key",
		chromedp.Click(chromedp.CSS(`main > p > button`)),
		chromedp.WaitVisible(chromedp.CSS("#k-name")),
		chromedp.SetValue(chromedp.CSS("#k-name"), "from-panel"),
		chromedp.SetValue(chromedp.CSS("#k-role"), "viewer"),
		chromedp.Click(chromedp.CSS(`dialog form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("code.secret")))
	secret := p.text("code.secret")
	if resp := s.Get(s.API+"/keys", harness.WithKey(secret)); resp.Status != 200 {
		t.Fatalf("the new key against the API = %s", resp)
	}
	p.do("done", chromedp.Click(chromedp.CSS(`dialog[open] button:last-child`)), chromedp.WaitNotPresent(chromedp.CSS("code.secret")))
	html, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.documentElement.outerHTML"))
	if err != nil || strings.Contains(html, secret) {
		t.Fatalf("the secret is still in the page after Done (%v)", err)
	}
	p.do("revoking it",
		chromedp.WaitVisible(chromedp.CSS(`button.danger[aria-label], table.keys button.danger`)),
		chromedp.Click(chromedp.Search(`//button[@aria-label="Revoke from-panel"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] button.danger`)),
		chromedp.Click(chromedp.CSS(`dialog[open] button.danger`)),
		chromedp.WaitNotPresent(chromedp.Search(`//button[@aria-label="Revoke from-panel"]`)))
	harness.Eventually(t, "the revoked key to stop working", 5*time.Second, func() bool {
		return s.Get(s.API+"/keys", harness.WithKey(secret)).Status == 401
	})

	// A viewer sees the keys but is offered no create and no revoke.
	p.do("signing out", chromedp.Click(chromedp.Search(`//header//button[normalize-space()="Sign out"]`)), chromedp.WaitVisible(chromedp.CSS("form.signin")))
	p.signIn(viewer.Secret)
	p.do("waiting for the viewer's table", chromedp.WaitVisible(chromedp.CSS(`table.keys td`)))
	buttons, err := chromedp.Run(ctx, chromedp.Evaluate[int]("document.querySelectorAll('main button').length"))
	if err != nil || buttons != 0 {
		t.Errorf("a viewer is offered %d buttons on keys (%v)", buttons, err)
	}
	problems.check(t)
}

// TestCPanelApps uploads an app through the panel's file picker, with the progress bar, and
// lists it as serving; shows a refused upload's message; on the app's page disables a version
// so that its path answers 404 and enables it again; and deletes the app from its row's
// actions menu after a confirmation.
func TestCPanelApps(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	p, problems := openPanel(t, s)
	ctx := p.ctx
	dir := t.TempDir()
	good := filepath.Join(dir, "site.tgz")
	if err := os.WriteFile(good, harness.TarGz(t, pkg("name: site\nversion: 1.0.0\n", harness.File{Name: "index.html", Body: "<p>from the panel</p>"})...), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.tgz")
	if err := os.WriteFile(bad, harness.TarGz(t, pkg("name: cpanel\nversion: 1.0.0\n")...), 0o644); err != nil {
		t.Fatal(err)
	}

	p.do("opening apps", chromedp.Navigate(p.base+"/apps"))
	p.signIn(rootKey)
	p.do("uploading", chromedp.WaitVisible(chromedp.CSS(".drop")),
		chromedp.SetUploadFiles(chromedp.CSS(`input[type=file]`), []string{good}),
		chromedp.WaitVisible(chromedp.CSS(".drop .ok")))
	if msg := p.text(".drop .ok"); !strings.Contains(msg, "Installed site 1.0.0") {
		t.Errorf("after the upload the panel says %q", msg)
	}
	if done, err := chromedp.Run(ctx, chromedp.Evaluate[float64]("document.querySelector('.drop progress').value")); err != nil || done != 1 {
		t.Errorf("the progress bar stopped at %v (%v)", done, err)
	}
	if resp := s.Get("/site/"); resp.Status != 200 || !strings.Contains(body(resp), "from the panel") {
		t.Fatalf("the uploaded app = %s", resp)
	}
	p.do("listing it as serving", chromedp.WaitVisible(chromedp.Search(`//table[contains(@class,"apps")]//tr[@data-app="site"]//span[contains(@class,"state")][normalize-space()="serving"]`)))
	if row := p.text(`tr[data-app="site"]`); !strings.Contains(row, "1.0.0") || !strings.Contains(row, "static files") {
		t.Errorf("the app's row says %q, want its served version and kind", row)
	}
	p.screenshot("apps", 1280)
	p.screenshot("apps", 375)

	p.do("uploading a refused archive",
		chromedp.SetUploadFiles(chromedp.CSS(`input[type=file]`), []string{bad}),
		chromedp.WaitVisible(chromedp.CSS(".drop .error")))
	if msg := p.text(".drop .error"); !strings.Contains(msg, "reserved") || !strings.Contains(msg, "Request id") {
		t.Errorf("the refusal says %q", msg)
	}

	// The versions and their actions are on the app's page, with each version's size (its
	// manifest and index.html).
	p.do("opening the app's page", chromedp.Click(chromedp.Search(`//table[contains(@class,"apps")]//a[normalize-space()="site"]`)),
		chromedp.WaitVisible(chromedp.Search(`//table[contains(@class,"versions")]//td[normalize-space()="47 B"]`)))
	p.do("disabling 1.0.0", chromedp.Click(chromedp.Search(`//button[@aria-label="Disable site 1.0.0"]`)),
		chromedp.WaitVisible(chromedp.Search(`//button[@aria-label="Enable site 1.0.0"]`)))
	if resp := s.Get("/site/"); resp.Status != 404 {
		t.Errorf("a disabled version is served: %s", resp)
	}
	p.do("enabling it", chromedp.Click(chromedp.Search(`//button[@aria-label="Enable site 1.0.0"]`)),
		chromedp.WaitVisible(chromedp.Search(`//button[@aria-label="Disable site 1.0.0"]`)))
	if resp := s.Get("/site/"); resp.Status != 200 {
		t.Errorf("the enabled version = %s", resp)
	}
	p.do("back to the list", chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.CSS(`tr[data-app="site"]`)))
	p.do("deleting the app from its menu", chromedp.Click(chromedp.CSS(`button[aria-label="Actions for site"]`)),
		chromedp.WaitVisible(chromedp.Search(`//*[@role="menuitem"][normalize-space()="Delete site"]`)),
		chromedp.Click(chromedp.Search(`//*[@role="menuitem"][normalize-space()="Delete site"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] button.danger`)),
		chromedp.Click(chromedp.CSS(`dialog[open] button.danger`)),
		chromedp.WaitNotPresent(chromedp.Search(`//a[normalize-space()="site"]`)))
	if resp := s.Get("/site/"); resp.Status != 404 {
		t.Errorf("a deleted app is served: %s", resp)
	}
	problems.check(t)
}

// TestCPanelPlugins lists plugins with their load state, reloads and shows the summary (a
// plugin left out with why), and disables one. A menu links under its plugin's base, and the
// menu of a plugin without a base to its path on the workers' site, a same-origin link.
func TestCPanelPlugins(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	plugin(t, s, "hello", "version: 1.0.0\nbase: /hello\nmenus:\n  - {title: Greeter, icon: wave, path: /hello/}\n"+respond("hi"), nil)
	plugin(t, s, "links", "version: 1.0.0\nmenus:\n  - {title: Shop admin, icon: cart, path: /shop/admin/}\n", nil)
	plugin(t, s, "broken", "version: 1.0.0\ndependencies: [missing]\n", nil)
	reload(t, s)
	p, problems := openPanel(t, s)

	p.do("opening plugins", chromedp.Navigate(p.base+"/plugins"))
	p.signIn(rootKey)
	p.do("waiting for the table", chromedp.WaitVisible(chromedp.CSS(`table.plugins td`)))
	p.do("waiting for the load states", chromedp.WaitVisible(chromedp.Search(`//td[contains(., "loaded (#1)")]`)))
	if got := p.text("table.plugins"); !strings.Contains(got, "failed: requires missing") || !strings.Contains(got, "/hello") {
		t.Errorf("the plugin table says %q", got)
	}
	if href, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('nav a[data-icon="wave"]').getAttribute('href')`)); err != nil || href != "/hello/" {
		t.Errorf("the plugin's menu links to %q (%v), want /hello/", href, err)
	}
	if href, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('nav a[data-icon="cart"]').href`)); err != nil || href != s.URL+"/shop/admin/" {
		t.Errorf("the menu of the plugin without a base links to %q (%v), want %s/shop/admin/", href, err, s.URL)
	}
	p.screenshot("plugins", 1280)
	p.screenshot("plugins", 375)
	p.do("reloading", chromedp.Click(chromedp.Search(`//button[normalize-space()="Reload plugins"]`)),
		chromedp.WaitVisible(chromedp.CSS(".summary")))
	if got := p.text(".summary"); !strings.Contains(got, "2 loaded (hello, links)") || !strings.Contains(got, "broken") {
		t.Errorf("the reload summary says %q", got)
	}
	p.do("disabling hello", chromedp.Click(chromedp.Search(`//button[@aria-label="Disable hello"]`)),
		chromedp.WaitVisible(chromedp.Search(`//button[@aria-label="Enable hello"]`)))
	harness.Eventually(t, "the disabled plugin's base to go", 5*time.Second, func() bool { return s.Get("/hello/").Status == 404 })
	problems.check(t)
}

// TestCPanelFiles browses an app's files, creates a folder, uploads a file into it, renames
// it and deletes it, checking each on disk; a folder where nothing may be written offers its
// write actions disabled.
func TestCPanelFiles(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	uploadOK(t, s, "workers", "site.tgz", harness.TarGz(t, pkg("name: site\nversion: 1.0.0\n", harness.File{Name: "index.html", Body: "<p>hi</p>"})...), rootKey)
	p, problems := openPanel(t, s)
	local := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(local, []byte("written from the panel"), 0o644); err != nil {
		t.Fatal(err)
	}
	version := filepath.Join(s.DataDir, "apps", "site", "1.0.0")
	folder := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Click(chromedp.Search(`//table[contains(@class,"files")]//button[normalize-space()="` + name + `/"]`))
	}

	p.do("opening files", chromedp.Navigate(p.base+"/files"))
	p.signIn(rootKey)
	p.do("opening the app's folder", chromedp.WaitVisible(chromedp.CSS("table.files td")), folder("apps"),
		chromedp.WaitVisible(chromedp.Search(`//button[normalize-space()="site/"]`)), folder("site"))
	p.do("waiting for the versions", chromedp.WaitVisible(chromedp.Search(`//button[normalize-space()="1.0.0/"]`)))
	disabled, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool]("document.querySelector('.tools button[type=submit]').disabled"))
	if err != nil || !disabled {
		t.Errorf("in a unit folder, where nothing may be written, Create folder is enabled (%v)", err)
	}
	p.do("opening the version", folder("1.0.0"), chromedp.WaitVisible(chromedp.Search(`//a[normalize-space()="index.html"]`)))
	p.screenshot("files", 1280)
	p.screenshot("files", 375)
	p.do("creating a folder", chromedp.SetValue(chromedp.CSS("#f-new"), "docs"), chromedp.Click(chromedp.CSS(".tools button[type=submit]")),
		chromedp.WaitVisible(chromedp.Search(`//button[normalize-space()="docs/"]`)))
	if info, err := os.Stat(filepath.Join(version, "docs")); err != nil || !info.IsDir() {
		t.Fatalf("the new folder on disk: %v", err)
	}
	p.do("uploading into it", folder("docs"), chromedp.WaitVisible(chromedp.Search(`//nav[contains(@class,"crumbs")]//button[normalize-space()="docs"]`)),
		chromedp.SetUploadFiles(chromedp.CSS(`.tools input[type=file]`), []string{local}),
		chromedp.WaitVisible(chromedp.Search(`//a[normalize-space()="notes.txt"]`)))
	if data, err := os.ReadFile(filepath.Join(version, "docs", "notes.txt")); err != nil || string(data) != "written from the panel" {
		t.Fatalf("the uploaded file on disk: %q, %v", data, err)
	}
	p.do("renaming it", chromedp.Click(chromedp.Search(`//button[@aria-label="Rename notes.txt"]`)),
		chromedp.SetValue(chromedp.CSS("#f-edit"), "readme.txt"), chromedp.Click(chromedp.Search(`//form//button[normalize-space()="Rename"]`)),
		chromedp.WaitVisible(chromedp.Search(`//a[normalize-space()="readme.txt"]`)))
	p.do("moving it up to the version folder", chromedp.Click(chromedp.Search(`//button[@aria-label="Move readme.txt"]`)),
		chromedp.SetValue(chromedp.CSS("#f-edit"), "apps/site/1.0.0"), chromedp.Click(chromedp.Search(`//form//button[normalize-space()="Move"]`)),
		chromedp.WaitNotPresent(chromedp.Search(`//a[normalize-space()="readme.txt"]`)))
	if data, err := os.ReadFile(filepath.Join(version, "readme.txt")); err != nil || string(data) != "written from the panel" {
		t.Fatalf("the moved file on disk: %q, %v", data, err)
	}
	p.do("deleting it", chromedp.Click(chromedp.Search(`//nav[contains(@class,"crumbs")]//button[normalize-space()="1.0.0"]`)),
		chromedp.Click(chromedp.Search(`//button[@aria-label="Delete readme.txt"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] button.danger`)), chromedp.Click(chromedp.CSS(`dialog[open] button.danger`)),
		chromedp.WaitNotPresent(chromedp.Search(`//a[normalize-space()="readme.txt"]`)))
	if _, err := os.Stat(filepath.Join(version, "readme.txt")); !os.IsNotExist(err) {
		t.Fatalf("the deleted file is still on disk: %v", err)
	}
	problems.check(t)
}

// TestCPanelLogs opens a process worker's logs from its row's actions menu, which brings them
// into view on the app's page, follows its output there and restarts it.
func TestCPanelLogs(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	processWorker(t, s, "echo", "1.0.0", "")
	echoOf(t, s.Get("/echo/"))
	p, problems := openPanel(t, s)

	p.do("opening apps", chromedp.Navigate(p.base+"/apps"))
	p.signIn(rootKey)
	p.do("opening the logs", chromedp.EmulateViewport(1280, 800), chromedp.Click(chromedp.CSS(`button[aria-label="Actions for echo"]`)),
		chromedp.Click(chromedp.Search(`//*[@role="menuitem"][normalize-space()="Logs"]`)),
		chromedp.WaitVisible(chromedp.Search(`//h2[contains(., "Output of echo") and contains(., "live")]`)),
		chromedp.WaitVisible(chromedp.Search(`//pre[contains(., "testworker listening")]`)))
	// The logs are at the end of the app's page: opening them scrolls them into view.
	if top, err := chromedp.Run(p.ctx, chromedp.Evaluate[float64](`document.getElementById('logs').getBoundingClientRect().top / innerHeight`)); err != nil || top < 0 || top >= 0.9 {
		t.Errorf("the opened logs start at %.2f of the window's height (%v), want them in view", top, err)
	}
	if resp := s.Get("/echo/say?text=said-while-watching"); resp.Status != 200 {
		t.Fatalf("say = %s", resp)
	}
	p.do("the new line", chromedp.WaitVisible(chromedp.Search(`//pre[contains(., "said-while-watching")]`)))
	// A worker's output is hostile: markup in it is shown as text, never made into elements.
	if resp := s.Get("/echo/say?text=" + url.QueryEscape(`<img src=x onerror="window.pwned=1">`)); resp.Status != 200 {
		t.Fatalf("say = %s", resp)
	}
	p.do("the markup line", chromedp.WaitVisible(chromedp.Search(`//pre[contains(., "<img src=x")]`)))
	if hostile, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`document.querySelector('section.logs img') !== null || window.pwned === 1`)); err != nil || hostile {
		t.Errorf("a worker's output became markup in the panel (%v)", err)
	}
	// Scrolled up from the logs (as a click on Restart scrolls), the page stays where the reader
	// put it while lines come: it must not jump back to the logs under the reader's click.
	p.do("scrolling to Restart", chromedp.ScrollIntoView(chromedp.CSS(`button[aria-label="Restart echo"]`)))
	if resp := s.Get("/echo/say?text=said-after-scrolling"); resp.Status != 200 {
		t.Fatalf("say = %s", resp)
	}
	p.do("the line after scrolling", chromedp.WaitVisible(chromedp.Search(`//pre[contains(., "said-after-scrolling")]`)))
	if shown, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => {
		const r = document.querySelector('button[aria-label="Restart echo"]').getBoundingClientRect()
		done(r.top >= 0 && r.bottom <= innerHeight)
	})))`, chromedp.EvalAwaitPromise)); err != nil || !shown {
		t.Errorf("a new log line moved the page away from where the reader scrolled (%v)", err)
	}
	p.do("restarting", chromedp.Click(chromedp.Search(`//button[@aria-label="Restart echo"]`)),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Restarted echo 1.0.0")]`)))
	harness.Eventually(t, "the restart to show in the pool", 5*time.Second, func() bool {
		procs := pool(t, s, rootKey)
		return len(procs) > 0 && procs[len(procs)-1].Restarts == 1
	})
	problems.check(t)
}
