package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/accessibility"
	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// sidewaysJS lists what scrolls sideways in the page: the page itself, and every rendered
// element whose content is wider than its box or that reaches past the right edge of the
// window. Visually hidden elements (clipped to nothing for screen readers, or the file input
// inside its label) are left out: nobody sees or scrolls them.
const sidewaysJS = `(() => {
	const out = []
	const doc = document.documentElement
	if (doc.scrollWidth > doc.clientWidth) out.push('the page: ' + doc.scrollWidth + ' > ' + doc.clientWidth)
	const hidden = (e) => {
		for (; e; e = e.parentElement) {
			const s = getComputedStyle(e)
			if (s.clipPath.startsWith('inset(50%') || (e.matches('label.file input') && s.opacity === '0')) return true
		}
		return false
	}
	const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && typeof e.className === 'string' ? '.' + e.className.trim().split(/\s+/).join('.') : '') +
		' "' + (e.textContent || '').trim().slice(0, 40) + '"'
	for (const e of document.querySelectorAll('body *')) {
		if (e.getClientRects().length === 0 || hidden(e)) continue
		if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).display !== 'inline') out.push(name(e) + ': content ' + e.scrollWidth + ' > box ' + e.clientWidth)
		else if (e.getBoundingClientRect().right > window.innerWidth + 1) out.push(name(e) + ': right edge ' + Math.round(e.getBoundingClientRect().right) + ' > window ' + window.innerWidth)
	}
	return out
})()`

// fits checks that nothing in the page scrolls sideways, then writes its screenshot.
func (p panel) fits(where string, width int64) {
	p.t.Helper()
	wide, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](sidewaysJS))
	if err != nil {
		p.t.Fatalf("measuring %s: %v", where, err)
	}
	for _, w := range wide {
		p.t.Errorf("at %d px, in %s, sideways: %s", width, where, w)
	}
	p.capture("fit-"+where, width)
}

// controlNames returns the accessible names of the page's buttons and links, as Chromium
// computes them.
func (p panel) controlNames() []string {
	p.t.Helper()
	tree, err := chromedp.Call(p.ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		p.t.Fatal(err)
	}
	var names []string
	for _, n := range tree.Nodes {
		if n.Ignored || n.Role == nil || n.Name == nil {
			continue
		}
		if role := strings.Trim(string(n.Role.Value), `"`); role == "button" || role == "link" || role == "menuitem" {
			names = append(names, strings.Trim(string(n.Name.Value), `"`))
		}
	}
	return names
}

// hasControls checks that each of want is the accessible name of a button, link or menu item.
func (p panel) hasControls(where string, want ...string) {
	p.t.Helper()
	names := p.controlNames()
	for _, w := range want {
		if !slices.Contains(names, w) {
			p.t.Errorf("in %s no control is named %q; the names are %q", where, w, names)
		}
	}
}

// agents are the User-Agents of sessions the layout test begins, with the names the panel
// gives them.
var agents = []struct{ ua, name string }{
	{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "Chrome on macOS"},
	{"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0", "Firefox on Linux"},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1", "Safari on iOS"},
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0", "Edge on Windows"},
	{"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36", "Chrome on Android"},
	{"curl/8.5.0", "curl"},
	{"", "an unknown browser"},
}

