package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// cluster reads GET cluster with the root key.
func cluster(t *testing.T, s *harness.Server) api.Cluster {
	t.Helper()
	resp := s.Get(s.API+"/cluster", harness.WithKey(rootKey))
	var c api.Cluster
	if resp.Status != 200 || resp.JSON(&c) != nil {
		t.Fatalf("GET cluster = %s", resp)
	}
	return c
}

// only checks that c lists one instance, s itself, and returns it.
func only(t *testing.T, s *harness.Server, c api.Cluster) api.ClusterInstance {
	t.Helper()
	if len(c.Instances) != 1 || c.Change != 0 {
		t.Fatalf("GET cluster = %+v, want one instance at change 0", c)
	}
	in := c.Instances[0]
	if _, err := time.Parse(time.RFC3339, in.LastSeen); err != nil {
		t.Errorf("lastSeen %q: %v", in.LastSeen, err)
	}
	if !in.Self || in.AppliedChange != 0 || in.Version != s.Version || in.Address != fmt.Sprintf("127.0.0.1:%d", s.Port) {
		t.Errorf("the instance = %+v, want itself at 127.0.0.1:%d, version %s, applied 0", in, s.Port, s.Version)
	}
	return in
}

// TestClusterSingleInstance reads GET cluster of a runtime without a package store: exactly
// one instance, itself, healthy, with the id it keeps in state_dir: the same after a restart
// on that folder, another for another folder.
func TestClusterSingleInstance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := harness.Config{Dir: dir, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}}
	s := harness.Start(t, cfg)
	first := only(t, s, cluster(t, s))
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(first.ID) || first.Health != "ok" {
		t.Errorf("the instance = %+v, want a generated id and health ok", first)
	}
	if b, err := os.ReadFile(filepath.Join(s.DataDir, "state", "instance-id")); err != nil || strings.TrimSpace(string(b)) != first.ID {
		t.Errorf("state_dir's instance-id = %q, %v; want %s", b, err, first.ID)
	}
	viewer := s.CreateKey(rootKey, map[string]any{"name": "watcher", "role": "viewer"})
	if resp := s.Get(s.API+"/cluster", harness.WithKey(viewer.Secret)); resp.Status != 200 {
		t.Errorf("GET cluster as a viewer = %s", resp)
	}
	custom := s.CreateKey(rootKey, map[string]any{"name": "keys-only", "role": "custom", "permissions": []string{"keys:read"}})
	if resp := s.Get(s.API+"/cluster", harness.WithKey(custom.Secret)); resp.Status != 403 || resp.ErrorCode() != "PERMISSION_DENIED" {
		t.Errorf("GET cluster without workers:read = %s", resp)
	}
	// The command-line client: caddy runtime cluster, and bin/runtime's short form.
	c := newCLI(t)
	c.env = []string{"RUNTIME_URL=" + s.URL, "RUNTIME_API_KEY=" + rootKey}
	var listed api.Cluster
	if err := json.Unmarshal([]byte(c.ok("cluster", "--json")), &listed); err != nil || len(listed.Instances) != 1 || listed.Instances[0].ID != first.ID {
		t.Errorf("runtime cluster --json = %+v (%v), want the instance %s", listed, err, first.ID)
	}
	if out, errOut, code := c.runTop("cluster"); code != 0 || !strings.Contains(out, first.ID+" (answered)") || !strings.Contains(out, fmt.Sprintf("127.0.0.1:%d", s.Port)) {
		t.Errorf("runtime cluster: exit %d, %q %q", code, out, errOut)
	}
	if out, errOut, code := c.run("deploy", "../examples/static-app", "--wait"); code != 0 || !strings.Contains(out, "Served by this instance") {
		t.Errorf("deploy --wait on one instance: exit %d, %q %q", code, out, errOut)
	}
	s.Stop()

	again := harness.Start(t, cfg)
	if in := only(t, again, cluster(t, again)); in.ID != first.ID {
		t.Errorf("after a restart on the same state_dir the id is %s, was %s", in.ID, first.ID)
	}
	other := startWithRoot(t)
	if in := only(t, other, cluster(t, other)); in.ID == first.ID {
		t.Errorf("another state_dir has the same id %s", in.ID)
	}
}

// TestClusterSingleInstanceDegraded stops the primary of a sync-mode key store: the instance
// goes on listing itself, degraded, and ok again once the primary is back.
func TestClusterSingleInstanceDegraded(t *testing.T) {
	t.Parallel()
	primary := testkit.StartSqld(t)
	s := startSync(t, primary, "")
	if in := only(t, s, cluster(t, s)); in.Health != "ok" {
		t.Fatalf("with the primary up the instance is %s", in.Health)
	}
	health := func(want string) func() error {
		return func() error {
			if in := only(t, s, cluster(t, s)); in.Health != want {
				return fmt.Errorf("the instance is %s, want %s", in.Health, want)
			}
			return nil
		}
	}
	primary.Stop()
	testkit.EventuallyNil(t, 10*time.Second, health("degraded"))
	primary.Restart(t)
	testkit.EventuallyNil(t, 10*time.Second, health("ok"))
}

// TestCPanelInstances shows the instances on the Overview: this instance with its short id,
// address, version, applied change and health badge, fitting the screen at 1280 px and on a
// phone without scrolling the page sideways; a key without workers:read sees no panel.
func TestCPanelInstances(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	self := only(t, s, cluster(t, s))
	keysOnly := s.CreateKey(rootKey, map[string]any{"name": "keys-only", "role": "custom", "permissions": []string{"keys:read"}})
	p, problems := openPanel(t, s)
	p.do("opening the panel", chromedp.Navigate(p.base+"/"))
	p.signIn(rootKey)
	p.do("waiting for the instances", chromedp.WaitVisible(chromedp.CSS("table.instances td")))
	row := p.text("table.instances tbody tr")
	for _, want := range []string{self.ID[:8], "(this one)", fmt.Sprintf("127.0.0.1:%d", s.Port), s.Version, "0 of 0", "just now", "ok"} {
		if !strings.Contains(row, want) {
			t.Errorf("the instance's row says %q, want %q in it", row, want)
		}
	}
	if full, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('table.instances code').title`)); err != nil || full != self.ID {
		t.Errorf("the short id's title is %q (%v), want the whole id %s", full, err, self.ID)
	}
	if badge := p.text("table.instances .badge.ok"); badge != "ok" {
		t.Errorf("the health badge says %q", badge)
	}
	for _, width := range []int64{1280, 375} {
		p.do("resizing", chromedp.EmulateViewport(width, 900))
		fits, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](
			`document.documentElement.scrollWidth <= window.innerWidth && [...document.querySelectorAll('table.instances td')].every(td => td.getBoundingClientRect().right <= window.innerWidth)`))
		if err != nil || !fits {
			t.Errorf("at %d px the page scrolls sideways or an instance's cell leaves the screen (%v)", width, err)
		}
		p.screenshot("instances", width)
	}

	p.do("signing out", chromedp.Click(chromedp.Search(`//header//button[normalize-space()="Sign out"]`)), chromedp.WaitVisible(chromedp.CSS("form.signin")))
	p.signIn(keysOnly.Secret)
	p.do("waiting for the overview", chromedp.WaitVisible(chromedp.CSS(`section[aria-labelledby=runtime-h][aria-busy=false]`)))
	if shown, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`document.querySelector('#instances-h') !== null`)); err != nil || shown {
		t.Errorf("a key without workers:read is shown the instances (%v)", err)
	}
	problems.check(t)
}
