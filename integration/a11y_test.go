package integration

import (
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// TestCPanelAccessible uses the panel from the keyboard alone: signing in, moving between
// sections, opening the create-key dialog, which keeps the focus inside it and closes on
// Escape, with a visible focus ring on every control reached; every control of every section
// has an accessible name as Chromium computes it; and the panel turns dark with the system.
func TestCPanelAccessible(t *testing.T) {
	t.Parallel()
	s := furnished(t)
	s.CreateKey(rootKey, map[string]any{"name": "deployer", "role": "editor"}) // a row in Keys
	p, problems := openPanel(t, s)

	p.do("opening the panel", chromedp.Navigate(p.base+"/"), chromedp.WaitVisible(chromedp.CSS("#key")))
	p.tabTo(`#key`)
	p.do("typing the key and Enter", chromedp.KeyEvent(rootKey), chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS("nav")))
	p.namesEveryControl("overview")

	for _, section := range []string{"Apps", "Plugins", "Files", "Keys"} {
		p.tabTo(`nav a[href$="/` + strings.ToLower(section) + `"]`)
		p.do("opening "+section+" with Enter", chromedp.KeyEvent("\r"),
			chromedp.WaitVisible(chromedp.Search(`//main/h1[normalize-space()="`+section+`"]`)))
		p.do("waiting for "+section, chromedp.WaitVisible(chromedp.CSS("main table td")))
		p.namesEveryControl(strings.ToLower(section))
	}

	// The create-key dialog: opened with Enter, the focus stays inside it, Escape closes it and
	// the focus returns to the button that opened it.
	p.tabTo(`main p > button`)
	p.do("opening Create key", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS("dialog[open] #k-name")))
	p.namesEveryControl("the create-key dialog")
	for i := range 12 {
		p.do("tabbing", chromedp.KeyEvent("\t"))
		inside, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`document.querySelector('dialog[open]').contains(document.activeElement)`))
		if err != nil || !inside {
			t.Fatalf("after %d tabs the focus left the dialog (%v)", i+1, err)
		}
		p.hasFocusRing()
	}
	p.do("tabbing backwards out of the first control", chromedp.Focus(chromedp.CSS("#k-name")), chromedp.KeyEvent("\t", chromedp.KeyModifiers(chromedp.ModifierShift)))
	if inside, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`document.querySelector('dialog[open]').contains(document.activeElement)`)); err != nil || !inside {
		t.Errorf("Shift+Tab from the first control left the dialog (%v)", err)
	}
	p.do("closing with Escape", chromedp.KeyEvent(kb.Escape), chromedp.WaitNotPresent(chromedp.CSS("dialog[open]")))
	if label, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.activeElement.textContent`)); err != nil || label != "Create key" {
		t.Errorf("after Escape the focus is on %q (%v), want the Create key button", label, err)
	}

	// Dark when the system is.
	if _, err := chromedp.Call(p.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatal(err)
	}
	bg, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]float64](`getComputedStyle(document.documentElement).backgroundColor.match(/[\d.]+/g).slice(0, 3).map(Number)`))
	if err != nil || len(bg) != 3 || luminance(bg) > 0.2 {
		t.Errorf("with a dark system the background is %v (%v), want a dark one", bg, err)
	}
	p.screenshot("keys-dark", 1280)
	problems.check(t)
}

// tabTo presses Tab until the element matching sel has the focus, checking the focus ring of
// each control on the way.
func (p panel) tabTo(sel string) {
	p.t.Helper()
	for range 40 {
		p.do("tabbing", chromedp.KeyEvent("\t"))
		there, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`document.activeElement === document.querySelector(`+jsString(sel)+`)`))
		if err != nil {
			p.t.Fatal(err)
		}
		if there {
			p.hasFocusRing()
			return
		}
		// Past the page's last control the focus leaves the page (for the browser's own
		// controls) before it comes back to the first: there is no ring to see on the way.
		if onPage, _ := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`document.activeElement !== document.body`)); onPage {
			p.hasFocusRing()
		}
	}
	p.t.Fatalf("40 presses of Tab never reached %s", sel)
}

// hasFocusRing checks that the focused control shows a focus ring.
func (p panel) hasFocusRing() {
	p.t.Helper()
	ring, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(() => {
		const e = document.activeElement
		if (!e || e === document.body) return 'none on body'
		const s = getComputedStyle(e.matches('input[type=file]') ? e.parentElement : e)
		return s.outlineStyle === 'none' || parseFloat(s.outlineWidth) < 2 ? 'none on ' + e.outerHTML.slice(0, 80) : 'ok'
	})()`))
	if err != nil || ring != "ok" {
		p.t.Errorf("focus ring: %s (%v)", ring, err)
	}
}