// TestCPanelFits opens every section at 1280 and 375 px, with long names in every table, and
// finds nothing that scrolls sideways, neither the page nor a box in it; at 375 px rows are
// cards and the sections are behind a Menu button. Action buttons say the action and name
// the unit in their accessible name. Sign-in says where a first key comes from. Each view is
// written as a screenshot (fit-<section>-<width>.png).
func TestCPanelFits(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	const app = "@team/a-rather-long-application-name-for-layout"
	for _, v := range []string{"1.0.0", "2.0.0-release-candidate.1234567890"} {
		uploadOK(t, s, "workers", "app.tgz", harness.TarGz(t, pkg("name: '"+app+"'\nversion: "+v+"\n",
			harness.File{Name: "index.html", Body: "<p>hi</p>"},
			harness.File{Name: "a-file-with-an-unusually-long-name-that-does-not-fit-on-a-phone-screen.txt", Body: "x"})...), rootKey)
	}
	plugin(t, s, "hello", "version: 1.0.0\nbase: /hello\nmenus:\n  - {title: Greeter, icon: wave, path: /hello/}\n"+respond("hi"), nil)
	reload(t, s)
	s.CreateKey(rootKey, map[string]any{"name": "a-deploy-key-for-the-continuous-integration-pipeline", "role": "editor", "namespaces": []string{"@team"}})
	for _, a := range agents {
		loginCookie(t, s, rootKey, harness.WithHeader("User-Agent", a.ua))
	}
	for _, width := range []int64{1280, 375} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			t.Parallel()
			p, problems := openPanel(t, s)
			p.do("resizing", chromedp.EmulateViewport(width, 900))

			// Sign-in says where a first key comes from.
			p.do("opening the panel", chromedp.Navigate(p.base+"/"), chromedp.WaitVisible(chromedp.CSS("form.signin")))
			if hint := p.text(".signin .hint"); !strings.Contains(hint, "bootstrap-key") || !strings.Contains(hint, "state_dir") || !strings.Contains(hint, "root_key") {
				t.Errorf("the sign-in hint says %q, want the bootstrap key file under state_dir and the root key setting", hint)
			}
			if described, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.getElementById(document.querySelector('#key').getAttribute('aria-describedby')).className`)); err != nil || described != "hint" {
				t.Errorf("the key field is described by %q (%v), want the hint", described, err)
			}
			p.fits("signin", width)
			p.signIn(rootKey)

			open := func(section, ready string) {
				t.Helper()
				p.do("opening "+section, chromedp.Navigate(p.base+"/"+section), chromedp.WaitVisible(chromedp.CSS(ready)))
			}
			open("overview", `table.audit td`)
			p.do("waiting for the overview", chromedp.WaitVisible(chromedp.CSS(`section[aria-busy=false]`)), chromedp.WaitVisible(chromedp.CSS(`table.sessions[aria-busy=false] td`)))
			p.fits("overview", width)
			open("apps", `table.apps td`)
			p.fits("apps", width)
			// The app's actions are in one menu; its versions' actions on its page.
			p.hasControls("apps", "Actions for "+app)
			p.do("opening the app's menu", chromedp.Click(chromedp.CSS(`button[aria-label="Actions for `+app+`"]`)),
				chromedp.WaitVisible(chromedp.CSS(`[role=menu]`)))
			p.fits("apps-menu", width)
			p.hasControls("the app's menu", "Open the page of "+app, "Delete "+app)
			p.do("closing the menu", chromedp.KeyEvent(kb.Escape), chromedp.WaitNotPresent(chromedp.CSS(`[role=menu]`)))
			open("apps/"+app, `table.versions td`)
			p.fits("app", width)
			p.hasControls("app", "Disable "+app+" 1.0.0", "Delete "+app+" 1.0.0")
			if text := p.text(`button[aria-label="Disable ` + app + ` 1.0.0"]`); text != "Disable" {
				t.Errorf("the disable button says %q, want Disable", text)
			}
			open("plugins", `table.plugins td`)
			p.fits("plugins", width)
			p.hasControls("plugins", "Disable hello")
			open("keys", `table.keys td`)
			p.fits("keys", width)
			p.hasControls("keys", "Revoke a-deploy-key-for-the-continuous-integration-pipeline")
			open("files", `table.files td`)
			for _, folder := range []string{"apps", "@team", "a-rather-long-application-name-for-layout", "2.0.0-release-candidate.1234567890"} {
				p.do("opening "+folder, chromedp.Click(chromedp.Search(`//table[contains(@class,"files")]//button[normalize-space()="`+folder+`/"]`)),
					chromedp.WaitVisible(chromedp.Search(`//nav[contains(@class,"crumbs")]//button[normalize-space()="`+folder+`"]`)))
			}
			p.do("waiting for the files", chromedp.WaitVisible(chromedp.Search(`//a[normalize-space()="index.html"]`)))
			p.fits("files", width)
			p.hasControls("files", "Rename index.html", "Move index.html", "Delete index.html")

			menu, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`document.querySelector('.menu-toggle').getClientRects().length > 0`))
			if err != nil || menu != (width == 375) {
				t.Errorf("at %d px the Menu button shows: %v (%v)", width, menu, err)
			}
			if width == 375 {
				// Rows are cards: a cell is a block, labelled with its column.
				if display, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('table.files td')).display`)); err != nil || display != "block" {
					t.Errorf("at 375 px a cell is displayed %q (%v), want block (a card)", display, err)
				}
				// The sections are behind Menu, which opens and closes them.
				p.do("waiting for Menu", chromedp.WaitVisible(chromedp.Search(`//button[normalize-space()="Menu"]`)), chromedp.WaitNotVisible(chromedp.CSS(`nav#sections`)))
				if expanded, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('.menu-toggle').getAttribute('aria-expanded')`)); err != nil || expanded != "false" {
					t.Errorf("Menu's aria-expanded = %q (%v)", expanded, err)
				}
				p.do("opening Menu", chromedp.Click(chromedp.Search(`//button[normalize-space()="Menu"]`)), chromedp.WaitVisible(chromedp.CSS(`nav#sections a[href$="/keys"]`)))
				p.fits("menu", width)
				p.do("choosing Keys", chromedp.Click(chromedp.CSS(`nav#sections a[href$="/keys"]`)),
					chromedp.WaitVisible(chromedp.Search(`//main/h1[normalize-space()="Keys"]`)), chromedp.WaitNotVisible(chromedp.CSS(`nav#sections`)))
			}
			problems.check(t)
		})
	}
}

