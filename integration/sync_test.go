package integration

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	_ "github.com/tursodatabase/libsql-client-go/libsql" // to read the primary as an operator would

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// syncRuntime is the runtime block of an instance whose key store is a replica of primary,
// pulling every second.
func syncRuntime(primary *testkit.Sqld, extra string) string {
	return fmt.Sprintf("key_store sync {\n\t\t\turl %s\n\t\t\tinterval 1s\n%s\t\t}", primary.URL, extra)
}

// startSync starts a runtime instance in sync mode on primary with the root key.
func startSync(t *testing.T, primary *testkit.Sqld, dir string) *harness.Server {
	t.Helper()
	return harness.Start(t, harness.Config{App: syncRuntime(primary, ""), Dir: dir, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
}

// primaryDB opens the primary as an operator's SQL client would.
func primaryDB(t *testing.T, primary *testkit.Sqld) *sql.DB {
	t.Helper()
	db, err := sql.Open("libsql", primary.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// ready reads an instance's readiness answer: its status and key store state.
func ready(s *harness.Server) (int, string) {
	resp := s.Get(s.API + "/health/ready")
	var body struct {
		KeyStore string `json:"keyStore"`
	}
	_ = resp.JSON(&body)
	return resp.Status, body.KeyStore
}

// TestSyncTwoInstances runs two runtimes on one sqld: keys and sessions made on one work on the
// other, ends reach the other within the interval, and both instances' last-use times and
// audit entries reach the primary.
func TestSyncTwoInstances(t *testing.T) {
	primary := testkit.StartSqld(t)
	a := startSync(t, primary, "")
	b := startSync(t, primary, "")
	for name, s := range map[string]*harness.Server{"A": a, "B": b} {
		if status, keyStore := ready(s); status != 200 || keyStore != "ok" {
			t.Fatalf("%s ready = %d, keyStore %q", name, status, keyStore)
		}
	}

	k := a.CreateKey(rootKey, map[string]any{"name": "shared", "role": "viewer"})
	if resp := a.Get(a.API+"/admin/session", harness.WithKey(k.Secret)); resp.Status != 200 {
		t.Fatalf("key made on A, at once on A = %s", resp)
	}
	if resp := b.Get(b.API+"/admin/session", harness.WithKey(k.Secret)); resp.Status != 200 {
		t.Fatalf("key made on A, first use on B = %s", resp)
	}

	login := a.Do("POST", a.API+"/admin/session", harness.WithOrigin(""), harness.WithJSON(map[string]string{"key": k.Secret}))
	cookies := (&http.Response{Header: login.Header}).Cookies()
	if login.Status != 200 || len(cookies) != 1 {
		t.Fatalf("login on A = %s", login)
	}
	cookie := harness.WithCookie(cookies[0].Name, cookies[0].Value)
	if resp := b.Get(b.API+"/admin/session", cookie); resp.Status != 200 {
		t.Fatalf("session made on A, on B = %s", resp)
	}
	if resp := b.Do("DELETE", b.API+"/admin/session", cookie, harness.WithOrigin("")); resp.Status != 204 {
		t.Fatalf("sign-out on B = %s", resp)
	}
	waitStatus(t, a, a.API+"/admin/session", 401, 3*time.Second, cookie)

	revoke := b.Do("DELETE", fmt.Sprintf("%s/keys/%d", b.API, k.ID), harness.WithKey(rootKey), harness.WithOrigin(""))
	if revoke.Status != 200 {
		t.Fatalf("revoke on B = %s", revoke)
	}
	start := time.Now()
	waitStatus(t, a, a.API+"/admin/session", 401, 3*time.Second, harness.WithKey(k.Secret))
	t.Logf("the revocation reached A after %v (interval 1s)", time.Since(start))

	db := primaryDB(t, primary)
	testkit.EventuallyNil(t, 10*time.Second, func() error {
		var used sql.NullInt64
		if err := db.QueryRow(`SELECT last_used_at FROM api_keys WHERE id = ?`, k.ID).Scan(&used); err != nil || !used.Valid {
			return fmt.Errorf("the key's last use on the primary = %v, %v", used, err)
		}
		actions := map[string]bool{}
		rows, err := db.Query(`SELECT action FROM audit`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var action string
			rows.Scan(&action)
			actions[action] = true
		}
		for _, want := range []string{"key.create", "session.login", "session.logout", "key.revoke"} {
			if !actions[want] {
				return fmt.Errorf("no %s entry on the primary; it has %v", want, actions)
			}
		}
		return nil
	})
}

// waitStatus polls GET path until it answers status, failing after timeout.
func waitStatus(t *testing.T, s *harness.Server, path string, status int, timeout time.Duration, opts ...harness.Option) {
	t.Helper()
	testkit.EventuallyNil(t, timeout, func() error {
		if resp := s.Get(path, opts...); resp.Status != status {
			return fmt.Errorf("GET %s = %s, want %d", path, resp, status)
		}
		return nil
	})
}

// TestSyncPrimaryOutage stops sqld under two instances: existing keys keep working, writes
// answer 503 KEY_STORE_UNAVAILABLE, ready says degraded and live stays up; once sqld is back,
// writes work and what was audited meanwhile reaches the primary.
func TestSyncPrimaryOutage(t *testing.T) {
	primary := testkit.StartSqld(t)
	a := startSync(t, primary, "")
	b := startSync(t, primary, "")
	k := a.CreateKey(rootKey, map[string]any{"name": "ci", "role": "admin"})
	if resp := b.Get(b.API+"/admin/session", harness.WithKey(k.Secret)); resp.Status != 200 {
		t.Fatalf("B before the outage = %s", resp)
	}

	primary.Stop()
	for name, s := range map[string]*harness.Server{"A": a, "B": b} {
		if resp := s.Get(s.API+"/workers", harness.WithKey(k.Secret)); resp.Status != 200 {
			t.Errorf("%s: an existing key during the outage = %s", name, resp)
		}
	}
	create := a.Do("POST", a.API+"/keys", harness.WithKey(k.Secret), harness.WithOrigin(""), harness.WithJSON(map[string]any{"name": "during"}))
	if create.Status != 503 || create.ErrorCode() != "KEY_STORE_UNAVAILABLE" || !strings.Contains(string(create.Body), "primary") {
		t.Fatalf("creating a key during the outage = %s", create)
	}
	login := b.Do("POST", b.API+"/admin/session", harness.WithOrigin(""), harness.WithJSON(map[string]string{"key": k.Secret}))
	if login.Status != 503 || login.ErrorCode() != "KEY_STORE_UNAVAILABLE" {
		t.Fatalf("a login during the outage = %s", login)
	}
	testkit.EventuallyNil(t, 5*time.Second, func() error {
		if status, keyStore := ready(a); status != 200 || keyStore != "degraded" {
			return fmt.Errorf("ready during the outage = %d, keyStore %q", status, keyStore)
		}
		return nil
	})
	if resp := a.Get(a.API + "/health/live"); resp.Status != 200 {
		t.Fatalf("live during the outage = %s", resp)
	}
	// An audited action that needs no key store write: its entry waits for the primary.
	site := harness.TarGz(t, pkg("name: during-outage\nversion: 1.0.0\n", harness.File{Name: "index.html", Body: "hi"})...)
	upload := a.Upload(a.API+"/workers/upload", "during.tgz", site, harness.WithKey(k.Secret))
	if upload.Status != 200 {
		t.Fatalf("an upload during the outage = %s", upload)
	}

	primary.Restart(t)
	testkit.EventuallyNil(t, 15*time.Second, func() error {
		if status, keyStore := ready(a); status != 200 || keyStore != "ok" {
			return fmt.Errorf("ready after the outage = %d, keyStore %q", status, keyStore)
		}
		return nil
	})
	after := a.CreateKey(k.Secret, map[string]any{"name": "after"})
	if resp := b.Get(b.API+"/admin/session", harness.WithKey(after.Secret)); resp.Status != 200 {
		t.Fatalf("a key made after the outage, on B = %s", resp)
	}
	testkit.EventuallyNil(t, 15*time.Second, func() error {
		resp := b.Get(b.API+"/audit?action=worker.upload", harness.WithKey(k.Secret))
		if resp.Status != 200 || !strings.Contains(string(resp.Body), "during-outage") {
			return fmt.Errorf("the upload's audit entry on B = %s", resp)
		}
		return nil
	})
}

// TestSyncStartWithoutPrimary starts instances while sqld is down: one with a replica from an
// earlier run serves its keys, degraded; one without a replica is not ready, yet takes the
// root key, and becomes ready once sqld is back.
func TestSyncStartWithoutPrimary(t *testing.T) {
	primary := testkit.StartSqld(t)
	dir := t.TempDir()
	first := startSync(t, primary, dir)
	k := first.CreateKey(rootKey, map[string]any{"name": "kept", "role": "viewer"})
	first.Stop()
	primary.Stop()

	again := startSync(t, primary, dir)
	if status, keyStore := ready(again); status != 200 || keyStore != "degraded" {
		t.Fatalf("a replica started without its primary: ready %d, keyStore %q", status, keyStore)
	}
	if resp := again.Get(again.API+"/admin/session", harness.WithKey(k.Secret)); resp.Status != 200 {
		t.Fatalf("the replica's key = %s", resp)
	}

	fresh, err := harness.Launch(t, harness.Config{App: syncRuntime(primary, ""), Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	if err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNil(t, 30*time.Second, func() error {
		if resp, err := fresh.Send("GET", "/api/health/live"); err != nil || resp.Status != 200 {
			return fmt.Errorf("live: %v %v", resp, err)
		}
		return nil
	})
	if resp, _ := fresh.Send("GET", "/api/health/ready"); resp.Status != 503 || resp.ErrorCode() != "NOT_READY" {
		t.Fatalf("ready with neither replica nor primary = %s", resp)
	}
	if resp, _ := fresh.Send("GET", "/api/admin/session", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("the root key with neither replica nor primary = %s", resp)
	}
	if resp, _ := fresh.Send("GET", "/api/admin/session", harness.WithKey(k.Secret)); resp.Status != 503 {
		t.Fatalf("an API key on a replica that never pulled = %s, want 503", resp)
	}
	primary.Restart(t)
	if err := fresh.WaitReady(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	if resp := fresh.Get(fresh.API+"/admin/session", harness.WithKey(k.Secret)); resp.Status != 200 {
		t.Fatalf("the key once the primary is back = %s", resp)
	}
}

// TestSyncToken runs sqld with JWT authentication: an instance with the token from the
// settings (a placeholder for an environment variable) works; a wrong token stops the start
// with an error that says so and never shows the token.
func TestSyncToken(t *testing.T) {
	keyFile, priv := testkit.JWTKeys(t)
	_, other := testkit.JWTKeys(t) // a key the primary does not know
	primary := testkit.StartSqld(t, "--auth-jwt-key-file", keyFile)
	withToken := syncRuntime(primary, "\t\t\ttoken {env.SYNC_TOKEN}\n")

	wrong := testkit.SignJWT(other)
	bad, err := harness.Launch(t, harness.Config{App: withToken, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "SYNC_TOKEN": wrong}})
	if err != nil {
		t.Fatal(err)
	}
	if !bad.WaitExit(30 * time.Second) {
		t.Fatal("a runtime with a wrong token did not stop")
	}
	if logs := bad.Logs(); !strings.Contains(logs, "refused the token") || strings.Contains(logs, wrong) {
		t.Fatalf("the start-up error with a wrong token:\n%s", logs)
	}

	good := harness.Start(t, harness.Config{App: withToken, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "SYNC_TOKEN": testkit.SignJWT(priv)}})
	k := good.CreateKey(rootKey, map[string]any{"name": "with a token", "role": "viewer"})
	if resp := good.Get(good.API+"/admin/session", harness.WithKey(k.Secret)); resp.Status != 200 {
		t.Fatalf("a key on a JWT-protected primary = %s", resp)
	}
	if strings.Contains(good.Logs(), testkit.SignJWT(priv)[:40]) {
		t.Fatal("the token is in the log")
	}
}

// TestSyncMigrate starts on a local store, refuses to start the same state in sync mode
// (saying how to migrate), migrates it with caddy runtime keystore-migrate, and then serves its
// keys in sync mode, on it and on a new instance.
func TestSyncMigrate(t *testing.T) {
	primary := testkit.StartSqld(t)
	dir := t.TempDir()
	local := harness.Start(t, harness.Config{Dir: dir, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	k := local.CreateKey(rootKey, map[string]any{"name": "from local", "role": "viewer"})
	local.Stop()

	refused, err := harness.Launch(t, harness.Config{App: syncRuntime(primary, ""), Dir: dir, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	if err != nil {
		t.Fatal(err)
	}
	if !refused.WaitExit(30*time.Second) || !strings.Contains(refused.Logs(), "caddy runtime keystore-migrate") {
		t.Fatalf("a local store started in sync mode:\n%s", refused.Logs())
	}

	out, err := harness.RunCommand(t, dir, map[string]string{"RUNTIME_AUTH_DB_SYNC_URL": primary.URL}, "runtime", "keystore-migrate")
	if err != nil || !strings.Contains(out, "copied 1 keys") {
		t.Fatalf("keystore-migrate: %v\n%s", err, out)
	}
	for name, s := range map[string]*harness.Server{"the migrated instance": startSync(t, primary, dir), "a new instance": startSync(t, primary, "")} {
		if resp := s.Get(s.API+"/admin/session", harness.WithKey(k.Secret)); resp.Status != 200 {
			t.Errorf("%s: the migrated key = %s", name, resp)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	if err := primaryDB(t, primary).QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("keys on the primary = %d, %v", n, err)
	}
}
