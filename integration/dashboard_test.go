package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// healthyAndNot starts a runtime with three apps: site (static, serving), crashy (a process
// worker that exits at once, crash-looping once requests have started it a few times) and sick
// (a process worker whose health check never passes, served anyway as its only version).
// Secrets are configured, as on a real server: an app's page lists them.
func healthyAndNot(t *testing.T) *harness.Server {
	t.Helper()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_SECRETS_KEY": newSecretsKey(t)}})
	uploadOK(t, s, "workers", "site.tgz", harness.TarGz(t, pkg("name: site\nversion: 1.0.0\n", harness.File{Name: "index.html", Body: "<p>hi</p>"})...), rootKey)
	key := harness.WithKey(rootKey)
	// Neither passes its check: the upload says so (422) and installs it all the same.
	for _, app := range []struct{ name, extra string }{
		{"crashy", "env: { EXIT_AT_START: '1' }\n"},
		{"sick", "healthcheck: { path: '/read?path=/no/such/file', timeout: 2s }\n"},
	} {
		if resp := s.Upload(s.API+"/workers/upload", app.name+".tgz", testWorkerArchive(t, app.name, "1.0.0", app.extra), key); resp.Status != 422 && resp.Status != 200 && resp.Status != 201 {
			t.Fatalf("uploading %s = %s", app.name, resp)
		}
	}
	harness.Eventually(t, "crashy to be crash-looping", 60*time.Second, func() bool {
		s.Get("/crashy/")
		for _, p := range pool(t, s, rootKey) {
			if p.Worker == "crashy" && p.State == "crash-looping" {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
		return false
	})
	for range 3 {
		s.Get("/site/")
	}
	return s
}

// stateOf reads the state a selector's element says, and whether it has the tone of a
// healthy state (the badge's classes).
func stateOf(p panel, sel string) (words string, good bool) {
	p.t.Helper()
	got, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`(() => {
		const e = document.querySelector(`+jsString(sel)+`);
		return e ? [e.textContent.trim(), e.className] : ['(none)', ''];
	})()`))
	if err != nil {
		p.t.Fatalf("reading %s: %v", sel, err)
	}
	return got[0], strings.Contains(" "+got[1]+" ", " good ") || strings.Contains(" "+got[1]+" ", " ok ")
}

