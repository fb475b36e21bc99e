package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

type auditEntry struct {
	ID    int64
	Time  string
	Actor *struct {
		ID              int64
		Name, KeyPrefix string
	}
	Action     string
	Target     string
	Outcome    string
	RequestID  string
	RemoteAddr string
	Details    map[string]any
}

type auditPage struct {
	Entries    []auditEntry
	NextCursor string
}

// TestAuditTrail scripts a session of actions and reads them back from GET audit: newest
// first, with filters and paging, scoped for a namespaced key, and without a secret.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	begin := time.Now().UTC()
	app := harness.TarGz(t, pkg("name: '@team/app'\nversion: 1.0.0\n", harness.File{Name: "index.html", Body: "<p>app</p>"})...)
	other := harness.TarGz(t, pkg("name: other\nversion: 2.0.0\n", harness.File{Name: "index.html", Body: "<p>other</p>"})...)

	type step struct {
		action, target, outcome string
	}
	var script []step
	var uploadID string
	did := func(action, target, outcome string) { script = append(script, step{action, target, outcome}) }

	// Refused logins are audited once a minute (TestRefusedLoginsAuditedPerAddress).
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "editor", "namespaces": []string{"@team"}})
	did("key.create", fmt.Sprintf("team (#%d)", team.ID), "success")
	auditor := s.CreateKey(rootKey, map[string]any{"name": "auditor", "role": "viewer", "namespaces": []string{"@team"}})
	did("key.create", fmt.Sprintf("auditor (#%d)", auditor.ID), "success")
	resp := login(t, s, team.Secret)
	cookie := cookieFrom(t, resp)
	did("session.login", "team", "success")
	asTeam := []harness.Option{harness.WithCookie("runtime_api_key", cookie), harness.WithOrigin("")}
	if resp := s.Upload(s.API+"/workers/upload", "app.tgz", app, asTeam...); resp.Status != 200 {
		t.Fatalf("upload = %s", resp)
	} else {
		uploadID = resp.Header.Get("X-Request-Id")
	}
	did("worker.upload", "@team/app@1.0.0", "success")
	for _, verb := range []string{"disable", "enable"} {
		if resp := s.Do("POST", s.API+"/workers/@team/app/1.0.0/"+verb, asTeam...); resp.Status != 200 {
			t.Fatalf("%s = %s", verb, resp)
		}
		did("worker."+verb, "@team/app@1.0.0", "success")
	}
	if resp := s.Upload(s.API+"/workers/upload", "other.tgz", other, asTeam...); resp.Status != 403 {
		t.Fatalf("upload outside the namespace = %s", resp)
	}
	did("worker.upload", "", "failed")
	uploadOK(t, s, "workers", "other.tgz", other, rootKey)
	did("worker.upload", "other@2.0.0", "success")
	if resp := s.Do("DELETE", s.API+"/workers/_/other", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("delete = %s", resp)
	}
	did("worker.delete", "other", "success")
	if resp := s.Do("DELETE", s.API+"/admin/session", asTeam...); resp.Status != 204 {
		t.Fatalf("logout = %s", resp)
	}
	did("session.logout", "", "success")
	if resp := s.Do("DELETE", fmt.Sprintf("%s/keys/%d", s.API, team.ID), harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("revoke = %s", resp)
	}
	did("key.revoke", fmt.Sprintf("team (#%d)", team.ID), "success")

	read := func(key, query string) (auditPage, string) {
		t.Helper()
		var page auditPage
		resp := s.Get(s.API+"/audit"+query, harness.WithKey(key))
		if resp.Status != 200 || resp.JSON(&page) != nil {
			t.Fatalf("GET audit%s = %s", query, resp)
		}
		return page, string(resp.Body)
	}
	all, body := read(rootKey, "?limit=500")
	if len(all.Entries) != len(script) || all.NextCursor != "" {
		t.Fatalf("%d entries (next %q), want %d:\n%s", len(all.Entries), all.NextCursor, len(script), body)
	}
	for i, e := range all.Entries {
		want := script[len(script)-1-i]
		if e.Action != want.action || e.Target != want.target || e.Outcome != want.outcome {
			t.Errorf("entry %d = %s %q %s, want %s %q %s", i, e.Action, e.Target, e.Outcome, want.action, want.target, want.outcome)
		}
		if e.RequestID == "" || e.RemoteAddr != "127.0.0.1" {
			t.Errorf("entry %d: request id %q, remote address %q", i, e.RequestID, e.RemoteAddr)
		}
		if at, err := time.Parse(time.RFC3339Nano, e.Time); err != nil || at.Before(begin.Add(-time.Second)) {
			t.Errorf("entry %d: time %q", i, e.Time)
		}
	}
	upload := all.Entries[len(script)-4]
	if upload.Action != "worker.upload" || upload.RequestID != uploadID || upload.Actor == nil || upload.Actor.ID != team.ID || upload.Actor.Name != "team" {
		t.Errorf("the upload entry = %+v (the response's id %s)", upload, uploadID)
	}
	for _, secret := range []string{team.Secret, auditor.Secret, rootKey, cookie} {
		if strings.Contains(body, secret) {
			t.Errorf("the audit trail holds a secret (%.8s…)", secret)
		}
	}

	actions := func(p auditPage) []string {
		var out []string
		for _, e := range p.Entries {
			out = append(out, e.Action+" "+e.Target)
		}
		return out
	}
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"?action=worker.enable", []string{"worker.enable @team/app@1.0.0"}},
		{"?action=worker.&target=%40team%2Fapp", []string{"worker.enable @team/app@1.0.0", "worker.disable @team/app@1.0.0", "worker.upload @team/app@1.0.0"}},
		{"?actor=team&action=session.", []string{"session.logout ", "session.login team"}},
		{"?until=" + begin.Add(-time.Hour).Format(time.RFC3339), nil},
		{"?since=" + begin.Add(-time.Second).Format(time.RFC3339) + "&action=key.revoke", []string{fmt.Sprintf("key.revoke team (#%d)", team.ID)}},
	} {
		page, _ := read(rootKey, tt.query)
		if got := actions(page); !slices.Equal(got, tt.want) {
			t.Errorf("audit%s = %q, want %q", tt.query, got, tt.want)
		}
	}

	// Paging three at a time gives every entry once, in order.
	var paged []int64
	for cursor := ""; ; {
		page, _ := read(rootKey, "?limit=3&cursor="+cursor)
		if len(page.Entries) > 3 {
			t.Fatalf("a page of %d", len(page.Entries))
		}
		for _, e := range page.Entries {
			paged = append(paged, e.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	var ids []int64
	for _, e := range all.Entries {
		ids = append(ids, e.ID)
	}
	if !slices.Equal(paged, ids) {
		t.Errorf("pages gave %v, want %v", paged, ids)
	}

	// A key restricted to @team sees only the entries about @team's units.
	scoped, _ := read(auditor.Secret, "")
	if got, want := actions(scoped), []string{"worker.enable @team/app@1.0.0", "worker.disable @team/app@1.0.0", "worker.upload @team/app@1.0.0"}; !slices.Equal(got, want) {
		t.Errorf("the @team auditor sees %q, want %q", got, want)
	}
	for _, tt := range []struct{ query, key string }{
		{"?limit=0", rootKey}, {"?limit=501", rootKey}, {"?since=yesterday", rootKey}, {"?cursor=abc", rootKey},
	} {
		if resp := s.Get(s.API+"/audit"+tt.query, harness.WithKey(tt.key)); resp.Status != 400 || resp.ErrorCode() != "BAD_REQUEST" {
			t.Errorf("GET audit%s = %s, want 400 BAD_REQUEST", tt.query, resp)
		}
	}
	if resp := s.Get(s.API+"/audit", harness.WithKey(s.CreateKey(rootKey, map[string]any{"name": "ed", "role": "editor"}).Secret)); resp.Status != 403 || resp.ErrorCode() != "PERMISSION_DENIED" {
		t.Errorf("an editor reads the audit trail: %s", resp)
	}
}

// TestRefusedLoginsAuditedPerAddress is attack 8 of issue 22: refused sign-ins cost anyone an
// audit write each. Each one is still answered 401 at once and counted in the metrics, but the
// audit trail gets one entry per client address (Caddy's client IP, which honours
// trusted_proxies) and minute, with the count, written when the minute ends or the runtime
// stops.
func TestRefusedLoginsAuditedPerAddress(t *testing.T) {
	t.Parallel()
	cfg := harness.Config{
		Env:    map[string]string{"RUNTIME_ROOT_KEY": rootKey},
		Global: "servers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}",
	}
	s := harness.Start(t, cfg)
	sent := map[string]int{"203.0.113.7": 5, "198.51.100.9": 3, "127.0.0.1": 2}
	begin := time.Now()
	for addr, n := range sent {
		var opts []harness.Option
		if addr != "127.0.0.1" { // through the trusted proxy
			opts = append(opts, harness.WithHeader("X-Forwarded-For", addr))
		}
		for range n {
			if resp := login(t, s, "rtk_"+strings.Repeat("Z", 43), opts...); resp.Status != 401 || resp.ErrorCode() != "INVALID_KEY" {
				t.Fatalf("a refused login from %s = %s", addr, resp)
			}
		}
	}
	end := time.Now()
	if got := scrape(t, s)[`runtime_auth_failures_total{reason="login"}`]; got != 10 {
		t.Errorf("runtime_auth_failures_total{reason=\"login\"} = %v, want 10", got)
	}
	// The test may cross a minute's end: each address then has an entry for each minute.
	minutes := int(end.Truncate(time.Minute).Sub(begin.Truncate(time.Minute))/time.Minute) + 1

	s.Stop() // writes the minute under way
	lines, total := 0, 0.0
	for _, e := range s.LogEntries("audit") {
		if e["action"] == "session.login" && e["outcome"] == "denied" {
			lines++
			count, _ := e["count"].(float64)
			total += count
		}
	}
	if lines < len(sent) || lines > len(sent)*minutes || total != 10 {
		t.Errorf("%d audit lines of refused logins counting %v, want %d to %d counting 10", lines, total, len(sent), len(sent)*minutes)
	}

	again := harness.Start(t, harness.Config{Dir: s.Dir, Env: cfg.Env, Global: cfg.Global})
	var page auditPage
	if resp := again.Get(again.API+"/audit?action=session.login&limit=500", harness.WithKey(rootKey)); resp.Status != 200 || resp.JSON(&page) != nil {
		t.Fatalf("GET audit = %s", resp)
	}
	rows, counted := map[string]int{}, map[string]int{}
	for _, e := range page.Entries {
		count, _ := e.Details["count"].(float64)
		if e.Outcome != "denied" || e.Actor != nil || e.RequestID == "" || count < 1 {
			t.Errorf("entry %+v, want a denied login without an actor, with a request id and a count", e)
		}
		rows[e.RemoteAddr]++
		counted[e.RemoteAddr] += int(count)
	}
	for addr, n := range sent {
		if counted[addr] != n || rows[addr] < 1 || rows[addr] > minutes {
			t.Errorf("%s: %d entries counting %d, want 1 to %d counting %d", addr, rows[addr], counted[addr], minutes, n)
		}
	}
	if len(rows) != len(sent) {
		t.Errorf("entries from %v, want from %v", rows, sent)
	}
}
