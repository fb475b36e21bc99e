package keystore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// syncStore opens a replica of primary in a folder of its own, pulling every interval.
func syncStore(t *testing.T, primary *testkit.Sqld, interval time.Duration) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "api-keys.db")
	s, err := OpenSync(context.Background(), path, SyncOptions{URL: primary.URL, Interval: interval})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	watch(s)
	return s, path
}

// TestSyncSharesKeysAndSessions checks the two promises of sync mode between two instances:
// a write is read at once where it was made and on first use elsewhere, and an end (a
// revocation, a sign-out) reaches the other instance within its interval.
func TestSyncSharesKeysAndSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testkit.StartSqld(t)
	a, _ := syncStore(t, primary, 300*time.Millisecond)
	b, _ := syncStore(t, primary, time.Hour) // pulls only when a credential is unknown

	k, err := a.Create(ctx, NewKey{Name: "shared", Namespaces: []string{"@team"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Verify(ctx, k.Secret); err != nil {
		t.Fatalf("key created on A, on A: %v", err)
	}
	p, err := b.Verify(ctx, k.Secret)
	if err != nil || p.ID != k.ID || p.Namespaces[0] != "@team" {
		t.Fatalf("key created on A, first use on B = %+v, %v", p, err)
	}
	if _, err := b.Verify(ctx, KeyPrefix+"unknownunknownunknownunknownunknownunknown0"); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("unknown key on B = %v, want ErrInvalidKey", err)
	}

	token, _, err := a.Sessions.Create(ctx, NewSession{Principal: p, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Sessions.Verify(ctx, token, ""); err != nil {
		t.Fatalf("session begun on A, on B: %v", err)
	}
	if _, _, err := a.Sessions.Verify(ctx, token, ""); err != nil {
		t.Fatalf("session begun on A, on A: %v", err)
	}
	if err := b.Sessions.EndToken(ctx, token); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNil(t, 3*time.Second, func() error {
		if _, _, err := a.Sessions.Verify(ctx, token, ""); !errors.Is(err, ErrInvalidSession) {
			return fmt.Errorf("session ended on B, on A: %v", err)
		}
		return nil
	})

	if err := b.Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(ctx, k.Secret); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("key revoked on B, on B = %v", err)
	}
	start := time.Now()
	testkit.EventuallyNil(t, 3*time.Second, func() error {
		if _, err := a.Verify(ctx, k.Secret); !errors.Is(err, ErrInvalidKey) {
			return fmt.Errorf("key revoked on B, on A: %v", err)
		}
		return nil
	})
	if d := time.Since(start); d > time.Second {
		t.Errorf("the revocation took %v to reach A, whose interval is 300ms", d)
	}
}

// TestSyncPullMissesNothing writes 1 000 keys from 8 goroutines on two instances while a third
// pulls every few milliseconds: every key must be on the third's replica afterwards, since a
// cursor that skipped a change would never read it again.
func TestSyncPullMissesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testkit.StartSqld(t)
	writers := []*Store{}
	for range 2 {
		w, _ := syncStore(t, primary, time.Hour)
		writers = append(writers, w)
	}
	reader, _ := syncStore(t, primary, 5*time.Millisecond)
	const goroutines, each = 8, 125
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if _, err := writers[g%2].Create(ctx, NewKey{Name: fmt.Sprintf("k-%d-%d", g, i)}); err != nil {
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
	if err := reader.replica.pull(ctx); err != nil {
		t.Fatal(err)
	}
	keys, err := reader.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k.Name] = true
	}
	if len(keys) != goroutines*each || len(seen) != goroutines*each {
		t.Fatalf("the replica holds %d keys (%d names), want %d", len(keys), len(seen), goroutines*each)
	}
}

