package integration

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
)

// loginCookie logs key in and returns its session cookie option.
func loginCookie(t *testing.T, s *harness.Server, key string, opts ...harness.Option) harness.Option {
	t.Helper()
	resp := login(t, s, key, opts...)
	if resp.Status != 200 {
		t.Fatalf("login = %s", resp)
	}
	return harness.WithCookie("runtime_api_key", cookieFrom(t, resp))
}

// TestServerSideSessions checks that sessions live on the server: listed to their owner, ended
// one by one, ended with their key, and never exposing their token.
func TestServerSideSessions(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	k := s.CreateKey(rootKey, map[string]any{"name": "me", "role": "viewer"})
	other := s.CreateKey(rootKey, map[string]any{"name": "other", "role": "viewer"})
	first := loginCookie(t, s, k.Secret, harness.WithHeader("User-Agent", "Firefox/140"))
	second := loginCookie(t, s, k.Secret, harness.WithHeader("User-Agent", "curl/8"))
	others := loginCookie(t, s, other.Secret)

	var list api.SessionList
	resp := s.Get(s.API+"/admin/sessions", first)
	if resp.Status != 200 || resp.JSON(&list) != nil || len(list.Sessions) != 2 {
		t.Fatalf("GET sessions = %s", resp)
	}
	mine, current := list.Sessions[0], list.Sessions[1]
	if !mine.Current || current.Current || mine.UserAgent != "Firefox/140" || current.UserAgent != "curl/8" ||
		mine.ExpiresAt-mine.CreatedAt != 86400 || mine.LastSeenAt < mine.CreatedAt {
		t.Fatalf("sessions = %+v", list.Sessions)
	}
	if strings.Contains(string(resp.Body), "rts_") {
		t.Fatal("the listing shows a token")
	}
	// Through a header key: the same sessions, none current.
	s.Get(s.API+"/admin/sessions", harness.WithKey(k.Secret)).JSON(&list)
	if len(list.Sessions) != 2 || list.Sessions[0].Current || list.Sessions[1].Current {
		t.Fatalf("sessions by header key = %+v", list.Sessions)
	}
	// The root key has its own sessions only.
	s.Get(s.API+"/admin/sessions", harness.WithKey(rootKey)).JSON(&list)
	if len(list.Sessions) != 0 {
		t.Fatalf("root sees other sessions: %+v", list.Sessions)
	}

	var theirs api.SessionList
	s.Get(s.API+"/admin/sessions", others).JSON(&theirs)
	end := func(id int64, opts ...harness.Option) *harness.Response {
		return s.Do("DELETE", fmt.Sprintf("%s/admin/sessions/%d", s.API, id), append(opts, harness.WithOrigin(""))...)
	}
	for _, tt := range []struct {
		name string
		resp *harness.Response
		want string
	}{
		{"another key's session", end(theirs.Sessions[0].ID, first), "404 SESSION_NOT_FOUND"},
		{"an unknown session", end(999999, first), "404 SESSION_NOT_FOUND"},
		{"by the root key", end(current.ID, harness.WithKey(rootKey)), "404 SESSION_NOT_FOUND"},
		{"not an id", s.Do("DELETE", s.API+"/admin/sessions/abc", first, harness.WithOrigin("")), "400 BAD_REQUEST"},
		{"without Origin", s.Do("DELETE", fmt.Sprintf("%s/admin/sessions/%d", s.API, current.ID), first), "403 CSRF_REJECTED"},
	} {
		if got := fmt.Sprintf("%d %s", tt.resp.Status, tt.resp.ErrorCode()); got != tt.want {
			t.Errorf("ending %s = %s, want %s", tt.name, tt.resp, tt.want)
		}
	}
	if status, _ := sessionOf(t, s, others); status != 200 {
		t.Fatal("a refused end ended another key's session")
	}

	// Ending another of one's own sessions: that cookie stops working, this one does not.
	if resp := end(current.ID, first); resp.Status != 200 || resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("ending the other session = %s (Set-Cookie %q)", resp, resp.Header.Get("Set-Cookie"))
	}
	if status, _ := sessionOf(t, s, second); status != 401 {
		t.Fatalf("an ended session still works (%d)", status)
	}
	// Ending the current one clears its cookie too.
	resp = end(mine.ID, first)
	if resp.Status != 200 || !strings.HasPrefix(resp.Header.Get("Set-Cookie"), "runtime_api_key=; Max-Age=0") {
		t.Fatalf("ending the current session = %s (Set-Cookie %q)", resp, resp.Header.Get("Set-Cookie"))
	}
	if status, _ := sessionOf(t, s, first); status != 401 {
		t.Fatalf("the ended current session still works (%d)", status)
	}

	// Revoking a key ends its sessions.
	if resp := s.Do("DELETE", fmt.Sprintf("%s/keys/%d", s.API, other.ID), harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("revoke = %s", resp)
	}
	resp = s.Get(s.API+"/admin/session", others)
	if resp.Status != 401 || !strings.Contains(string(resp.Body), "log in again") {
		t.Fatalf("a session of a revoked key = %s", resp)
	}
}