// TestCPanelSessions names the sessions by browser and system, and "End all other sessions"
// ends every one but the panel's own.
func TestCPanelSessions(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	for _, a := range agents {
		loginCookie(t, s, rootKey, harness.WithHeader("User-Agent", a.ua))
	}
	p, problems := openPanel(t, s)
	p.do("opening the overview", chromedp.Navigate(p.base+"/overview"))
	p.signIn(rootKey)
	p.do("waiting for the sessions", chromedp.WaitVisible(chromedp.CSS(`table.sessions[aria-busy=false] td`)))
	names, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('table.sessions td.agent')].map(td => td.textContent.trim())`))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, a := range agents {
		want = append(want, a.name)
	}
	want = append(want, "Headless Chrome on Linux (this one)") // the panel's own
	if !slices.Equal(names, want) {
		t.Errorf("the sessions are named %q, want %q", names, want)
	}
	p.hasControls("overview", "End session 1 (Chrome on macOS)", "End this session (Headless Chrome on Linux) and sign out")
	p.screenshot("sessions", 1280)
	p.screenshot("sessions", 375)
	p.do("ending the others", chromedp.Click(chromedp.Search(`//button[normalize-space()="End all other sessions"]`)),
		chromedp.WaitVisible(chromedp.Search(`//*[@role="status" and normalize-space()="Ended 7 other sessions."]`)),
		chromedp.WaitNotPresent(chromedp.Search(`//button[normalize-space()="End all other sessions"]`)))
	names, _ = chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('table.sessions td.agent')].map(td => td.textContent.trim())`))
	if len(names) != 1 || names[0] != "Headless Chrome on Linux (this one)" {
		t.Errorf("after ending the others the panel lists %q", names)
	}
	var list api.SessionList
	if resp := s.Get(s.API+"/admin/sessions", harness.WithKey(rootKey)); resp.JSON(&list) != nil || len(list.Sessions) != 1 {
		t.Errorf("after ending the others the root key has sessions %s", resp)
	}
	problems.check(t)
}

// TestCPanelPluginMenus runs the panel with workers on their own origin: a plugin's menu links
// to its page there (workers_url, from discovery), and the menus follow a reload and a
// disable without reloading the panel.
func TestCPanelPluginMenus(t *testing.T) {
	t.Parallel()
	port := harness.FreePort(t)
	s := harness.Start(t, splitConfig(port))
	plugin(t, s, "hello", "version: 1.0.0\nbase: /hello\nmenus:\n  - {title: Greeter, icon: wave, path: /hello/}\n"+respond("hi"), nil)
	reload(t, s)
	p, problems := openPanel(t, s)
	p.base = fmt.Sprintf("http://localhost:%d/cpanel", port)
	workers := fmt.Sprintf("http://apps.localhost:%d", port)

	p.do("opening plugins", chromedp.Navigate(p.base+"/plugins"))
	p.signIn(rootKey)
	p.do("waiting for the menu", chromedp.WaitVisible(chromedp.CSS(`nav a[data-icon="wave"]`)))
	if href, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('nav a[data-icon="wave"]').href`)); err != nil || href != workers+"/hello/" {
		t.Errorf("the plugin's menu links to %q (%v), want %s/hello/ (workers_url)", href, err, workers)
	}
	if resp := s.Host("apps.localhost").Get("/hello/"); resp.Status != 200 || body(resp) != "hi" {
		t.Errorf("the menu's page on the workers' origin = %s", resp)
	}

	// A plugin installed on disk shows its menu after Reload plugins, without reloading the panel.
	plugin(t, s, "second", "version: 1.0.0\nbase: /second\nmenus:\n  - {title: Second, icon: star, path: /second/}\n"+respond("two"), nil)
	p.do("reloading", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`),
		chromedp.Click(chromedp.Search(`//button[normalize-space()="Reload plugins"]`)),
		chromedp.WaitVisible(chromedp.CSS(`nav a[data-icon="star"]`)))
	if href, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('nav a[data-icon="star"]').href`)); err != nil || href != workers+"/second/" {
		t.Errorf("the new menu links to %q (%v)", href, err)
	}
	p.do("disabling hello", chromedp.Click(chromedp.Search(`//button[@aria-label="Disable hello"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`nav a[data-icon="wave"]`)))
	if same, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`window.notReloaded === true`)); err != nil || !same {
		t.Errorf("the panel reloaded to show the menus (%v)", err)
	}
	problems.check(t)
}

