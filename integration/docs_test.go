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
	p.do("trying out the health probe",
		chromedp.Click(chromedp.CSS(`#operations-health-health button.opblock-summary-control`)),
		chromedp.Click(chromedp.CSS(`#operations-health-health button.try-out__btn`)),
		chromedp.Click(chromedp.CSS(`#operations-health-health button.execute`)),
		chromedp.WaitVisible(chromedp.CSS(`#operations-health-health .live-responses-table tr.response .response-col_status`)))
	if got := p.text(`#operations-health-health .live-responses-table tr.response .response-col_status`); strings.TrimSpace(got) != "200" {
		t.Errorf("health tried out: status %q, want 200", got)
	}

	// An operation that needs a key, after Authorize with the root key.
	p.do("authorizing with the root key",
		chromedp.Click(chromedp.CSS(`button.authorize`)),
		chromedp.WaitVisible(chromedp.CSS(`.dialog-ux input[type=text]`)),
		chromedp.SendKeys(chromedp.CSS(`.dialog-ux input[type=text]`), rootKey),
		chromedp.Click(chromedp.CSS(`.dialog-ux .auth-container button.authorize`)))
	p.do("closing the dialog", chromedp.Click(chromedp.CSS(`.dialog-ux button.btn-done`)))
	p.do("listing the keys",
		chromedp.Click(chromedp.CSS(`#operations-keys-listKeys button.opblock-summary-control`)),
		chromedp.Click(chromedp.CSS(`#operations-keys-listKeys button.try-out__btn`)),
		chromedp.Click(chromedp.CSS(`#operations-keys-listKeys button.execute`)),
		chromedp.WaitVisible(chromedp.CSS(`#operations-keys-listKeys .live-responses-table tr.response .response-col_status`)))
	if got := p.text(`#operations-keys-listKeys .live-responses-table tr.response .response-col_status`); strings.TrimSpace(got) != "200" {
		t.Errorf("keys tried out with the root key: status %q, want 200", got)
	}

	urls, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string]("performance.getEntriesByType('resource').map(e => e.name)"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range urls {
		if !strings.HasPrefix(u, s.URL+"/") {
			t.Errorf("the reference requested %s, outside its origin", u)
		}
	}
	problems.check(t)
}