// TestEndOtherSessions ends all of a key's sessions but the caller's own, in one request:
// another key's session and the caller's go on, a header credential ends them all, the CSRF
// rule applies, and the end is audited with its count.
func TestEndOtherSessions(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	k := s.CreateKey(rootKey, map[string]any{"name": "me", "role": "viewer"})
	other := s.CreateKey(rootKey, map[string]any{"name": "other", "role": "viewer"})
	mine := loginCookie(t, s, k.Secret)
	laptop := loginCookie(t, s, k.Secret)
	phone := loginCookie(t, s, k.Secret)
	theirs := loginCookie(t, s, other.Secret)
	endOthers := func(opts ...harness.Option) (*harness.Response, int) {
		t.Helper()
		resp := s.Do("DELETE", s.API+"/admin/sessions", opts...)
		var body api.SessionsEnded
		if resp.Status == 200 && (resp.JSON(&body) != nil || !body.Success) {
			t.Fatalf("DELETE admin/sessions = %s", resp)
		}
		return resp, body.Data.Ended
	}

	if resp, _ := endOthers(mine); resp.Status != 403 || resp.ErrorCode() != "CSRF_REJECTED" {
		t.Fatalf("without Origin = %s, want 403 CSRF_REJECTED", resp)
	}
	resp, n := endOthers(mine, harness.WithOrigin(""))
	if resp.Status != 200 || n != 2 || resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("ending the others = %s (ended %d, Set-Cookie %q), want 2 and the cookie kept", resp, n, resp.Header.Get("Set-Cookie"))
	}
	for _, tt := range []struct {
		name    string
		session harness.Option
		want    int
	}{{"the caller's", mine, 200}, {"another", laptop, 401}, {"a third", phone, 401}, {"another key's", theirs, 200}} {
		if status, _ := sessionOf(t, s, tt.session); status != tt.want {
			t.Errorf("%s session answers %d, want %d", tt.name, status, tt.want)
		}
	}
	if resp, n := endOthers(mine, harness.WithOrigin("")); resp.Status != 200 || n != 0 {
		t.Errorf("with no other session = %s (ended %d), want 0", resp, n)
	}
	// A header credential has no session of its own: every session of its key ends.
	if resp, n := endOthers(harness.WithKey(k.Secret), harness.WithOrigin("")); resp.Status != 200 || n != 1 {
		t.Errorf("through the header key = %s (ended %d), want 1", resp, n)
	}
	if status, _ := sessionOf(t, s, mine); status != 401 {
		t.Errorf("after the header key ended them all, the cookie session answers %d", status)
	}

	var page struct{ Entries []api.AuditEntry }
	if resp := s.Get(s.API+"/audit?action=session.end_others", harness.WithKey(rootKey)); resp.Status != 200 || resp.JSON(&page) != nil {
		t.Fatalf("audit = %s", resp)
	}
	var counts []any
	for _, e := range page.Entries {
		if e.Actor == nil || e.Actor.Name != "me" || e.Outcome != "success" {
			t.Errorf("audit entry %+v", e)
		}
		counts = append(counts, e.Details["ended"])
	}
	if fmt.Sprint(counts) != "[1 0 2]" {
		t.Errorf("audited counts (newest first) = %v, want [1 0 2]", counts)
	}
}