// TestCPanelFilesPolicy finds the file actions the server refuses (on the list of folders,
// on app folders, on version folders) disabled with the reason next to them, and those it
// allows inside a version enabled; a refusal is told in the panel's words, not the API's code.
func TestCPanelFilesPolicy(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	uploadOK(t, s, "workers", "site.tgz", harness.TarGz(t, pkg("name: site\nversion: 1.0.0\n",
		harness.File{Name: "index.html", Body: "<p>hi</p>"}, harness.File{Name: "notes.txt", Body: "notes"})...), rootKey)
	p, problems := openPanel(t, s)
	folder := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Click(chromedp.Search(`//table[contains(@class,"files")]//button[normalize-space()="` + name + `/"]`))
	}
	// state reads whether Rename, Move and Delete of entry are disabled and described by the
	// reason, and the reason.
	state := func(entry string) ([]bool, string) {
		t.Helper()
		got, err := chromedp.Run(p.ctx, chromedp.Evaluate[fileActions](fmt.Sprintf(`(() => {
			const buttons = ['Rename', 'Move', 'Delete'].map(a => document.querySelector('button[aria-label="' + a + ' ' + %q + '"]'))
			const why = document.getElementById('files-why')
			return {disabled: buttons.map(b => !!b && b.disabled && b.getAttribute('aria-describedby') === 'files-why'), why: why ? why.textContent : ''}
		})()`, entry)))
		if err != nil {
			t.Fatal(err)
		}
		return got.Disabled, got.Why
	}

	p.do("opening files", chromedp.Navigate(p.base+"/files"))
	p.signIn(rootKey)
	for _, tt := range []struct {
		level, entry, server, why string
		open                      []string
	}{
		{"the list of folders", "apps", "apps", "cannot be renamed, moved or deleted", nil},
		{"an app folder", "site", "apps/site", "uploading them in Apps", []string{"apps"}},
		{"a version folder", "1.0.0", "apps/site/1.0.0", "a version of the app", []string{"site"}},
	} {
		steps := []chromedp.Action[chromedp.Void]{chromedp.WaitVisible(chromedp.CSS("table.files td"))}
		for _, f := range tt.open {
			steps = append(steps, folder(f))
		}
		steps = append(steps, chromedp.WaitVisible(chromedp.Search(`//button[@aria-label="Rename `+tt.entry+`"]`)))
		p.do("opening "+tt.level, steps...)
		disabled, why := state(tt.entry)
		if !slices.Equal(disabled, []bool{true, true, true}) || !strings.Contains(why, tt.why) {
			t.Errorf("on %s: Rename, Move, Delete disabled and described %v, the reason %q; want all, saying %q", tt.level, disabled, why, tt.why)
		}
		// The server does refuse it.
		if resp := s.Do("DELETE", s.API+"/workers/files/delete", harness.WithKey(rootKey), harness.WithJSON(map[string]string{"path": tt.server})); resp.Status != 403 {
			t.Errorf("deleting %s through the API = %s, want a refusal", tt.server, resp)
		}
	}
	p.screenshot("files-versions", 1280)
	p.screenshot("files-versions", 375)

	p.do("opening the version", folder("1.0.0"), chromedp.WaitVisible(chromedp.Search(`//a[normalize-space()="notes.txt"]`)))
	if disabled, why := state("notes.txt"); !slices.Equal(disabled, []bool{false, false, false}) || why != "" {
		t.Errorf("inside a version: disabled %v, reason %q; want the actions enabled", disabled, why)
	}
	p.do("renaming onto index.html", chromedp.Click(chromedp.Search(`//button[@aria-label="Rename notes.txt"]`)),
		chromedp.SetValue(chromedp.CSS("#f-edit"), "index.html"), chromedp.Click(chromedp.Search(`//form//button[normalize-space()="Rename"]`)),
		chromedp.WaitVisible(chromedp.CSS("main .error")))
	if msg := p.text("main .error"); !strings.Contains(msg, "A file or folder of that name is already there") || strings.Contains(msg, "FILE_EXISTS") || !strings.Contains(msg, "Request id") {
		t.Errorf("the refusal says %q, want the panel's words and the request id", msg)
	}
	problems.check(t)
}