// TestSyncPrimaryDown checks an outage: credentials keep verifying from the replica, writes
// fail with ErrPrimaryUnavailable, background writes wait, and once the primary is back they
// reach it and the replica converges.
func TestSyncPrimaryDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testkit.StartSqld(t)
	a, _ := syncStore(t, primary, 200*time.Millisecond)
	b, _ := syncStore(t, primary, 200*time.Millisecond)
	k, err := a.Create(ctx, NewKey{Name: "before"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(ctx, k.Secret); err != nil {
		t.Fatal(err)
	}

	primary.Stop()
	a.invalidate() // no cached verification: the replica answers
	if _, err := a.Verify(ctx, k.Secret); err != nil {
		t.Fatalf("existing key while the primary is down: %v", err)
	}
	if _, err := a.Create(ctx, NewKey{Name: "during"}); !errors.Is(err, ErrPrimaryUnavailable) {
		t.Fatalf("create while the primary is down = %v, want ErrPrimaryUnavailable", err)
	}
	if st, ok := a.Sync(); !ok || st.Reachable || !st.Synced || st.Error == "" {
		t.Fatalf("status while down = %+v", st)
	}
	if err := a.Audit.Append(ctx, AuditEntry{Action: "key.create", Target: "during", Outcome: "failed"}); err != nil {
		t.Fatalf("an audit entry while the primary is down fails its request: %v", err)
	}

	primary.Restart(t)
	testkit.EventuallyNil(t, 10*time.Second, func() error {
		entries, _, err := b.Audit.List(ctx, AuditQuery{Action: "key.create", Limit: 10})
		if err != nil || len(entries) != 1 || entries[0].Target != "during" {
			return fmt.Errorf("the queued audit entry on B = %+v, %v", entries, err)
		}
		return nil
	})
	if st, _ := a.Sync(); !st.Reachable || st.Error != "" {
		t.Fatalf("status after the outage = %+v", st)
	}
	if _, err := a.Create(ctx, NewKey{Name: "after"}); err != nil {
		t.Fatalf("create after the outage: %v", err)
	}
}

// TestSyncStartsWithoutPrimary starts replicas while the primary is down: one with a replica
// from an earlier run serves its keys; a new one holds none and says so, and both catch up
// once the primary is back.
func TestSyncStartsWithoutPrimary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testkit.StartSqld(t)
	first, path := syncStore(t, primary, time.Hour)
	k, err := first.Create(ctx, NewKey{Name: "old"})
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	primary.Stop()

	again, err := OpenSync(ctx, path, SyncOptions{URL: primary.URL, Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("a replica does not start while its primary is down: %v", err)
	}
	defer again.Close()
	if _, err := again.Verify(ctx, k.Secret); err != nil {
		t.Fatalf("the replica's key: %v", err)
	}
	fresh, err := OpenSync(ctx, filepath.Join(t.TempDir(), "api-keys.db"), SyncOptions{URL: primary.URL, Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("a new replica does not start while its primary is down: %v", err)
	}
	defer fresh.Close()
	if st, _ := fresh.Sync(); st.Synced || st.Reachable {
		t.Fatalf("a new replica without primary says %+v", st)
	}
	if _, err := fresh.Verify(ctx, k.Secret); !errors.Is(err, ErrPrimaryUnavailable) {
		t.Fatalf("a key on a replica that never pulled = %v, want ErrPrimaryUnavailable", err)
	}

	primary.Restart(t)
	testkit.EventuallyNil(t, 10*time.Second, func() error {
		_, err := fresh.Verify(ctx, k.Secret)
		return err
	})
	if st, _ := fresh.Sync(); !st.Synced || !st.Reachable {
		t.Fatalf("after the primary came back: %+v", st)
	}
}

// TestSyncBootstrapOnce starts instances together against an empty primary: one bootstrap
// key is created, and only its instance writes the file.
func TestSyncBootstrapOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testkit.StartSqld(t)
	const n = 4
	stores := make([]*Store, n)
	for i := range stores {
		stores[i], _ = syncStore(t, primary, time.Hour)
	}
	created := make([]*Created, n)
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() {
			var err error
			if created[i], err = s.EnsureBootstrap(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	files, keys := 0, 0
	for i, s := range stores {
		if created[i] != nil {
			keys++
		}
		if _, err := os.Stat(s.BootstrapPath()); err == nil {
			files++
			if created[i] == nil {
				t.Errorf("instance %d wrote a bootstrap file without creating the key", i)
			}
		}
	}
	if keys != 1 || files != 1 {
		t.Fatalf("%d bootstrap keys and %d files, want 1 and 1", keys, files)
	}
}

// TestModeMismatch checks that a local store is not opened as a replica, nor a replica as a
// local store, and that each refusal says what to do.
func TestModeMismatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testkit.StartSqld(t)
	_, _, local := newStore(t)
	if _, err := OpenSync(ctx, local, SyncOptions{URL: primary.URL}); err == nil || !contains(err, "caddy runtime keystore-migrate") {
		t.Fatalf("a local store opened in sync mode: %v", err)
	}
	s, replica := syncStore(t, primary, time.Hour)
	s.Close()
	if _, err := Open(ctx, replica); err == nil || !contains(err, "key_store sync") {
		t.Fatalf("a replica opened as a local store: %v", err)
	}
}

func contains(err error, s string) bool {
	return err != nil && len(s) > 0 && strings.Contains(err.Error(), s)
}

// TestMigrate copies a local store into an empty primary: its keys, sessions (the root key's
// included) and audit trail work on the file, now a replica, and on a new instance; a second
// migration into the same primary is refused.
func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testkit.StartSqld(t)
	const root = "the-root-key-of-this-test-0123456789"
	local, _, path := newStore(t)
	k, err := local.Create(ctx, NewKey{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := local.Verify(ctx, k.Secret)
	token, _, err := local.Sessions.Create(ctx, NewSession{Principal: p, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rootToken, _, err := local.Sessions.Create(ctx, NewSession{Principal: Root(), RootKey: root, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := local.Audit.Append(ctx, AuditEntry{Action: "key.create", Target: "ci", Outcome: "success"}); err != nil {
		t.Fatal(err)
	}
	if _, err := local.Secrets.Change(ctx, "@team/app", []SealedSecret{{"TOKEN", "k1", "sealed"}}, nil, p); err != nil {
		t.Fatal(err)
	}
	if _, err := local.Domains.Attach(ctx, "shop.example.org", "@team/app", 0, p); err != nil {
		t.Fatal(err)
	}
	local.Close()

	rep, err := Migrate(ctx, path, SyncOptions{URL: primary.URL})
	if err != nil {
		t.Fatal(err)
	}
	if rep != (MigrateReport{Keys: 1, Sessions: 2, AuditEntries: 1}) {
		t.Fatalf("report = %+v", rep)
	}
	if _, err := Open(ctx, path); err == nil {
		t.Fatal("the migrated file still opens as a local store")
	}
	replica, err := OpenSync(ctx, path, SyncOptions{URL: primary.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close()
	other, _ := syncStore(t, primary, time.Hour)
	for name, s := range map[string]*Store{"the migrated file": replica, "a new instance": other} {
		if _, err := s.Verify(ctx, k.Secret); err != nil {
			t.Errorf("%s: the key: %v", name, err)
		}
		if _, _, err := s.Sessions.Verify(ctx, token, root); err != nil {
			t.Errorf("%s: the key's session: %v", name, err)
		}
		if _, _, err := s.Sessions.Verify(ctx, rootToken, root); err != nil {
			t.Errorf("%s: the root session: %v", name, err)
		}
		if entries, _, err := s.Audit.List(ctx, AuditQuery{Limit: 10}); err != nil || len(entries) != 1 {
			t.Errorf("%s: the audit trail = %+v, %v", name, entries, err)
		}
		if secrets, err := s.Secrets.List(ctx, "@team/app"); err != nil || len(secrets) != 1 || secrets[0].Sealed != "sealed" {
			t.Errorf("%s: the secrets = %+v, %v", name, secrets, err)
		}
		if domains, err := s.Domains.List(ctx, "@team/app"); err != nil || len(domains) != 1 || domains[0].Domain != "shop.example.org" {
			t.Errorf("%s: the domains = %+v, %v", name, domains, err)
		}
	}

	_, _, second := newStore(t)
	if _, err := Migrate(ctx, second, SyncOptions{URL: primary.URL}); err == nil || !contains(err, "empty primary") {
		t.Fatalf("a migration into a primary with keys: %v", err)
	}
}

// TestSyncToken runs a primary that requires a JWT (sqld --auth-jwt-key-file): the store's
// token is accepted; another is refused at start with an error that says so and does not
// repeat it.
func TestSyncToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keyFile, priv := testkit.JWTKeys(t)
	_, otherPriv := testkit.JWTKeys(t) // a key the primary does not know
	primary := testkit.StartSqld(t, "--auth-jwt-key-file", keyFile)

	if _, err := OpenSync(ctx, filepath.Join(t.TempDir(), "api-keys.db"), SyncOptions{URL: primary.URL}); err == nil ||
		!contains(err, "refused the token") {
		t.Fatalf("no token: %v", err)
	}
	wrong := testkit.SignJWT(otherPriv)
	_, err := OpenSync(ctx, filepath.Join(t.TempDir(), "api-keys.db"), SyncOptions{URL: primary.URL, Token: wrong})
	if err == nil || !contains(err, "refused the token") || strings.Contains(err.Error(), wrong) {
		t.Fatalf("a wrong token: %v", err)
	}
	s, err := OpenSync(ctx, filepath.Join(t.TempDir(), "api-keys.db"), SyncOptions{URL: primary.URL, Token: testkit.SignJWT(priv)})
	if err != nil {
		t.Fatalf("the right token: %v", err)
	}
	defer s.Close()
	if _, err := s.Create(ctx, NewKey{Name: "with a token"}); err != nil {
		t.Fatal(err)
	}
}

// TestSyncPrimaryEmptyAfterOutage starts a replica while a new primary is down: when the
// primary comes up, still empty, the replica gives it the store's tables and starts pulling.
func TestSyncPrimaryEmptyAfterOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testkit.StartSqld(t)
	primary.Stop()
	s, _ := syncStore(t, primary, time.Hour) // the back-off after a failed start is shorter
	if st, _ := s.Sync(); st.Synced || st.Reachable {
		t.Fatalf("status without the primary = %+v", st)
	}
	primary.Restart(t)
	testkit.EventuallyNil(t, 10*time.Second, func() error {
		if st, _ := s.Sync(); !st.Synced || !st.Reachable {
			return fmt.Errorf("status after the primary came up = %+v", st)
		}
		return nil
	})
	if _, err := s.Create(ctx, NewKey{Name: "first"}); err != nil {
		t.Fatal(err)
	}
}
