package integration

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
	dataplane "github.com/caddy-runtime/runtime/internal/serving"
)

// The gradual rollout tests (issue 27, part 3): traffic splits through the real binary.

// visitors is the fixed list of visitor ids the split tests use, so their counts are the
// same on every run.
func visitors(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("visitor%06d", i)
	}
	return ids
}

// asVisitor sends the visitor cookie of id.
func asVisitor(id string) harness.Option { return harness.WithCookie(dataplane.VisitorCookie, id) }

// versionOf sends GET path and returns the version the answer names, checking that the body
// (a site archive says "v<version>") agrees.
func versionOf(s *harness.Server, path string, opts ...harness.Option) (string, *harness.Response, error) {
	resp, err := s.Send("GET", path, opts...)
	if err != nil {
		return "", resp, err
	}
	v := resp.Header.Get(dataplane.VersionHeader)
	if resp.Status != 200 || string(resp.Body) != "v"+v {
		return "", resp, fmt.Errorf("GET %s on %s = %s (X-Worker-Version %q)", path, s.Name(), resp, v)
	}
	return v, resp, nil
}

// traffic sends a traffic request and decodes the split answered.
func traffic(t *testing.T, s *harness.Server, method, name string, body any, status int) api.WorkerTraffic {
	t.Helper()
	opts := []harness.Option{harness.WithKey(rootKey)}
	if body != nil {
		opts = append(opts, harness.WithJSON(body))
	}
	resp := s.Do(method, s.API+"/workers/_/"+name+"/traffic", opts...)
	var out api.WorkerTraffic
	if resp.Status != status || status == 200 && resp.JSON(&out) != nil {
		t.Fatalf("%s traffic of %s on %s = %s, want %d", method, name, s.Name(), resp, status)
	}
	return out
}

func split(shares ...any) map[string]any {
	var out []map[string]any
	for i := 0; i < len(shares); i += 2 {
		out = append(out, map[string]any{"version": shares[i], "percent": shares[i+1]})
	}
	return map[string]any{"split": out}
}

