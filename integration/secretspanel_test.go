package integration

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
)

// pageShows reports whether text is anywhere in the page: its markup, or the value of a field.
func pageShows(p panel, text string) bool {
	p.t.Helper()
	found, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`(() => {
		const t = `+jsString(text)+`;
		return document.documentElement.outerHTML.includes(t) || [...document.querySelectorAll('input, textarea')].some(i => i.value.includes(t));
	})()`))
	if err != nil {
		p.t.Fatal(err)
	}
	return found
}

// TestCPanelSecrets: an app's page lists its secrets by name and who set them, and lets an
// editor set one, replace one and remove one; a value typed there reaches the worker's
// environment and is never on the page again; a viewer's page has no secrets section.
func TestCPanelSecrets(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_SECRETS_KEY": newSecretsKey(t)}})
	uploadOK(t, s, "workers", "echo.tgz", testWorkerArchive(t, "echo", "1.0.0", ""), rootKey)
	const existing, typed, replaced = "existing-value-7781", "typed-in-the-panel-3390", "replaced-in-the-panel-5512"
	setSecret(t, s, rootKey, "echo", "EXISTING", existing)
	editor := s.CreateKey(rootKey, map[string]any{"name": "deployer", "role": "editor"}).Secret
	viewer := s.CreateKey(rootKey, map[string]any{"name": "watcher", "role": "viewer"}).Secret

	p, problems := openPanel(t, s)
	p.do("opening echo's page", chromedp.Navigate(p.base+"/apps/echo"))
	p.signIn(editor)
	p.do("waiting for the secrets", chromedp.WaitVisible(chromedp.CSS(`#secrets-h`)), chromedp.WaitVisible(chromedp.CSS(`tr[data-secret="EXISTING"]`)))
	if by := p.text(`tr[data-secret="EXISTING"] td[data-label="By"]`); !strings.Contains(by, "root") {
		t.Errorf("EXISTING was set by %q, want root", by)
	}

	p.do("setting a secret", chromedp.SetValue(chromedp.CSS("#secret-name"), "NEW_TOKEN"), chromedp.SendKeys(chromedp.CSS("#secret-value"), typed),
		chromedp.Click(chromedp.CSS("form.secret-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-secret="NEW_TOKEN"]`)))
	if status := p.text(`section[aria-labelledby="secrets-h"] [role=status]`); !strings.Contains(status, "Set NEW_TOKEN.") {
		t.Errorf("after setting, the status says %q", status)
	}
	if got, _ := envOf(echoOf(t, s.Get("/echo/")), "NEW_TOKEN"); got != typed {
		t.Errorf("the worker's NEW_TOKEN = %q, want what was typed", got)
	}

	p.do("replacing EXISTING", chromedp.Click(chromedp.CSS(`tr[data-secret="EXISTING"] button[aria-label="Replace EXISTING"]`)))
	if name, err := chromedp.Run(p.ctx, chromedp.Value(chromedp.CSS("#secret-name"))); err != nil || name != "EXISTING" {
		t.Fatalf("Replace put %q (%v) in the name field", name, err)
	}
	p.do("typing the new value", chromedp.SendKeys(chromedp.CSS("#secret-value"), replaced),
		chromedp.Click(chromedp.CSS("form.secret-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.Search(`//*[@role="status"][contains(., "Set EXISTING.")]`)))
	if got, _ := envOf(echoOf(t, s.Get("/echo/")), "EXISTING"); got != replaced {
		t.Errorf("the worker's EXISTING = %q, want the replaced value", got)
	}

	p.do("removing NEW_TOKEN", chromedp.Click(chromedp.CSS(`button[aria-label="Remove NEW_TOKEN"]`)),
		chromedp.WaitVisible(chromedp.CSS("dialog[open] button.danger")), chromedp.Click(chromedp.CSS("dialog[open] button.danger")),
		chromedp.WaitVisible(chromedp.Search(`//*[@role="status"][contains(., "Removed NEW_TOKEN.")]`)))
	var list api.WorkerSecrets
	if resp := s.Get(secretsPath(s, "echo"), harness.WithKey(rootKey)); resp.JSON(&list) != nil || len(list.Secrets) != 1 || list.Secrets[0].Name != "EXISTING" {
		t.Errorf("after removing in the panel, the secrets are %s", resp)
	}
	for _, v := range []string{existing, typed, replaced} {
		if pageShows(p, v) {
			t.Errorf("the page shows a secret's value %q", v)
		}
	}
	p.namesEveryControl("the app page with secrets")
	p.screenshot("app-secrets", 1280)
	p.screenshot("app-secrets", 375)
	problems.check(t)

	v, vproblems := openPanel(t, s)
	v.do("opening echo's page as a viewer", chromedp.Navigate(v.base+"/apps/echo"))
	v.signIn(viewer)
	v.do("waiting for the page", chromedp.WaitVisible(chromedp.CSS(`table.versions tr[data-version="1.0.0"]`)))
	has, err := chromedp.Run(v.ctx, chromedp.Evaluate[bool](`!!document.querySelector('#secrets-h')`))
	if err != nil || has {
		t.Errorf("a viewer's page has a secrets section: %v %v", has, err)
	}
	vproblems.check(t)
}