// TestCPanelHealthShown: a crash-looping app and one whose check fails are shown as such,
// never in a healthy colour, on the overview (its cards count and name them), in the Apps
// list and on each app's page; the command palette (Ctrl-K) finds an app and opens its page.
func TestCPanelHealthShown(t *testing.T) {
	t.Parallel()
	s := healthyAndNot(t)
	p, problems := openPanel(t, s)
	p.do("opening the overview", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(p.base+"/"))
	p.signIn(rootKey)

	// The overview's cards.
	p.do("waiting for the cards", chromedp.WaitVisible(chromedp.CSS(`section[aria-labelledby=runtime-h][aria-busy=false]`)))
	for _, tt := range []struct{ stat, count, names string }{{"serving", "1", ""}, {"crash-looping", "1", "crashy"}, {"failing", "1", "sick"}} {
		card := p.text(`[data-stat="` + tt.stat + `"]`)
		if dd := p.text(`[data-stat="` + tt.stat + `"] dd`); dd != tt.count || !strings.Contains(card, tt.names) {
			t.Errorf("the %s card says %q (count %q), want %s naming %q", tt.stat, card, dd, tt.count, tt.names)
		}
	}
	for _, stat := range []string{"crash-looping", "failing"} {
		if bad, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`document.querySelector('[data-stat="`+stat+`"]').classList.contains('bad')`)); err != nil || !bad {
			t.Errorf("the %s card is not marked bad (%v)", stat, err)
		}
	}

	// The Apps list: one row per app, its state in words and colour.
	p.do("opening apps", chromedp.Click(chromedp.CSS(`nav a[href$="/apps"]`)), chromedp.WaitVisible(chromedp.CSS(`tr[data-app="crashy"]`)))
	for _, tt := range []struct{ app, words string }{{"site", "serving"}, {"crashy", "crash-looping"}, {"sick", "failing its check"}} {
		words, good := stateOf(p, `tr[data-app="`+tt.app+`"] .state`)
		if words != tt.words || good != (tt.app == "site") {
			t.Errorf("Apps shows %s as %q (healthy colour %v), want %q", tt.app, words, good, tt.words)
		}
	}
	green, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`['site', 'crashy', 'sick'].map(a => getComputedStyle(document.querySelector('tr[data-app="' + a + '"] .state')).color)`))
	if err != nil || green[1] == green[0] || green[2] == green[0] {
		t.Errorf("the state colours of site, crashy and sick are %v (%v): a failing app must not look like a serving one", green, err)
	}

	// Each app's page.
	for _, tt := range []struct{ app, words string }{{"crashy", "crash-looping"}, {"sick", "failing its check"}} {
		p.do("opening "+tt.app, chromedp.Navigate(p.base+"/apps/"+tt.app), chromedp.WaitVisible(chromedp.CSS(`.app-state .badge`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-version="1.0.0"]`)))
		if words, good := stateOf(p, `.app-state .badge`); words != tt.words || good {
			t.Errorf("the page of %s says %q (healthy colour %v), want %q", tt.app, words, good, tt.words)
		}
		if mark, good := stateOf(p, `tr[data-version="1.0.0"] .served-mark`); good || !strings.Contains(mark, tt.words) {
			t.Errorf("the served version of %s is marked %q (healthy colour %v)", tt.app, mark, good)
		}
		if text := p.text(`.app-state`); strings.Contains(text, "the next request starts one") {
			t.Errorf("the page of %s says %q", tt.app, text)
		}
	}
	p.do("waiting for the timeline", chromedp.WaitVisible(chromedp.CSS(`ol.timeline`)))
	if tl := p.text(`ol.timeline`); !strings.Contains(tl, "uploaded 1.0.0") || !strings.Contains(tl, "root") || !strings.Contains(tl, "failed its check") {
		t.Errorf("sick's timeline says %q, want its upload by root and its failed check", tl)
	}

	// The charts start where the data starts: on a server up for a minute, not an hour ago.
	p.do("waiting for the charts", chromedp.WaitVisible(chromedp.CSS(`figure.chart[data-chart="app-requests"] canvas`)))
	from, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]float64](`[...document.querySelectorAll('figure.chart')].map(f => Date.now() / 1000 - Number(f.dataset.from))`))
	if err != nil || len(from) == 0 {
		t.Fatalf("reading where the charts start: %v %v", from, err)
	}
	for i, ago := range from {
		if ago > 10*60 {
			t.Errorf("chart %d starts %.0f s ago, on a server up for a minute or two", i, ago)
		}
	}

	// The theme: the toggle goes from the system's to light to dark, and the browser keeps it.
	p.do("choosing light, then dark", chromedp.Click(chromedp.CSS(`button.theme`)), chromedp.Click(chromedp.CSS(`button.theme`)),
		chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`.app-state .badge`)))
	bg, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]float64](`getComputedStyle(document.documentElement).backgroundColor.match(/[\d.]+/g).slice(0, 3).map(Number)`))
	if err != nil || len(bg) != 3 || luminance(bg) > 0.2 {
		t.Errorf("after choosing dark and a reload, the background is %v (%v), want a dark one", bg, err)
	}

	// The command palette: Ctrl-K, type, Enter.
	p.do("opening the palette", chromedp.KeyEvent("k", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		chromedp.WaitVisible(chromedp.CSS(`[role=dialog] input`)), chromedp.WaitVisible(chromedp.CSS(`[role=dialog] [role=listbox]`)),
		chromedp.WaitVisible(chromedp.Search(`//*[@role="option"][contains(., "crashy")]`)))
	p.namesEveryControl("the command palette")
	// The arrow keys move the active option, which the field names for screen readers.
	active := func() string {
		id, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('[role=dialog] input').getAttribute('aria-activedescendant') + ' ' +
			document.querySelectorAll('[role=option][aria-selected=true]').length`))
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	first := active()
	p.do("moving down", chromedp.KeyEvent(kb.ArrowDown))
	if second := active(); second == first || !strings.HasSuffix(second, " 1") {
		t.Errorf("after ArrowDown the active option is %q, before it %q; want another, and one option selected", second, first)
	}
	p.do("finding crashy", chromedp.SendKeys(chromedp.CSS(`[role=dialog] input`), "app crashy"), chromedp.Sleep(200*time.Millisecond), chromedp.KeyEvent("\r"),
		chromedp.WaitNotPresent(chromedp.CSS(`[role=dialog]`)), chromedp.WaitVisible(chromedp.CSS(`.app-state .badge`)))
	if path, err := chromedp.Run(p.ctx, chromedp.Evaluate[string]("location.pathname")); err != nil || path != "/cpanel/apps/crashy" {
		t.Errorf("Enter on the palette's first match opened %q (%v), want crashy's page", path, err)
	}
	problems.check(t)
}

// TestCPanelSections opens every section at 1280×800 and 375×812: nothing wider than the
// screen, no console error, and a screenshot of each. With RUNTIME_DOCS_SCREENSHOTS set (make
// screenshots) they are written to docs/screenshots/<section>-<width>.png, which the docs show.
func TestCPanelSections(t *testing.T) {
	t.Parallel()
	s := healthyAndNot(t)
	plugin(t, s, "hello", "version: 1.0.0\nbase: /hello\nmenus:\n  - {title: Greeter, icon: wave, path: /hello/}\n"+respond("hi"), nil)
	reload(t, s)
	s.CreateKey(rootKey, map[string]any{"name": "deployer", "role": "editor"})
	p, problems := openPanel(t, s)
	dir := p.shot
	if os.Getenv("RUNTIME_DOCS_SCREENSHOTS") != "" {
		wd, _ := os.Getwd()
		dir = filepath.Join(filepath.Dir(wd), "docs", "screenshots")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sections := []struct{ name, path, ready string }{
		{"overview", "", `section[aria-labelledby=runtime-h][aria-busy=false]`},
		{"apps", "apps", `tr[data-app="crashy"] .state`},
		{"app", "apps/sick", `ol.timeline`},
		{"keys", "keys", `table.keys td`},
		{"plugins", "plugins", `table.plugins td`},
		{"files", "files", `table.files td`},
	}
	p.do("signing in", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(p.base+"/"))
	p.signIn(rootKey)
	p.do("waiting for the panel", chromedp.WaitVisible(chromedp.CSS("nav")))
	for _, size := range [][2]int64{{1280, 800}, {375, 812}} {
		for _, sec := range sections {
			p.do("opening "+sec.name, chromedp.EmulateViewport(size[0], size[1]), chromedp.Navigate(p.base+"/"+sec.path),
				chromedp.WaitVisible(chromedp.CSS(sec.ready)))
			if sec.name == "overview" || sec.name == "app" { // their charts draw once uPlot has come
				if _, err := poll[bool](p.ctx, `document.querySelectorAll('figure.chart canvas').length > 0`, 20*time.Second); err != nil {
					t.Fatalf("waiting for the charts of %s: %v", sec.name, err)
				}
			}
			t.Logf("%s at %d px", sec.name, size[0])
			fits(p, int(size[0]), "body")
			png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
			if err != nil {
				t.Fatalf("screenshot of %s: %v", sec.name, err)
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.png", sec.name, size[0])), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	problems.check(t)
}