// TestRootSessionEndsWithTheRootKey checks that a root session stops working once the root
// key is changed, while the runtime keeps running.
func TestRootSessionEndsWithTheRootKey(t *testing.T) {
	t.Parallel()
	const oldRoot, newRoot = "first-root-key-0123456789abcdefghij", "second-root-key-0123456789abcdefghij"
	cfg := harness.Config{HTTP2: true, Env: map[string]string{"OLD_ROOT": oldRoot, "NEW_ROOT": newRoot}, App: "root_key {env.OLD_ROOT}"}
	s := harness.Start(t, cfg)
	cookie := loginCookie(t, s, oldRoot)
	if status, p := sessionOf(t, s, cookie); status != 200 || !p.IsRoot {
		t.Fatalf("root session = %d %+v", status, p)
	}
	cfg.App = "root_key {env.NEW_ROOT}"
	if err := s.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	// A connection opened before the reload may still reach the old config until its GOAWAY
	// is read (a busy machine can keep one in use past CloseIdleConnections); the root key
	// has changed for every request on a new one.
	s.Client.CloseIdleConnections()
	harness.Eventually(t, "the root session to end with the root key", 10*time.Second, func() bool {
		status, _ := sessionOf(t, s, cookie)
		return status == 401
	})
	if status, p := sessionOf(t, s, loginCookie(t, s, newRoot)); status != 200 || !p.IsRoot {
		t.Fatalf("root session with the new key = %d %+v", status, p)
	}
}

// TestRankRules checks that a key revokes only keys within its own rights and creates none
// that outlives it.
func TestRankRules(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	teamRevoker := s.CreateKey(rootKey, map[string]any{"name": "team-revoker", "role": "custom", "permissions": []string{"keys:revoke"}, "namespaces": []string{"@team"}})
	revoker := s.CreateKey(rootKey, map[string]any{"name": "revoker", "role": "custom", "permissions": []string{"keys:revoke", "workers:read"}})
	teamAdmin := s.CreateKey(rootKey, map[string]any{"name": "team-admin", "role": "admin", "namespaces": []string{"@team"}})
	admin := s.CreateKey(rootKey, map[string]any{"name": "admin", "role": "admin"})
	peer := s.CreateKey(rootKey, map[string]any{"name": "peer", "role": "custom", "permissions": []string{"keys:revoke"}, "namespaces": []string{"@team"}})
	reader := s.CreateKey(rootKey, map[string]any{"name": "reader", "role": "custom", "permissions": []string{"workers:read"}})

	for _, tt := range []struct {
		name   string
		as     string
		target harness.Key
		want   string
	}{
		{"restricted revoker revokes its namespace's admin", teamRevoker.Secret, teamAdmin, "403 PRIVILEGE_ESCALATION"},
		{"unrestricted revoker revokes an admin", revoker.Secret, admin, "403 PRIVILEGE_ESCALATION"},
		{"restricted revoker revokes an unrestricted key", teamRevoker.Secret, reader, "403 NAMESPACE_DENIED"},
		{"revoker revokes a key within its rights", revoker.Secret, reader, "200 "},
		{"restricted revoker revokes its peer", teamRevoker.Secret, peer, "200 "},
		{"root revokes an admin", rootKey, teamAdmin, "200 "},
	} {
		resp := s.Do("DELETE", fmt.Sprintf("%s/keys/%d", s.API, tt.target.ID), harness.WithKey(tt.as), harness.WithOrigin(""))
		if got := fmt.Sprintf("%d %s", resp.Status, resp.ErrorCode()); got != tt.want {
			t.Errorf("%s = %s, want %s", tt.name, resp, tt.want)
		}
	}
	if status, _ := sessionOf(t, s, harness.WithKey(admin.Secret)); status != 200 {
		t.Fatal("a refused revoke revoked the admin")
	}

	month := s.CreateKey(rootKey, map[string]any{"name": "month", "role": "admin", "expiresIn": "30d"})
	day := s.CreateKey(rootKey, map[string]any{"name": "day", "role": "admin", "expiresIn": "1d"})
	for _, tt := range []struct {
		name, as string
		body     map[string]any
		ok       bool
	}{
		{"a one-day key creates a key that never expires", day.Secret, map[string]any{"name": "x", "expiresIn": "never"}, false},
		{"a one-day key creates a two-day key", day.Secret, map[string]any{"name": "x", "expiresIn": "2d"}, false},
		{"a 30-day key creates a key without expiresIn", month.Secret, map[string]any{"name": "x"}, false},
		{"a 30-day key creates a one-year key", month.Secret, map[string]any{"name": "x", "expiresIn": "1y"}, false},
		{"a 30-day key creates a 7-day key", month.Secret, map[string]any{"name": "x", "expiresIn": "7d"}, true},
		{"root creates a key that never expires", rootKey, map[string]any{"name": "x"}, true},
	} {
		resp := s.Do("POST", s.API+"/keys", harness.WithKey(tt.as), harness.WithOrigin(""), harness.WithJSON(tt.body))
		if tt.ok && resp.Status != 200 ||
			!tt.ok && (resp.Status != 403 || resp.ErrorCode() != "PRIVILEGE_ESCALATION" || !strings.Contains(string(resp.Body), "outlive its creator")) {
			t.Errorf("%s = %s, want ok=%v", tt.name, resp, tt.ok)
		}
	}
}

