package integration

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestCPanelDomains: an app's page lists its custom domains; an editor attaches one there,
// reads the TXT record and token to create, checks it again once the record is in place (it
// turns verified and links to the domain) and detaches it; a viewer sees the list without
// the controls that change it.
func TestCPanelDomains(t *testing.T) {
	t.Parallel()
	dns := testkit.StartDNS(t)
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: "domain_resolvers " + dns.Addr})
	if resp := s.Upload(s.API+"/workers/upload", "shop.tgz", siteArchive(t, "shop", "1.0.0", "the shop"), harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("upload = %s", resp)
	}
	editor := s.CreateKey(rootKey, map[string]any{"name": "deployer", "role": "editor"}).Secret
	viewer := s.CreateKey(rootKey, map[string]any{"name": "watcher", "role": "viewer"}).Secret
	const domain = "shop.example.org"
	row := `tr[data-domain="` + domain + `"]`

	p, problems := openPanel(t, s)
	p.do("opening shop's page", chromedp.Navigate(p.base+"/apps/shop"))
	p.signIn(editor)
	p.do("waiting for the domains", chromedp.WaitVisible(chromedp.CSS(`#domains-h`)), chromedp.WaitVisible(chromedp.CSS(`.no-domains`)))

	p.do("attaching a domain", chromedp.SendKeys(chromedp.CSS("#domain-name"), "Shop.Example.ORG"),
		chromedp.Click(chromedp.CSS("form.domain-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(row)))
	var listed []api.WorkerDomain
	if resp := s.Get(s.API+"/workers/_/shop/domains", harness.WithKey(rootKey)); resp.JSON(&listed) != nil || len(listed) != 1 || listed[0].State != "pending" {
		t.Fatalf("after attaching in the panel, the domains are %s", resp)
	}
	if status := p.text(`section[aria-labelledby="domains-h"] [role=status]`); !strings.Contains(status, domain+" is pending") {
		t.Errorf("after attaching, the status says %q", status)
	}
	if state := p.text(row + ` td[data-label="State"]`); strings.TrimSpace(state) != "pending" {
		t.Errorf("a pending domain's state says %q", state)
	}
	if record := p.text(`p[data-record-for="` + domain + `"]`); !strings.Contains(record, listed[0].Record) || !strings.Contains(record, listed[0].Token) {
		t.Errorf("the pending domain's instructions say %q, want the record %s and the token", record, listed[0].Record)
	}
	if got := p.text(row + ` td[data-label="Last check"]`); !strings.Contains(got, "no TXT record") {
		t.Errorf("a pending domain's last check says %q, want why it failed", got)
	}
	p.fits("app-domains-pending", 1280)
	p.screenshot("app-domains-pending", 375)

	dns.SetTXT(listed[0].Record, listed[0].Token)
	p.do("checking it again", chromedp.Click(chromedp.CSS(`button[aria-label="Check `+domain+` again"]`)),
		chromedp.WaitVisible(chromedp.CSS(row+` a[href="`+listed[0].URL+`"]`)))
	if status := p.text(`section[aria-labelledby="domains-h"] [role=status]`); !strings.Contains(status, domain+" is verified") {
		t.Errorf("after checking again, the status says %q", status)
	}
	if state := p.text(row + ` td[data-label="State"]`); strings.TrimSpace(state) != "verified" {
		t.Errorf("a verified domain's state says %q", state)
	}
	if pageShows(p, listed[0].Token) {
		t.Error("the page still shows the verified domain's token to create")
	}
	p.namesEveryControl("the app page with domains")

	p.do("detaching it", chromedp.Click(chromedp.CSS(`button[aria-label="Detach `+domain+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("dialog[open] button.danger")), chromedp.Click(chromedp.CSS("dialog[open] button.danger")),
		chromedp.WaitVisible(chromedp.Search(`//*[@role="status"][contains(., "Detached `+domain+`.")]`)),
		chromedp.WaitVisible(chromedp.CSS(`.no-domains`)))
	if resp := s.Get(s.API+"/workers/_/shop/domains", harness.WithKey(rootKey)); resp.JSON(&listed) != nil || len(listed) != 0 {
		t.Errorf("after detaching in the panel, the domains are %s", resp)
	}
	problems.check(t)

	if resp := s.Do("PUT", s.API+"/workers/_/shop/domains/"+domain, harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("attaching for the viewer = %s", resp)
	}
	v, vproblems := openPanel(t, s)
	v.do("opening shop's page as a viewer", chromedp.Navigate(v.base+"/apps/shop"))
	v.signIn(viewer)
	v.do("waiting for the domains", chromedp.WaitVisible(chromedp.CSS(row)))
	has, err := chromedp.Run(v.ctx, chromedp.Evaluate[bool](`!!document.querySelector('#domain-name, section[aria-labelledby="domains-h"] table button')`))
	if err != nil || has {
		t.Errorf("a viewer's domains section has controls that change them: %v %v", has, err)
	}
	vproblems.check(t)
}
