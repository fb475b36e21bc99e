package integration

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// TestDocsInBrowser opens the API reference in Chromium, under an API prefix: it renders this
// runtime's operations, loads nothing from another origin, breaks no rule of its content
// security policy, and its "Try it out" calls the API, with a key given to "Authorize".
func TestDocsInBrowser(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_API_PREFIX": "/_", "RUNTIME_ROOT_KEY": rootKey}})
	p, problems := openPanel(t, s)
	p.do("opening the reference", chromedp.Navigate(s.URL+"/_/api/docs"),
		chromedp.WaitVisible(chromedp.CSS(`#operations-health-health`)))
	p.screenshot("docs", 1280)
	p.screenshot("docs", 375)
	p.do("resizing", chromedp.EmulateViewport(1280, 900))

	// A public operation, tried out.
	if got := tryOut(p, "operations-health-health"); got != "200" {
		t.Errorf("health tried out: status %q, want 200", got)
	}

	// An operation that needs a key, after Authorize with the root key.
	p.do("authorizing with the root key",
		chromedp.Click(chromedp.CSS(`button.authorize`)),
		chromedp.WaitVisible(chromedp.CSS(`.dialog-ux input[type=text]`)),
		chromedp.SendKeys(chromedp.CSS(`.dialog-ux input[type=text]`), rootKey),
		chromedp.Click(chromedp.CSS(`.dialog-ux .auth-container button.authorize`)))
	p.do("closing the dialog", chromedp.Click(chromedp.CSS(`.dialog-ux button.btn-done`)))
	if got := tryOut(p, "operations-keys-listKeys"); got != "200" {
		t.Errorf("keys tried out with the root key: status %q, want 200", got)
	}
	p.onlyFrom(s.URL)
	problems.check(t)
}

// tryOut runs the operation whose block has the element id op with "Try it out" and
// "Execute", and returns the status the page shows.
func tryOut(p panel, op string) string {
	p.t.Helper()
	block := "#" + op + " "
	p.do("trying out "+op,
		chromedp.Click(chromedp.CSS(block+`button.opblock-summary-control`)),
		chromedp.Click(chromedp.CSS(block+`button.try-out__btn`)),
		chromedp.Click(chromedp.CSS(block+`button.execute`)),
		chromedp.WaitVisible(chromedp.CSS(block+`.live-responses-table tr.response .response-col_status`)))
	return strings.TrimSpace(p.text(block + `.live-responses-table tr.response .response-col_status`))
}