// TestKeyNames checks that a key name is stored as sent or refused: valid UTF-8, printable.
func TestKeyNames(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	for name, body := range map[string][]byte{
		"control character":  []byte(`{"name":"a\u0007b"}`),
		"escape sequence":    []byte(`{"name":"\u001b[31mred"}`),
		"invalid UTF-8":      []byte("{\"name\":\"caf\xe9\"}"),
		"lone surrogate":     []byte(`{"name":"a\ud800b"}`),
		"right-to-left mark": []byte(`{"name":"abc\u202egpj.exe"}`),
	} {
		resp := s.Do("POST", s.API+"/keys", harness.WithKey(rootKey), harness.WithBody("application/json", body))
		if resp.Status != 400 || resp.ErrorCode() != "INVALID_KEY_NAME" {
			t.Errorf("name with %s = %s, want 400 INVALID_KEY_NAME", name, resp)
		}
	}
	s.CreateKey(rootKey, map[string]any{"name": "café ✓ 東京"})
	var list api.KeyList
	s.Get(s.API+"/keys", harness.WithKey(rootKey)).JSON(&list)
	if len(list.Keys) != 1 || list.Keys[0].Name != "café ✓ 東京" {
		t.Fatalf("keys = %+v", list.Keys)
	}
}

// TestBootstrapKeyFileGoesWithItsKey checks that bootstrap-key is deleted when its key is
// revoked, and at start when its key no longer works.
func TestBootstrapKeyFileGoesWithItsKey(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	file := filepath.Join(state, "bootstrap-key")
	cfg := harness.Config{App: "state_dir " + state}
	s := harness.Start(t, cfg)
	bootstrap := readBootstrap(t, file)
	admin := s.CreateKey(bootstrap, map[string]any{"name": "admin", "role": "admin"})
	second := s.CreateKey(admin.Secret, map[string]any{"name": "second", "role": "admin"})
	var list api.KeyList
	s.Get(s.API+"/keys", harness.WithKey(admin.Secret)).JSON(&list)
	if resp := s.Do("DELETE", fmt.Sprintf("%s/keys/%d", s.API, list.Keys[0].ID), harness.WithKey(admin.Secret), harness.WithOrigin("")); resp.Status != 200 {
		t.Fatalf("revoking the bootstrap key = %s", resp)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatal("bootstrap-key outlived the revocation of its key")
	}
	entry, err := s.WaitLog("the bootstrap key no longer works: deleted its file", 5*time.Second)
	if err != nil || entry["file"] != file || entry["reason"] != "revoked" {
		t.Fatalf("log = %v, %v", entry, err)
	}
	s.Stop()

	// A bootstrap-key whose key was revoked while the runtime was down goes at the next start.
	if err := os.WriteFile(file, []byte(admin.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	execStore(t, filepath.Join(state, "api-keys.db"), `UPDATE api_keys SET revoked_at = 1 WHERE id = ?`, admin.ID)
	s = harness.Start(t, cfg)
	if _, err := s.WaitLog("the bootstrap key no longer works: deleted its file", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatal("a dead bootstrap-key survived the start")
	}
	if status, _ := sessionOf(t, s, harness.WithKey(second.Secret)); status != 200 {
		t.Fatal("the remaining key does not work")
	}
}

func readBootstrap(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// execStore runs a statement on a key store file while the runtime is stopped.
func execStore(t *testing.T, path, query string, args ...any) {
	t.Helper()
	db, err := sql.Open("libsql", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatal(err)
	}
}

// TestStateIsTightenedAtStart checks that an existing state_dir and its files are made
// owner-only at start, with a log line per change.
func TestStateIsTightenedAtStart(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	cfg := harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: "state_dir " + state}
	harness.Start(t, cfg).Stop()
	store := filepath.Join(state, "api-keys.db")
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(store, 0o644); err != nil {
		t.Fatal(err)
	}
	s := harness.Start(t, cfg)
	for path, mode := range map[string]os.FileMode{state: 0o700, store: 0o600} {
		if info, err := os.Stat(path); err != nil || info.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v (%v)", path, info.Mode().Perm(), mode, err)
		}
	}
	logged := map[string]string{}
	for _, e := range s.LogEntries("tightened the permissions of runtime state, which holds the key store and the bootstrap key") {
		logged[e["path"].(string)] = fmt.Sprint(e["was"], " → ", e["now"])
	}
	if logged[state] != "0755 → 0700" || logged[store] != "0644 → 0600" || len(logged) != 2 {
		t.Fatalf("tightening log = %v", logged)
	}
	// Nothing to tighten: no log line.
	s.Stop()
	s = harness.Start(t, cfg)
	if n := len(s.LogEntries("tightened the permissions of runtime state, which holds the key store and the bootstrap key")); n != 0 {
		t.Fatalf("%d tightening lines on a tight state_dir", n)
	}
}

// TestDamagedStateRefusedAtStart checks that start-up stops, with a message naming the file
// or setting and saying what to do, on each damaged or unsafe state.
func TestDamagedStateRefusedAtStart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		store []byte // written as api-keys.db; nil: none
		env   map[string]string
		want  []string
	}{
		{"empty key store", []byte{}, nil, []string{"api-keys.db is empty (0 bytes)", "backup"}},
		{"foreign key store", []byte("<html>not a database</html>\n"), nil, []string{"api-keys.db is not a SQLite database", "backup"}},
		{"root key of one character", nil, map[string]string{"RUNTIME_ROOT_KEY": "aaaaaaaaaaaaaaaa"},
			[]string{"root_key", "only 1 distinct characters", "openssl rand -base64 32"}},
		{"root key of few characters", nil, map[string]string{"RUNTIME_ROOT_KEY": "abcdabcdabcdabcdabcd1234"},
			[]string{"root_key", "only 8 distinct characters", "openssl rand -base64 32"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			path := filepath.Join(state, "api-keys.db")
			if tt.store != nil {
				if err := os.WriteFile(path, tt.store, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			s, err := harness.Launch(t, harness.Config{Env: tt.env, App: "state_dir " + state})
			if err != nil {
				t.Fatal(err)
			}
			if !s.WaitExit(30 * time.Second) {
				t.Fatal("the runtime started")
			}
			for _, want := range tt.want {
				if !strings.Contains(s.Logs(), want) {
					t.Errorf("start-up output does not contain %q:\n%s", want, s.Logs())
				}
			}
			if tt.store != nil && !strings.Contains(s.Logs(), path) {
				t.Errorf("start-up output does not name %s", path)
			}
			if got, _ := os.ReadFile(path); tt.store != nil && string(got) != string(tt.store) {
				t.Error("the refused file was changed")
			}
			if strings.Contains(s.Logs(), "aaaaaaaaaaaaaaaa") || strings.Contains(s.Logs(), "abcdabcdabcd") {
				t.Error("the output reveals the root key")
			}
		})
	}
}

// TestShortRootKeyIsWarnedAbout checks the warning on a root key shorter than 32 characters.
func TestShortRootKeyIsWarnedAbout(t *testing.T) {
	t.Parallel()
	const short = "Zq8-Lp3!Wx6#Rt1$Yb"
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": short}})
	if !strings.Contains(s.Logs(), "root_key is 18 characters long; use at least 32 random characters: generate one with: openssl rand -base64 32") {
		t.Fatalf("no warning about the short root key:\n%s", s.Logs())
	}
	if strings.Contains(s.Logs(), short) {
		t.Fatal("the output reveals the root key")
	}
	if status, p := sessionOf(t, s, harness.WithKey(short)); status != 200 || !p.IsRoot {
		t.Fatalf("the short root key is refused: %d", status)
	}
}