// namesEveryControl checks, in Chromium's accessibility tree, that every control of the page
// has an accessible name.
func (p panel) namesEveryControl(where string) {
	p.t.Helper()
	tree, err := chromedp.Call(p.ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		p.t.Fatal(err)
	}
	controls := 0
	for _, n := range tree.Nodes {
		if n.Ignored || n.Role == nil {
			continue
		}
		role := strings.Trim(string(n.Role.Value), `"`)
		switch role {
		case "button", "link", "textbox", "combobox", "checkbox", "searchbox", "radio", "menuitem", "tab":
		default:
			continue
		}
		controls++
		if n.Name == nil || strings.Trim(string(n.Name.Value), `" `) == "" {
			p.t.Errorf("in %s, a %s has no accessible name (DOM node %d)", where, role, n.BackendDOMNodeID)
		}
	}
	if controls == 0 {
		p.t.Errorf("in %s, the accessibility tree has no control at all", where)
	}
}

// luminance is the relative luminance of an sRGB colour given as 0–255 components.
func luminance(rgb []float64) float64 {
	lin := func(c float64) float64 {
		c /= 255
		if c <= 0.03928 {
			return c / 12.92
		}
		return math.Pow((c+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(rgb[0]) + 0.7152*lin(rgb[1]) + 0.0722*lin(rgb[2])
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// TestCPanelViewer signs in with a viewer key and finds no write action offered in any
// section: no upload, no enable, disable, delete, restart, reload, create, revoke, rename or
// move.
func TestCPanelViewer(t *testing.T) {
	t.Parallel()
	s := furnished(t)
	viewer := s.CreateKey(rootKey, map[string]any{"name": "watcher", "role": "viewer"})
	p, problems := openPanel(t, s)
	p.do("opening the panel", chromedp.Navigate(p.base+"/apps"))
	p.signIn(viewer.Secret)

	writes := regexp.MustCompile(`^(Upload|Enable|Disable|Delete|Restart|Reload|Create|Revoke|Rename|Move|Copy)\b`)
	offered := func(where string) {
		t.Helper()
		buttons, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](
			`[...document.querySelectorAll('main button:not([disabled]), main input[type=file]:not([disabled])')].map(b => b.type === 'file' ? 'Upload (file input)' : b.textContent.trim())`))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range buttons {
			if writes.MatchString(b) {
				t.Errorf("in %s a viewer is offered %q", where, b)
			}
		}
	}
	p.do("waiting for the apps", chromedp.WaitVisible(chromedp.CSS("table.apps td")))
	offered("apps")
	for _, section := range []string{"plugins", "keys"} {
		p.do("opening "+section, chromedp.Click(chromedp.CSS(`nav a[href$="/`+section+`"]`)),
			chromedp.WaitVisible(chromedp.CSS("table."+section+" td")))
		offered(section)
	}
	p.do("opening the version's files", chromedp.Click(chromedp.CSS(`nav a[href$="/files"]`)),
		chromedp.Click(chromedp.Search(`//table[contains(@class,"files")]//button[normalize-space()="apps/"]`)),
		chromedp.Click(chromedp.Search(`//table[contains(@class,"files")]//button[normalize-space()="site/"]`)),
		chromedp.Click(chromedp.Search(`//table[contains(@class,"files")]//button[normalize-space()="1.0.0/"]`)),
		chromedp.WaitVisible(chromedp.Search(`//a[normalize-space()="index.html"]`)))
	offered("files")
	problems.check(t)
}

// furnished starts a runtime with something in every section: an app, a loaded plugin, and
// (by its root key) sessions and audit entries.
func furnished(t *testing.T) *harness.Server {
	t.Helper()
	s := startWithRoot(t)
	uploadOK(t, s, "workers", "site.tgz", harness.TarGz(t, pkg("name: site\nversion: 1.0.0\n", harness.File{Name: "index.html", Body: "<p>hi</p>"})...), rootKey)
	plugin(t, s, "hello", "version: 1.0.0\nbase: /hello\n"+respond("hi"), nil)
	reload(t, s)
	return s
}

// TestCPanelMounted runs the panel with the runtime mounted below a path in each supported
// form: it signs in, moves between sections with addresses below the mount, and keeps the
// section across a reload.
func TestCPanelMounted(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, Sites: mountedSites, Mount: "/hp"})
	p, problems := openPanel(t, s)
	for _, at := range []string{"/hp", "/x", "/rt"} {
		p.base = s.URL + at + "/cpanel"
		p.do("opening the panel below "+at, chromedp.Navigate(p.base+"/"))
		p.signIn(rootKey)
		p.do("opening Apps below "+at, chromedp.WaitVisible(chromedp.CSS("nav")), chromedp.Click(chromedp.CSS(`nav a[href$="/apps"]`)),
			chromedp.WaitVisible(chromedp.Search(`//main/h1[normalize-space()="Apps"]`)),
			chromedp.Reload(), chromedp.WaitVisible(chromedp.Search(`//main/h1[normalize-space()="Apps"]`)))
		if path, err := chromedp.Run(p.ctx, chromedp.Evaluate[string]("location.pathname")); err != nil || path != at+"/cpanel/apps" {
			t.Errorf("below %s the address is %q (%v)", at, path, err)
		}
		p.do("signing out", chromedp.Click(chromedp.Search(`//header//button[normalize-space()="Sign out"]`)), chromedp.WaitVisible(chromedp.CSS("form.signin")))
	}
	p.onlyFrom(s.URL)
	problems.check(t)
}