// TestRollout runs two instances sharing a key store and a package store: an upload with
// ?canary=10 never serves the new version to a visitor outside its share, even while the
// other instance installs it; 8–12 % of 2 000 visitors and about 10 % of cookie-less
// requests get it; each visitor gets one version on both instances across 50 requests, also
// when identified by split_header; growing the share keeps every visitor already on the new
// version there; pins are never split; promoting ends the split; bad splits are refused.
func TestRollout(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0)
	var cfgs []harness.Config
	for _, name := range []string{"A", "B"} {
		cfg := c.Config(name)
		cfg.App += "\n\t\tsplit_header X-User-Id"
		cfgs = append(cfgs, cfg)
	}
	g := harness.StartAll(t, cfgs...)
	a, b := g[0], g[1]
	uploadOK(t, a, "workers", "v1.tgz", siteArchive(t, "app", "1.0.0", "v1.0.0"), rootKey)
	g.Each(t, converge, serving("/app/", "v1.0.0"))

	ids := visitors(2000)
	onOld := func(id string) bool { return dataplane.Bucket(id, "app") >= 10 }
	// Visitors outside the canary's 10 %: none of them may ever get 2.0.0, on either instance,
	// from before the upload until both have installed it.
	var outside []string
	for _, id := range ids[:200] {
		if onOld(id) {
			outside = append(outside, id)
		}
	}
	var wrong atomic.Value
	load := harness.Hammer(t, 4, func(client, n int) error {
		s := g[client%2]
		id := outside[n%len(outside)]
		v, _, err := versionOf(s, "/app/", asVisitor(id))
		if err == nil && v != "1.0.0" {
			wrong.Store(fmt.Sprintf("visitor %s got %s on %s during the canary's upload", id, v, s.Name()))
		}
		return err
	})
	resp := a.Upload(a.API+"/workers/upload?canary=10", "v2.tgz", siteArchive(t, "app", "2.0.0", "v2.0.0"), harness.WithKey(rootKey))
	var up api.WorkerUploaded
	if resp.Status != 200 || resp.JSON(&up) != nil {
		t.Fatalf("canary upload = %s", resp)
	}
	if got := fmt.Sprint(up.Data.Split); got != "[{1.0.0 90} {2.0.0 10}]" {
		t.Errorf("the upload's split = %s", got)
	}
	g.Each(t, converge, serving("/app@2.0.0/", "v2.0.0"))
	if err := load.Stop(100); err != nil {
		t.Fatal(err)
	}
	if w := wrong.Load(); w != nil {
		t.Fatal(w)
	}
	if got := traffic(t, b, "GET", "app", nil, 200); fmt.Sprint(got.Split) != "[{2.0.0 10} {1.0.0 90}]" || got.ChangedBy != "root" {
		t.Errorf("GET traffic on B = %+v", got)
	}

	// 2 000 visitors with cookies: 8–12 % on 2.0.0, each the same on A and B.
	sides := map[string]string{}
	var mu sync.Mutex
	onNew := 0
	check := func(ids []string, want func(id, v string) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, len(ids))
		for w := range 4 {
			wg.Go(func() {
				for i := w; i < len(ids); i += 4 {
					id := ids[i]
					va, _, err := versionOf(a, "/app/", asVisitor(id))
					if err == nil {
						var vb string
						if vb, _, err = versionOf(b, "/app/", asVisitor(id)); err == nil && va != vb {
							err = fmt.Errorf("visitor %s: %s on A, %s on B", id, va, vb)
						}
					}
					if err == nil {
						mu.Lock()
						err = want(id, va)
						mu.Unlock()
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	check(ids, func(id, v string) error {
		sides[id] = v
		if v == "2.0.0" {
			onNew++
		}
		return nil
	})
	if onNew < 160 || onNew > 240 {
		t.Errorf("%d of 2000 visitors on the 10 %% canary, want 8–12 %%", onNew)
	}
	t.Logf("10 %% split: %d of 2000 visitors on 2.0.0", onNew)

	// Fifty requests each, alternating between the instances, for visitors of both sides.
	var sample []string
	for _, id := range ids {
		if len(sample) < 40 && (sides[id] == "2.0.0") == (len(sample)%2 == 0) {
			sample = append(sample, id)
		}
	}
	for _, id := range sample {
		for n := range 50 {
			s := g[n%2]
			if v, _, err := versionOf(s, "/app/", asVisitor(id)); err != nil || v != sides[id] {
				t.Fatalf("visitor %s, request %d on %s: %s (%v), first %s", id, n+1, s.Name(), v, err, sides[id])
			}
		}
		// The header split_header names splits as the cookie does, on either instance.
		if v, resp, err := versionOf(g[len(id)%2], "/app/", harness.WithHeader("X-User-Id", id)); err != nil || v != sides[id] || resp.Header.Get("Set-Cookie") != "" {
			t.Fatalf("X-User-Id %s: %s (%v), want %s and no cookie", id, v, err, sides[id])
		}
		// A pin is never split.
		if v, _, err := versionOf(a, "/app@1.0.0/", asVisitor(id)); err != nil || v != "1.0.0" {
			t.Fatalf("visitor %s pinned to 1.0.0: %s (%v)", id, v, err)
		}
	}

	// Requests without a cookie or the header: about 10 % on 2.0.0, each given a cookie that
	// keeps it on its side.
	fresh := 0
	for n := range 1000 {
		v, resp, err := versionOf(g[n%2], "/app/")
		if err != nil {
			t.Fatal(err)
		}
		if v == "2.0.0" {
			fresh++
		}
		id, ok := strings.CutPrefix(strings.Split(resp.Header.Get("Set-Cookie"), ";")[0], dataplane.VisitorCookie+"=")
		if !ok {
			t.Fatalf("a cookie-less request got no visitor cookie: %q", resp.Header.Get("Set-Cookie"))
		}
		if n < 20 {
			if again, _, err := versionOf(g[(n+1)%2], "/app/", asVisitor(id)); err != nil || again != v {
				t.Fatalf("the cookie given with %s brought %s (%v)", v, again, err)
			}
		}
	}
	if fresh < 50 || fresh > 150 {
		t.Errorf("%d of 1000 cookie-less requests on the 10 %% canary, want about 10 %%", fresh)
	}
	t.Logf("10 %% split: %d of 1000 cookie-less requests on 2.0.0", fresh)

	// Growing the share, on B: everyone on 2.0.0 stays there, on both instances.
	traffic(t, b, "PUT", "app", split("1.0.0", 70, "2.0.0", 30), 200)
	var between string // a visitor the grown share moves
	for _, id := range ids {
		if b := dataplane.Bucket(id, "app"); b >= 10 && b < 30 {
			between = id
			break
		}
	}
	harness.EventuallyNil(t, converge, func() error {
		if v, _, err := versionOf(a, "/app/", asVisitor(between)); err != nil || v != "2.0.0" {
			return fmt.Errorf("A does not split 30 %% yet: visitor %s got %s (%v)", between, v, err)
		}
		return nil
	})
	if got := traffic(t, a, "GET", "app", nil, 200); fmt.Sprint(got.Split) != "[{2.0.0 30} {1.0.0 70}]" {
		t.Errorf("A's split: %v", got.Split)
	}
	onNew = 0
	check(ids, func(id, v string) error {
		if sides[id] == "2.0.0" && v != "2.0.0" {
			return fmt.Errorf("visitor %s left 2.0.0 for %s when its share grew", id, v)
		}
		if v == "2.0.0" {
			onNew++
		}
		return nil
	})
	if onNew < 500 || onNew > 700 {
		t.Errorf("%d of 2000 visitors on the 30 %% side", onNew)
	}

	// Refusals, in the envelope.
	for _, tc := range []struct {
		name, method, worker string
		body                 any
		status               int
		code                 string
	}{
		{"sum under 100", "PUT", "app", split("1.0.0", 80, "2.0.0", 10), 400, "INVALID_SPLIT"},
		{"a version twice", "PUT", "app", split("1.0.0", 50, "1.0.0", 50), 400, "INVALID_SPLIT"},
		{"empty", "PUT", "app", split(), 400, "INVALID_SPLIT"},
		{"not a number", "PUT", "app", split("1.0.0", "all"), 400, "BAD_REQUEST"},
		{"unknown version", "PUT", "app", split("1.0.0", 50, "9.9.9", 50), 404, "WORKER_VERSION_NOT_FOUND"},
		{"unknown worker", "PUT", "ghost", split("1.0.0", 100), 404, "WORKER_NOT_FOUND"},
		{"unknown worker's split", "GET", "ghost", nil, 404, "WORKER_NOT_FOUND"},
	} {
		opts := []harness.Option{harness.WithKey(rootKey)}
		if tc.body != nil {
			opts = append(opts, harness.WithJSON(tc.body))
		}
		if resp := a.Do(tc.method, a.API+"/workers/_/"+tc.worker+"/traffic", opts...); resp.Status != tc.status || resp.ErrorCode() != tc.code {
			t.Errorf("%s: %s, want %d %s", tc.name, resp, tc.status, tc.code)
		}
	}
	if resp := a.Upload(a.API+"/workers/upload?canary=100", "v3.tgz", siteArchive(t, "app", "3.0.0", "v3.0.0"), harness.WithKey(rootKey)); resp.Status != 400 || resp.ErrorCode() != "INVALID_CANARY" {
		t.Errorf("canary=100: %s", resp)
	}
	if resp := a.Upload(a.API+"/workers/upload?canary=10", "new.tgz", siteArchive(t, "newapp", "1.0.0", "v1.0.0"), harness.WithKey(rootKey)); resp.Status != 409 || resp.ErrorCode() != "NO_SERVED_VERSION" {
		t.Errorf("a canary of a worker that serves nothing: %s", resp)
	}
	if got := traffic(t, a, "GET", "app", nil, 200); fmt.Sprint(got.Split) != "[{2.0.0 30} {1.0.0 70}]" {
		t.Errorf("after the refusals the split is %v", got.Split)
	}

	// Promoting 2.0.0, the newest: DELETE; everyone gets it on both instances.
	if got := traffic(t, a, "DELETE", "app", nil, 200); len(got.Split) != 0 {
		t.Errorf("DELETE answered split %v", got.Split)
	}
	g.Each(t, converge, func(s *harness.Server) error {
		for _, id := range sample {
			if v, _, err := versionOf(s, "/app/", asVisitor(id)); err != nil || v != "2.0.0" {
				return fmt.Errorf("visitor %s after the promotion: %s (%v)", id, v, err)
			}
		}
		return nil
	})
	if resp := a.Get("/app/"); resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("a worker without a split set a cookie: %q", resp.Header.Get("Set-Cookie"))
	}
}

// TestRolloutSingle checks a split on one instance without a cluster: it holds across a
// restart; a disabled version is refused with 409; a permitted key outside the worker's
// namespace is refused, a viewer may read but not change it.
func TestRolloutSingle(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	uploadOK(t, s, "workers", "v1.tgz", siteArchive(t, "app", "1.0.0", "v1.0.0"), rootKey)
	uploadOK(t, s, "workers", "v2.tgz", siteArchive(t, "app", "2.0.0", "v2.0.0"), rootKey)
	uploadOK(t, s, "workers", "v3.tgz", siteArchive(t, "app", "3.0.0", "v3.0.0"), rootKey)
	toggle3 := s.Do("POST", s.API+"/workers/_/app/3.0.0/disable", harness.WithKey(rootKey))
	if toggle3.Status != 200 {
		t.Fatalf("disable 3.0.0 = %s", toggle3)
	}
	if resp := s.Do("PUT", s.API+"/workers/_/app/traffic", harness.WithKey(rootKey), harness.WithJSON(split("2.0.0", 50, "3.0.0", 50))); resp.Status != 409 || resp.ErrorCode() != "WORKER_VERSION_DISABLED" {
		t.Errorf("a split with a disabled version: %s", resp)
	}
	viewer := s.CreateKey(rootKey, map[string]any{"name": "viewer", "role": "viewer"}).Secret
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "editor", "namespaces": []string{"@team"}}).Secret
	if resp := s.Do("PUT", s.API+"/workers/_/app/traffic", harness.WithKey(viewer), harness.WithOrigin(""), harness.WithJSON(split("1.0.0", 100))); resp.Status != 403 || resp.ErrorCode() != "PERMISSION_DENIED" {
		t.Errorf("a viewer's PUT: %s", resp)
	}
	if resp := s.Do("PUT", s.API+"/workers/_/app/traffic", harness.WithKey(team), harness.WithOrigin(""), harness.WithJSON(split("1.0.0", 100))); resp.Status != 403 || resp.ErrorCode() != "NAMESPACE_DENIED" {
		t.Errorf("another namespace's PUT: %s", resp)
	}
	traffic(t, s, "PUT", "app", split("1.0.0", 100), 200)
	if resp := s.Get(s.API+"/workers/_/app/traffic", harness.WithKey(viewer)); resp.Status != 200 {
		t.Errorf("a viewer's GET: %s", resp)
	}
	var audit api.AuditPage
	if resp := s.Get(s.API+"/audit?action=worker.traffic", harness.WithKey(rootKey)); resp.Status != 200 || resp.JSON(&audit) != nil {
		t.Fatalf("GET audit = %s", resp)
	}
	if len(audit.Entries) != 1 || audit.Entries[0].Target != "app" || audit.Entries[0].Outcome != "success" || audit.Entries[0].Details["split"] != "1.0.0=100" {
		t.Errorf("the audit trail of the split: %+v", audit.Entries)
	}
	if v, _, err := versionOf(s, "/app/"); err != nil || v != "1.0.0" {
		t.Fatalf("a 100 %% split to 1.0.0 served %s (%v)", v, err)
	}
	s.Stop()
	s, err := s.Relaunch(t)
	if err == nil {
		err = s.WaitReady(30 * time.Second)
	}
	if err != nil {
		t.Fatal(err)
	}
	if v, _, err := versionOf(s, "/app/"); err != nil || v != "1.0.0" {
		t.Fatalf("after a restart: %s (%v), want the split's 1.0.0", v, err)
	}
	plugin := harness.TarGz(t, pkg("name: p\nversion: 1.0.0\nbase: /p\n")...)
	if resp := s.Upload(s.API+"/plugins/upload?canary=10", "p.tgz", plugin, harness.WithKey(rootKey)); resp.Status != 400 || resp.ErrorCode() != "BAD_REQUEST" {
		t.Errorf("a plugin upload with canary: %s", resp)
	}
	// Disabling the only version of a split leaves its visitors to the newest enabled one.
	if resp := s.Do("POST", s.API+"/workers/_/app/1.0.0/disable", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("disable 1.0.0 = %s", resp)
	}
	if v, _, err := versionOf(s, "/app/"); err != nil || v != "2.0.0" {
		t.Errorf("the split's version disabled: %s (%v), want 2.0.0", v, err)
	}
	// Removing the worker ends its split: one uploaded again under the name starts without.
	if resp := s.Do("DELETE", s.API+"/workers/_/app", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("delete app = %s", resp)
	}
	uploadOK(t, s, "workers", "again.tgz", siteArchive(t, "app", "1.0.0", "v1.0.0"), rootKey)
	if got := traffic(t, s, "GET", "app", nil, 200); len(got.Split) != 0 {
		t.Errorf("a worker uploaded again inherited the split %v", got.Split)
	}
}

// TestCPanelTraffic opens an app's page: it shows that no split is in force, a key that may
// install changes the split through the form (which refuses a total other than 100) and ends
// it, and the page shows the split the API then holds; a viewer sees the split but is offered
// no change.
func TestCPanelTraffic(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	uploadOK(t, s, "workers", "v1.tgz", siteArchive(t, "app", "1.0.0", "v1.0.0"), rootKey)
	uploadOK(t, s, "workers", "v2.tgz", siteArchive(t, "app", "1.1.0", "v1.1.0"), rootKey)
	viewer := s.CreateKey(rootKey, map[string]any{"name": "watcher", "role": "viewer"})
	p, problems := openPanel(t, s)
	p.do("opening the app page", chromedp.Navigate(p.base+"/apps/app"))
	p.signIn(rootKey)
	p.do("waiting for the traffic section", chromedp.WaitVisible(chromedp.CSS(".traffic .split-none")))
	if got := p.text(".traffic .split-none"); !strings.Contains(got, "No split: 1.1.0") {
		t.Errorf("without a split the page says %q", got)
	}
	input := func(v string) string { return `.split-form input[id="split-` + v + `"]` }
	p.do("opening the split form", chromedp.Click(chromedp.Search(`//section[contains(@class,"traffic")]//button[normalize-space()="Change the split"]`)),
		chromedp.WaitVisible(chromedp.CSS(input("1.0.0"))))
	p.do("entering 80 and 30", chromedp.SetValue(chromedp.CSS(input("1.0.0")), "80"), chromedp.SetValue(chromedp.CSS(input("1.1.0")), "30"))
	if got := p.text(".split-form [role=status]"); got != "Total: 110% (must be 100)" {
		t.Errorf("the form's total says %q", got)
	}
	disabled, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`document.querySelector('.split-form button[type=submit]').disabled`))
	if err != nil || !disabled {
		t.Errorf("Apply is enabled with a total of 110 (%v)", err)
	}
	p.do("entering 20 and applying", chromedp.SetValue(chromedp.CSS(input("1.1.0")), "20"),
		chromedp.Click(chromedp.CSS(".split-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(`.traffic table.split tr[data-version="1.1.0"]`)))
	if got := p.text(`.traffic table.split tr[data-version="1.1.0"] .percent`); got != "20%" {
		t.Errorf("the page shows 1.1.0 at %q", got)
	}
	if got := p.text(".app-summary"); !strings.Contains(got, "split: 1.1.0 20%, 1.0.0 80%") {
		t.Errorf("the summary says %q", got)
	}
	if got := traffic(t, s, "GET", "app", nil, 200); fmt.Sprint(got.Split) != "[{1.1.0 20} {1.0.0 80}]" {
		t.Errorf("after the form the API holds %v", got.Split)
	}
	p.screenshot("app-traffic", 1280)
	p.screenshot("app-traffic", 375)

	// A viewer sees it and is offered nothing to change.
	p.do("signing out", chromedp.Click(chromedp.Search(`//header//button[normalize-space()="Sign out"]`)), chromedp.WaitVisible(chromedp.CSS("form.signin")))
	p.do("opening the app page", chromedp.Navigate(p.base+"/apps/app"))
	p.signIn(viewer.Secret)
	p.do("waiting for the viewer's split", chromedp.WaitVisible(chromedp.CSS(`.traffic table.split tr[data-version="1.0.0"]`)))
	buttons, err := chromedp.Run(p.ctx, chromedp.Evaluate[int]("document.querySelectorAll('.traffic button').length"))
	if err != nil || buttons != 0 {
		t.Errorf("a viewer is offered %d buttons on the split (%v)", buttons, err)
	}

	p.do("signing out", chromedp.Click(chromedp.Search(`//header//button[normalize-space()="Sign out"]`)), chromedp.WaitVisible(chromedp.CSS("form.signin")))
	p.do("opening the app page", chromedp.Navigate(p.base+"/apps/app"))
	p.signIn(rootKey)
	p.do("ending the split", chromedp.Click(chromedp.Search(`//section[contains(@class,"traffic")]//button[normalize-space()="End the split"]`)),
		chromedp.WaitVisible(chromedp.CSS(".traffic .split-none")))
	if got := traffic(t, s, "GET", "app", nil, 200); len(got.Split) != 0 {
		t.Errorf("after End the split the API holds %v", got.Split)
	}
	problems.check(t)
}

// TestRolloutHealthGate: a process worker's canary goes through the health check like any
// upload. One that fails it gets nobody, not even while it is checked (its process listens
// and answers then): its share goes to the active version, the upload answers 422
// HEALTHCHECK_FAILED and its split is removed. A canary's other side is the active version,
// not a newer one that failed its check (which never gets a request); one that passes gets its
// share and becomes the active version, so rollout promote ends the split; promoting a failed
// version is refused; rollout abort leaves everyone on the version active before.
func TestRolloutHealthGate(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	key := harness.WithKey(rootKey)
	healthy := "healthcheck: { path: /healthz, timeout: 20s }\n"
	sick := "healthcheck: { path: '/read?path=/no/such/file', timeout: 2s }\n"
	uploadOK(t, s, "workers", "app.tgz", testWorkerArchive(t, "app", "1.0.0", healthy), rootKey)
	// 2.0.0 fails its check: the newest enabled version is not the active one.
	if resp := s.Upload(s.API+"/workers/upload", "app.tgz", testWorkerArchive(t, "app", "2.0.0", sick), key); resp.Status != 422 {
		t.Fatalf("upload of 2.0.0 = %s; want 422", resp)
	}

	ids := visitors(40)
	answer := func(id string) (string, error) {
		resp, err := s.Send("GET", "/app/", asVisitor(id))
		if err != nil {
			return "", err
		}
		v, err := servedVersion(resp)
		if h := resp.Header.Get(dataplane.VersionHeader); err == nil && h != v {
			err = fmt.Errorf("visitor %s: X-Worker-Version %q from %s", id, h, v)
		}
		return v, err
	}
	var allowed atomic.Value
	allowed.Store([]string{"1.0.0"})
	load := harness.Hammer(t, 4, func(_, n int) error {
		id := ids[n%len(ids)]
		v, err := answer(id)
		if want := allowed.Load().([]string); err == nil && !slices.Contains(want, v) {
			err = fmt.Errorf("visitor %s got %s; want one of %v", id, v, want)
		}
		return err
	})

	resp := s.Upload(s.API+"/workers/upload?canary=50", "app.tgz", testWorkerArchive(t, "app", "3.0.0", sick), key)
	for _, want := range []string{"app 3.0.0 is installed but not activated", "1.0.0 goes on serving app",
		"The canary's traffic split was removed: the version served before serves every request."} {
		if resp.Status != 422 || resp.ErrorCode() != "HEALTHCHECK_FAILED" || !strings.Contains(string(resp.Body), want) {
			t.Errorf("a canary that fails its check = %s; want 422 HEALTHCHECK_FAILED saying %q", resp, want)
		}
	}
	if got := traffic(t, s, "GET", "app", nil, 200); len(got.Split) != 0 {
		t.Errorf("the failed canary's split stayed: %v", got.Split)
	}
	var audit api.AuditPage
	if resp := s.Get(s.API+"/audit?action=worker.traffic", key); resp.Status != 200 || resp.JSON(&audit) != nil {
		t.Fatalf("GET audit = %s", resp)
	}
	if len(audit.Entries) != 2 || audit.Entries[0].Details["split"] != "" || audit.Entries[1].Details["split"] != "1.0.0=50,3.0.0=50" {
		t.Errorf("the audit trail of the canary's split: %+v", audit.Entries)
	}

	// 4.0.0 passes: its split's other side is 1.0.0, the active version, not 2.0.0 or 3.0.0.
	allowed.Store([]string{"1.0.0", "4.0.0"})
	resp = s.Upload(s.API+"/workers/upload?canary=50", "app.tgz", testWorkerArchive(t, "app", "4.0.0", healthy), key)
	var up api.WorkerUploaded
	if resp.Status != 200 || resp.JSON(&up) != nil {
		t.Fatalf("a canary that passes = %s", resp)
	}
	if got := fmt.Sprint(up.Data.Split); got != "[{1.0.0 50} {4.0.0 50}]" {
		t.Errorf("the canary's split = %s; want 1.0.0 (the active version) 50, 4.0.0 50", got)
	}
	if err := load.Stop(50); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		want := "1.0.0"
		if dataplane.Bucket(id, "app") < 50 {
			want = "4.0.0"
		}
		if v, err := answer(id); err != nil || v != want {
			t.Errorf("visitor %s got %s (%v); want %s", id, v, err, want)
		}
	}
	if rec := workers(t, s, rootKey)["app"]; rec.ActiveVersion != "4.0.0" || rec.Served != "4.0.0" || len(rec.FailedVersions) != 2 {
		t.Errorf("after the canary passed: %+v", rec)
	}

	c := newCLI(t)
	c.ok("login", "--url", s.URL, "--key", rootKey)
	if out, errOut, code := c.run("rollout", "promote", "app", "3.0.0"); code != 1 || !strings.Contains(errOut, "app 3.0.0 failed its health check on this instance") {
		t.Errorf("promoting a failed version exited %d: %s%s", code, out, errOut)
	}
	if out := c.ok("rollout", "promote", "app"); !strings.Contains(out, "Promoted app 4.0.0") || !strings.Contains(out, "app: no split") {
		t.Errorf("rollout promote printed %q", out)
	}
	for _, id := range ids[:10] {
		if v, err := answer(id); err != nil || v != "4.0.0" {
			t.Errorf("after promote, visitor %s got %s (%v)", id, v, err)
		}
	}

	// A canary aborted: everyone is back on 4.0.0, active before it.
	if resp := s.Upload(s.API+"/workers/upload?canary=50", "app.tgz", testWorkerArchive(t, "app", "5.0.0", healthy), key); resp.Status != 200 ||
		resp.JSON(&up) != nil || fmt.Sprint(up.Data.Split) != "[{4.0.0 50} {5.0.0 50}]" {
		t.Fatalf("the canary 5.0.0 = %s", resp)
	}
	if out := c.ok("rollout", "abort", "app"); !strings.Contains(out, "Aborted app 5.0.0") {
		t.Errorf("rollout abort printed %q", out)
	}
	for _, id := range ids {
		if v, err := answer(id); err != nil || v != "4.0.0" {
			t.Errorf("after abort, visitor %s got %s (%v); want 4.0.0", id, v, err)
		}
	}
	if rec := workers(t, s, rootKey)["app"]; rec.ActiveVersion != "4.0.0" || !slices.Contains(rec.DisabledVersions, "5.0.0") {
		t.Errorf("after abort: %+v", rec)
	}
}
