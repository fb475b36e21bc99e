package integration

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// storagePage is a worker page; the test reads and writes its origin's localStorage from it.
const storagePage = `<!doctype html><html><head><title>storage</title></head><body>storage</body></html>`

// TestBrowserHostsIsolateStorage: two workers on their own hosts (workers_domain) are two
// browser origins, so neither reads what the other keeps in localStorage; on the path form,
// one host for both, they share it, which the test sees too.
func TestBrowserHostsIsolateStorage(t *testing.T) {
	t.Parallel()
	port := harness.FreePort(t)
	s := harness.Start(t, harness.Config{
		Port: port,
		Env:  map[string]string{"RUNTIME_ROOT_KEY": rootKey},
		App:  fmt.Sprintf("workers_domain http://apps.example.test:%d", port),
		Hosts: []harness.Host{
			{Name: "admin.example.test", Runtime: "serve api cpanel"},
			{Name: "apps.example.test", Runtime: "serve workers"},
			{Name: "*.apps.example.test", Runtime: "serve workers"},
		},
	})
	for _, name := range []string{"one", "two"} {
		if resp := s.Upload(s.API+"/workers/upload", name+".tgz", siteArchive(t, name, "1.0.0", storagePage), harness.WithKey(rootKey)); resp.Status != 200 {
			t.Fatalf("upload %s = %s", name, resp)
		}
	}
	ctx := browser(t, chromedp.Flag("host-resolver-rules", "MAP *.example.test 127.0.0.1"))
	// visit opens url and runs script there, answering what it evaluates to (null: "").
	visit := func(url, script string) string {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
			t.Fatalf("opening %s: %v", url, err)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[*string](script))
		if err != nil {
			t.Fatalf("at %s: %v", url, err)
		}
		if got == nil {
			return ""
		}
		return *got
	}
	one := fmt.Sprintf("http://one.apps.example.test:%d/", port)
	two := fmt.Sprintf("http://two.apps.example.test:%d/", port)
	if got := visit(one, `localStorage.setItem("secret", "one's"); localStorage.getItem("secret")`); got != "one's" {
		t.Fatalf("worker one's own storage = %q", got)
	}
	if got := visit(two, `localStorage.getItem("secret")`); got != "" {
		t.Errorf("worker two read %q from worker one's storage", got)
	}
	visit(two, `localStorage.setItem("secret", "two's"); null`)
	if got := visit(one, `localStorage.getItem("secret")`); got != "one's" {
		t.Errorf("worker one's storage after worker two wrote its own = %q", got)
	}

	// The control: on the path form both workers are one origin and share it.
	paths := fmt.Sprintf("http://apps.example.test:%d", port)
	visit(paths+"/one/", `localStorage.setItem("secret", "one's"); null`)
	if got := visit(paths+"/two/", `localStorage.getItem("secret")`); got != "one's" {
		t.Errorf("on the path form worker two read %q, want one's (one origin)", got)
	}
}
