package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// chartPoints is how many steps with something to show the chart id drew, from the stats the
// page fetched (its data-points), once the chart has a canvas; -1 without one.
func chartPoints(p panel, id string) int {
	p.t.Helper()
	n, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](`(() => {
		const f = document.querySelector('figure.chart[data-chart="`+id+`"]');
		return f && f.querySelector('canvas') ? Number(f.dataset.points) : -1;
	})()`))
	if err != nil {
		p.t.Fatalf("reading chart %s: %v", id, err)
	}
	return n
}

// waitChart waits for the chart id to have drawn a step with data: the page reads the stats
// again every 10 s.
func waitChart(p panel, id string) {
	p.t.Helper()
	_, err := poll[bool](p.ctx, `(() => {
		const f = document.querySelector('figure.chart[data-chart="`+id+`"]');
		return !!f && !!f.querySelector('canvas') && Number(f.dataset.points) > 0;
	})()`, 40*time.Second)
	if err != nil {
		p.t.Fatalf("waiting for chart %s to show data: %v", id, err)
	}
}

// fits checks that at the current width nothing in scope (a selector) reaches past the screen,
// and that the page does not scroll sideways.
func fits(p panel, width int, scope string) {
	p.t.Helper()
	wide, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`(() => {
		const scope = `+strconv.Quote(scope)+`;
		const out = [];
		const root = document.scrollingElement;
		if (root.scrollWidth > root.clientWidth) out.push('the page: ' + root.scrollWidth + ' > ' + root.clientWidth);
		// What is clipped away (headings kept for screen readers) takes no room on the screen.
		const clipped = (el) => { for (let e = el; e; e = e.parentElement) if (getComputedStyle(e).clipPath !== 'none') return true; return false; };
		for (const el of document.querySelectorAll(scope + ', ' + scope + ' *')) {
			if (clipped(el)) continue;
			const r = el.getBoundingClientRect();
			if (r.width > 0 && r.right > innerWidth + 1) out.push(el.tagName.toLowerCase() + '.' + el.className + ' ends at ' + Math.round(r.right));
		}
		return out.slice(0, 5);
	})()`))
	if err != nil {
		p.t.Fatal(err)
	}
	if len(wide) > 0 {
		p.t.Errorf("at %d px, wider than the screen: %v", width, wide)
	}
}