// fileActions is what TestCPanelFilesPolicy reads of an entry's actions.
type fileActions struct {
	Disabled []bool `json:"disabled"`
	Why      string `json:"why"`
}

// TestCPanelKeysFeedback signs in with an admin key of one's own: its Revoke is disabled with
// the reason next to it; "Copy key" says it copied (in a live region), and the clipboard holds
// the secret; with a local key store the revoke dialog says the key stops at once.
func TestCPanelKeysFeedback(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	me := s.CreateKey(rootKey, map[string]any{"name": "me", "role": "admin"})
	var meta api.KeysMeta
	if resp := s.Get(s.API+"/keys/meta", harness.WithKey(rootKey)); resp.JSON(&meta) != nil || meta.RevokeWithin != 0 {
		t.Errorf("keys/meta with a local key store = %s, want no revokeWithin", resp)
	}
	p, problems := openPanel(t, s)
	p.do("opening keys", chromedp.Navigate(p.base+"/keys"))
	origin, _, _ := strings.Cut(strings.TrimPrefix(p.base, "http://"), "/")
	for _, name := range []string{"clipboard-write", "clipboard-read"} {
		if _, err := chromedp.Call(p.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: name}, Setting: cdpbrowser.PermissionSettingGranted, Origin: "http://" + origin}); err != nil {
			t.Fatal(err)
		}
	}
	p.signIn(me.Secret)
	p.do("waiting for the keys", chromedp.WaitVisible(chromedp.CSS(`table.keys td`)))
	why, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(() => {
		const b = document.querySelector('button[aria-label="Revoke me"]')
		return b && b.disabled ? document.getElementById(b.getAttribute('aria-describedby')).textContent : 'not disabled'
	})()`))
	if err != nil || !strings.Contains(why, "cannot revoke itself") {
		t.Errorf("the own key's Revoke: %q (%v), want it disabled with the reason", why, err)
	}
	if visible, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`document.querySelector('.why').getClientRects().length > 0`)); err != nil || !visible {
		t.Errorf("the reason is not shown next to the button (%v)", err)
	}
	p.screenshot("keys-own", 1280)
	p.screenshot("keys-own", 375)

	p.do("creating a key", chromedp.Click(chromedp.Search(`//button[normalize-space()="Create key"]`)),
		chromedp.WaitVisible(chromedp.CSS("#k-name")), chromedp.SetValue(chromedp.CSS("#k-name"), "copied"),
		chromedp.Click(chromedp.CSS(`dialog form button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS("code.secret")))
	secret := p.text("code.secret")
	p.do("copying it", chromedp.Click(chromedp.Search(`//button[normalize-space()="Copy key"]`)),
		chromedp.WaitVisible(chromedp.Search(`//dialog//*[@role="status" and normalize-space()="Copied to the clipboard."]`)))
	if got, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise)); err != nil || got != secret {
		t.Errorf("the clipboard holds %q (%v), want the secret", got, err)
	}
	p.do("done", chromedp.Click(chromedp.Search(`//button[normalize-space()="Done"]`)), chromedp.WaitNotPresent(chromedp.CSS("code.secret")))
	p.do("asking to revoke it", chromedp.Click(chromedp.Search(`//button[@aria-label="Revoke copied"]`)), chromedp.WaitVisible(chromedp.CSS(`dialog[open] button.danger`)))
	if text := p.text("dialog[open] p"); !strings.Contains(text, "stops working at once") || strings.Contains(text, "within") {
		t.Errorf("with a local key store the revoke dialog says %q", text)
	}
	problems.check(t)
}