// TestCPanelAppPage deploys a static and a process worker with a key named deployer, sends
// them traffic, and opens each app's page from the Apps list: versions with the served one
// marked, the archive's SHA-256 and the uploader from the audit trail, charts drawn from the
// stats the page fetched, live logs with stderr told apart for the process worker only,
// Restart; the back button returns to the list; the overview charts the whole runtime.
func TestCPanelAppPage(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	deployer := s.CreateKey(rootKey, map[string]any{"name": "deployer", "role": "admin"}).Secret
	site := pkg("name: site\nversion: 1.0.0\nentrypoint: index.html\n", harness.File{Name: "index.html", Body: "<p>one</p>"})
	uploadOK(t, s, "workers", "site-1.tgz", harness.TarGz(t, site...), deployer)
	site = pkg("name: site\nversion: 1.1.0\nentrypoint: index.html\n", harness.File{Name: "index.html", Body: "<p>two</p>"})
	siteNew := uploadOK(t, s, "workers", "site-2.tgz", harness.TarGz(t, site...), deployer)
	echo := uploadOK(t, s, "workers", "echo.tgz", testWorkerArchive(t, "echo", "1.0.0", ""), deployer)
	for range 5 {
		echoOf(t, s.Get("/echo/"))
		if resp := s.Get("/site/"); resp.Status != 200 || !strings.Contains(body(resp), "two") {
			t.Fatalf("the static worker = %s", resp)
		}
	}
	for _, say := range []string{"/echo/say?text=said-on-stdout", "/echo/say?stream=stderr&text=said-on-stderr"} {
		if resp := s.Get(say); resp.Status != 200 {
			t.Fatalf("%s = %s", say, resp)
		}
	}

	p, problems := openPanel(t, s)
	p.do("opening apps", chromedp.Navigate(p.base+"/apps"))
	p.signIn(rootKey)
	p.do("opening echo's page from its name", chromedp.Click(chromedp.Search(`//table[contains(@class,"apps")]//a[normalize-space()="echo"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.versions tr[data-version="1.0.0"] .uploader`)))
	if h := p.text("main h1"); h != "echo" {
		t.Errorf("the page's heading is %q, want the app's name", h)
	}
	path, err := chromedp.Run(p.ctx, chromedp.Evaluate[string]("location.pathname"))
	if err != nil || path != "/cpanel/apps/echo" {
		t.Errorf("the app page's address is %q (%v)", path, err)
	}
	p.do("waiting for the uploader", chromedp.WaitVisible(chromedp.Search(`//td[contains(@class,"uploader")][contains(., "deployer")]`)))
	if mark := p.text(`tr[data-version="1.0.0"] .served-mark`); mark != "served" {
		t.Errorf("the served version is marked %q", mark)
	}
	sha, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('tr[data-version="1.0.0"] code.sha').dataset.sha256`))
	if err != nil || sha != echo.SHA256 {
		t.Errorf("the page shows SHA-256 %q (%v), want the upload's %q", sha, err, echo.SHA256)
	}
	if state := p.text(`tr[data-version="1.0.0"] td[data-label="State"]`); state != "enabled" {
		t.Errorf("the version's state is %q", state)
	}
	for _, id := range []string{"app-requests", "app-latency", "app-memory"} {
		waitChart(p, id)
	}
	if n := chartPoints(p, "app-errors"); n != 0 {
		t.Errorf("the error chart drew %d steps with errors, and there were none", n)
	}
	// The logs: live, each line marked with its stream, stderr not painted as an error.
	p.do("waiting for the logs", chromedp.WaitVisible(chromedp.Search(`//h2[contains(., "Output of echo") and contains(., "live")]`)),
		chromedp.WaitVisible(chromedp.Search(`//pre//span[contains(@class,"stderr")][contains(., "said-on-stderr")]`)),
		chromedp.WaitVisible(chromedp.Search(`//pre//span[contains(@class,"stdout")][contains(., "said-on-stdout")]`)))
	colors, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`['stdout', 'stderr'].map(s => {
		const line = [...document.querySelectorAll('section.logs .line.' + s)].pop();
		return getComputedStyle(line).color + ' ' + line.querySelector('.stream').textContent;
	})`))
	if err != nil || len(colors) != 2 || !strings.HasSuffix(colors[0], " out") || !strings.HasSuffix(colors[1], " err") ||
		strings.TrimSuffix(colors[0], " out") != strings.TrimSuffix(colors[1], " err") {
		t.Errorf("stdout and stderr lines: %q (%v); want the same text color, marked out and err", colors, err)
	}
	p.namesEveryControl("the app page")
	for _, width := range []int{1280, 375} {
		p.screenshot("app-process", int64(width))
		fits(p, width, "main")
	}
	p.do("restarting", chromedp.EmulateViewport(1280, 900), chromedp.Click(chromedp.Search(`//button[@aria-label="Restart echo"]`)),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Restarted echo 1.0.0")]`)))

	p.do("going back to the list", chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.CSS("table.apps")))
	if h := p.text("main h1"); h != "Apps" {
		t.Errorf("back from the app page, the heading is %q", h)
	}
	p.do("opening site's page", chromedp.Click(chromedp.Search(`//table[contains(@class,"apps")]//a[normalize-space()="site"]`)),
		chromedp.WaitVisible(chromedp.Search(`//tr[@data-version="1.1.0"]//td[contains(@class,"uploader")][contains(., "deployer")]`)))
	if mark := p.text(`tr.served`); !strings.Contains(mark, "1.1.0") {
		t.Errorf("the served row of site is %q, want 1.1.0", mark)
	}
	sha, err = chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('tr[data-version="1.1.0"] code.sha').dataset.sha256`))
	if err != nil || sha != siteNew.SHA256 {
		t.Errorf("site 1.1.0 shows SHA-256 %q (%v), want %q", sha, err, siteNew.SHA256)
	}
	waitChart(p, "app-requests")
	static, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]bool](`[!!document.querySelector('section.logs'), !!document.querySelector('[data-chart="app-memory"]'), !!document.querySelector('tr[data-version="1.0.0"] .served-mark')]`))
	if err != nil || static[0] || static[1] || static[2] {
		t.Errorf("a static app's page: logs %v, memory chart %v, 1.0.0 marked served %v (%v); want none", static[0], static[1], static[2], err)
	}
	for _, width := range []int{1280, 375} {
		p.screenshot("app-static", int64(width))
		fits(p, width, "main")
	}

	p.do("opening the overview", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(p.base+"/overview"),
		chromedp.WaitVisible(chromedp.CSS("#traffic-h")))
	waitChart(p, "runtime-requests")
	waitChart(p, "runtime-latency")
	for _, width := range []int{1280, 375} {
		p.screenshot("overview-charts", int64(width))
		fits(p, width, `section[aria-labelledby="traffic-h"]`)
	}
	problems.check(t)
}