// TestCPanelSyncRevoke runs the panel on an instance whose key store is a replica: keys/meta
// gives the sync interval, and the revoke dialog says the key stops within that many seconds
// on every instance.
func TestCPanelSyncRevoke(t *testing.T) {
	t.Parallel()
	primary := testkit.StartSqld(t)
	s := startSync(t, primary, "")
	s.CreateKey(rootKey, map[string]any{"name": "ci", "role": "viewer"})
	var meta api.KeysMeta
	if resp := s.Get(s.API+"/keys/meta", harness.WithKey(rootKey)); resp.JSON(&meta) != nil || meta.RevokeWithin != 1 {
		t.Errorf("keys/meta in sync mode (interval 1s) = %s, want revokeWithin 1", resp)
	}
	p, problems := openPanel(t, s)
	p.do("opening keys", chromedp.Navigate(p.base+"/keys"))
	p.signIn(rootKey)
	p.do("asking to revoke", chromedp.Click(chromedp.Search(`//button[@aria-label="Revoke ci"]`)), chromedp.WaitVisible(chromedp.CSS(`dialog[open] button.danger`)))
	if text := p.text("dialog[open] p"); !strings.Contains(text, "takes effect within 1 second on every instance") {
		t.Errorf("in sync mode the revoke dialog says %q", text)
	}
	p.screenshot("keys-sync-revoke", 1280)
	problems.check(t)
}
