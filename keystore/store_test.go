package keystore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a settable time source for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func openStore(t *testing.T, path string) (*Store, *clock) {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	watch(s)
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	s.now = c.now
	return s, c
}

func newStore(t *testing.T) (*Store, *clock, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "api-keys.db")
	s, c := openStore(t, path)
	return s, c, path
}

func TestCreateVerifyListRevoke(t *testing.T) {
	ctx := context.Background()
	s, c, path := newStore(t)
	k, err := s.Create(ctx, NewKey{Name: " ci deploy ", Description: "pipeline", Namespaces: []string{"@team", "@team"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(k.Secret, "rtk_") || len(k.Secret) != 47 {
		t.Fatalf("secret %q is not rtk_ + 43 characters", k.Secret)
	}
	if raw, err := base64.RawURLEncoding.DecodeString(k.Secret[4:]); err != nil || len(raw) != 32 {
		t.Fatalf("secret body is not 32 bytes of base64url: %v", err)
	}
	if k.KeyPrefix != k.Secret[:12] || k.Name != "ci deploy" || k.Role != RoleEditor || k.CreatedAt != c.now().Unix() {
		t.Fatalf("created = %+v", k.KeyRecord)
	}
	if !reflect.DeepEqual(k.Namespaces, []string{"@team"}) || !reflect.DeepEqual(k.Permissions, RolePermissions(RoleEditor)) {
		t.Fatalf("namespaces %v permissions %v", k.Namespaces, k.Permissions)
	}

	p, err := s.Verify(ctx, k.Secret)
	if err != nil {
		t.Fatal(err)
	}
	want := Principal{ID: k.ID, Name: "ci deploy", KeyPrefix: k.KeyPrefix, Role: RoleEditor, Permissions: RolePermissions(RoleEditor), Namespaces: []string{"@team"},
		memo: p.memo} // see TestMemoLivesWithItsVerification
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("principal = %+v, want %+v", p, want)
	}
	lastChanged := k.Secret[:46] + map[bool]string{true: "B", false: "A"}[k.Secret[46] == 'A']
	for _, bad := range []string{"", "rtk_", k.Secret[:46], k.Secret + "x", "xtk_" + k.Secret[4:], lastChanged} {
		if _, err := s.Verify(ctx, bad); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Verify(%q) = %v, want ErrInvalidKey", bad, err)
		}
	}

	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].Description != "pipeline" || list[0].ID != k.ID {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if err := s.Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(ctx, k.Secret); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("revoked key verified: %v", err)
	}
	if err := s.Revoke(ctx, k.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second revoke = %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, k.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(revoked) = %v", err)
	}
	if list, _ := s.List(ctx); len(list) != 0 {
		t.Fatalf("revoked key is listed: %+v", list)
	}
	var revoked int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NOT NULL`).Scan(&revoked); err != nil || revoked != 1 {
		t.Fatalf("revoked rows = %d, %v; revoked keys must stay as rows", revoked, err)
	}

	// Only the hash reaches the disk, and only its owner can read it.
	s.Close()
	for _, f := range []string{path, path + "-wal"} {
		if info, err := os.Stat(f); err == nil && info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, info.Mode().Perm())
		}
		b, _ := os.ReadFile(f)
		if bytes.Contains(b, []byte(k.Secret)) || bytes.Contains(b, []byte(k.Secret[12:])) {
			t.Fatalf("%s contains the key secret", f)
		}
	}
}

func TestExpiry(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newStore(t)
	exp, err := ParseExpiresIn("30d", c.now())
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.Create(ctx, NewKey{Name: "short", ExpiresAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(ctx, k.Secret); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.CountActive(ctx); n != 1 {
		t.Fatalf("active = %d", n)
	}
	c.add(30 * 24 * time.Hour)
	if _, err := s.Verify(ctx, k.Secret); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("expired key (cached) verified: %v", err)
	}
	s.invalidate()
	if _, err := s.Verify(ctx, k.Secret); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("expired key (uncached) verified: %v", err)
	}
	list, _ := s.List(ctx)
	if len(list) != 1 || list[0].ExpiresAt != exp || !list[0].Expired(c.now()) {
		t.Fatalf("expired key must be listed with expiresAt: %+v", list)
	}
	if n, _ := s.CountActive(ctx); n != 0 {
		t.Fatalf("active after expiry = %d", n)
	}
	if _, err := s.Create(ctx, NewKey{Name: "past", ExpiresAt: c.now().Unix()}); err == nil {
		t.Fatal("created a key that is already expired")
	}
}

func TestLastUsedAtAtMostOncePerMinute(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newStore(t)
	k, _ := s.Create(ctx, NewKey{Name: "k"})
	lastUsed := func() int64 {
		t.Helper()
		if err := s.FlushUsage(ctx); err != nil {
			t.Fatal(err)
		}
		rec, err := s.Get(ctx, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		return rec.LastUsedAt
	}
	if got := lastUsed(); got != 0 {
		t.Fatalf("lastUsedAt before use = %d", got)
	}
	first := c.now().Unix()
	s.Verify(ctx, k.Secret)
	if got := lastUsed(); got != first {
		t.Fatalf("lastUsedAt = %d, want %d", got, first)
	}
	c.add(59 * time.Second)
	s.Verify(ctx, k.Secret)
	if got := lastUsed(); got != first {
		t.Fatalf("lastUsedAt rewritten within a minute: %d", got)
	}
	c.add(2 * time.Second)
	s.Verify(ctx, k.Secret)
	if got := lastUsed(); got != c.now().Unix() {
		t.Fatalf("lastUsedAt = %d, want %d after a minute", got, c.now().Unix())
	}
}

// TestVerifyDoesNotWaitForUsageWrites holds the write lock (as a slow write would) and checks
// that verification still answers.
func TestVerifyDoesNotWaitForUsageWrites(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newStore(t)
	k, _ := s.Create(ctx, NewKey{Name: "k"})
	s.Verify(ctx, k.Secret)
	s.writeMu.Lock()
	done := make(chan error, 1)
	go func() {
		c.add(2 * time.Minute)
		_, err := s.Verify(ctx, k.Secret)
		done <- err
	}()
	select {
	case err := <-done:
		s.writeMu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		s.writeMu.Unlock()
		t.Fatal("Verify waited for the write lock")
	}
}

func TestConcurrentCreateAndRevoke(t *testing.T) {
	ctx := context.Background()
	s, _, path := newStore(t)
	const workers, perWorker = 50, 6
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	kept := make(chan Created, workers*perWorker)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				k, err := s.Create(ctx, NewKey{Name: fmt.Sprintf("w%d-%d", w, i)})
				if err != nil {
					errs <- err
					continue
				}
				if i%2 == 1 {
					if err := s.Revoke(ctx, k.ID); err != nil {
						errs <- err
					}
					continue
				}
				if _, err := s.Verify(ctx, k.Secret); err != nil {
					errs <- err
				}
				kept <- k
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(kept)
	for err := range errs {
		t.Error(err)
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != workers*perWorker/2 {
		t.Fatalf("listed %d keys, want %d", len(list), workers*perWorker/2)
	}
	var total int
	s.db.QueryRow(`SELECT COUNT(*) FROM api_keys`).Scan(&total)
	if total != workers*perWorker {
		t.Fatalf("%d rows, want %d: rows were lost", total, workers*perWorker)
	}
	// A second handle on the same file (another process, or a reload) sees everything.
	other, _ := openStore(t, path)
	for k := range kept {
		if _, err := other.Verify(ctx, k.Secret); err != nil {
			t.Fatalf("key %s not verifiable from a second handle: %v", k.Name, err)
		}
	}
}

func TestOpenMigratesOlderSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "api-keys.db")
	db, err := sql.Open("libsql", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	legacy := "rtk_" + strings.Repeat("A", 43)
	stmts := []string{
		migrations[0],
		`PRAGMA user_version = 1`,
		fmt.Sprintf(`INSERT INTO api_keys (name, key_hash, key_prefix, role, permissions, created_at)
			VALUES ('legacy', '%s', '%s', 'viewer', '[]', 1700000000)`, HashKey(legacy), legacy[:12]),
		`INSERT INTO api_keys (name, key_hash, key_prefix, role, permissions, created_at, revoked_at)
			VALUES ('gone', 'ff', 'rtk_gone', 'admin', '[]', 1700000000, 1700000001)`,
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, _ := openStore(t, path)
	var version int
	s.db.QueryRow(`PRAGMA user_version`).Scan(&version)
	if version != SchemaVersion {
		t.Fatalf("schema version = %d, want %d", version, SchemaVersion)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if got := list[0]; got.Name != "legacy" || !reflect.DeepEqual(got.Namespaces, []string{"*"}) || got.ExpiresAt != 0 ||
		!reflect.DeepEqual(got.Permissions, RolePermissions(RoleViewer)) {
		t.Fatalf("migrated legacy key = %+v", got)
	}
	if p, err := s.Verify(ctx, legacy); err != nil || p.Role != RoleViewer {
		t.Fatalf("legacy key after migration: %+v %v", p, err)
	}
	s.Close()
	// Reopening a current store changes nothing.
	s2, _ := openStore(t, path)
	if list, _ := s2.List(ctx); len(list) != 1 {
		t.Fatalf("reopen lost keys: %+v", list)
	}
}

// TestOpenRefusesNewerSchema opens a store that a newer runtime migrated, as a whole or in
// its desired-state tables: it is refused with both versions named.
func TestOpenRefusesNewerSchema(t *testing.T) {
	for _, tc := range []struct{ name, write, want string }{
		{"store", fmt.Sprintf(`PRAGMA user_version = %d`, SchemaVersion+1),
			fmt.Sprintf("schema version %d is newer than this runtime understands (%d)", SchemaVersion+1, SchemaVersion)},
		{"desired state", fmt.Sprintf(`UPDATE store_meta SET value = '%d' WHERE name = 'units_schema'`, UnitsSchemaVersion+1),
			fmt.Sprintf("desired-state schema (units_schema) version %d is newer than this runtime understands (%d)", UnitsSchemaVersion+1, UnitsSchemaVersion)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "api-keys.db")
			s, _ := openStore(t, path)
			if _, err := s.db.Exec(tc.write); err != nil {
				t.Fatal(err)
			}
			s.Close()
			_, err := Open(context.Background(), path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCreateValidation(t *testing.T) {
	s, _, _ := newStore(t)
	tests := []struct {
		name string
		nk   NewKey
		code string
	}{
		{"missing name", NewKey{Name: "  "}, "MISSING_KEY_NAME"},
		{"long name", NewKey{Name: strings.Repeat("n", 101)}, "INVALID_KEY_NAME"},
		{"control character", NewKey{Name: "a\x00b"}, "INVALID_KEY_NAME"},
		{"escape sequence", NewKey{Name: "a\x1b[31mred"}, "INVALID_KEY_NAME"},
		{"invalid UTF-8", NewKey{Name: "caf\xe9"}, "INVALID_KEY_NAME"},
		{"replacement character (invalid UTF-8 after JSON)", NewKey{Name: "caf\uFFFD"}, "INVALID_KEY_NAME"},
		{"right-to-left override", NewKey{Name: "abc\u202Egpj.exe"}, "INVALID_KEY_NAME"},
		{"description with a control character", NewKey{Name: "k", Description: "a\x07b"}, "BAD_REQUEST"},
		{"unknown role", NewKey{Name: "k", Role: "owner"}, "INVALID_KEY_ROLE"},
		{"custom without permissions", NewKey{Name: "k", Role: RoleCustom}, "MISSING_PERMISSIONS"},
		{"unknown permission", NewKey{Name: "k", Role: RoleCustom, Permissions: []string{"workers:read", "apps:read"}}, "INVALID_PERMISSION"},
		{"permissions on a fixed role", NewKey{Name: "k", Role: RoleViewer, Permissions: []string{"keys:create"}}, "INVALID_PERMISSION"},
		{"empty namespaces", NewKey{Name: "k", Namespaces: []string{}}, "INVALID_NAMESPACE"},
		{"namespace without @", NewKey{Name: "k", Namespaces: []string{"team"}}, "INVALID_NAMESPACE"},
		{"upper-case namespace", NewKey{Name: "k", Namespaces: []string{"@Team"}}, "INVALID_NAMESPACE"},
		{"namespace with slash", NewKey{Name: "k", Namespaces: []string{"@team/app"}}, "INVALID_NAMESPACE"},
		{"star with others", NewKey{Name: "k", Namespaces: []string{"*", "@team"}}, "INVALID_NAMESPACE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Create(context.Background(), tt.nk)
			var ie *InputError
			if !errors.As(err, &ie) || ie.Code != tt.code {
				t.Fatalf("Create = %v, want code %s", err, tt.code)
			}
		})
	}
	k, err := s.Create(context.Background(), NewKey{Name: "c", Role: RoleCustom, Permissions: []string{"keys:read", "keys:read", "workers:read"}})
	if err != nil || !reflect.DeepEqual(k.Permissions, []string{"keys:read", "workers:read"}) {
		t.Fatalf("custom key = %+v %v", k.Permissions, err)
	}
	if p, _ := s.Verify(context.Background(), k.Secret); !reflect.DeepEqual(p.Permissions, k.Permissions) {
		t.Fatalf("custom permissions after a round trip = %v", p.Permissions)
	}
}

func TestParseExpiresIn(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	day := int64(86400)
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"never", 0, true}, {"", 0, true},
		{"30d", 1_000_000 + 30*day, true}, {"90d", 1_000_000 + 90*day, true},
		{"1y", 1_000_000 + 365*day, true}, {"2w", 1_000_000 + 14*day, true},
		{"6m", 1_000_000 + 180*day, true}, {"7d", 1_000_000 + 7*day, true},
		{"0d", 0, false}, {"30", 0, false}, {"1h", 0, false}, {"-1d", 0, false},
		{"101y", 0, false}, {"d", 0, false}, {"1.5y", 0, false}, {"Never", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseExpiresIn(tt.in, now)
		if tt.ok && (err != nil || got != tt.want) || !tt.ok && err == nil {
			t.Errorf("ParseExpiresIn(%q) = %d, %v", tt.in, got, err)
		}
	}
}

func TestEnsureBootstrap(t *testing.T) {
	ctx := context.Background()
	s, _, path := newStore(t)
	dir := filepath.Dir(path)
	k, err := s.EnsureBootstrap(ctx)
	if err != nil || k == nil {
		t.Fatalf("EnsureBootstrap = %v, %v", k, err)
	}
	info, err := os.Stat(filepath.Join(dir, BootstrapFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("bootstrap file: %v mode %v", err, info.Mode())
	}
	secret, _ := os.ReadFile(filepath.Join(dir, BootstrapFile))
	p, err := s.Verify(ctx, strings.TrimSpace(string(secret)))
	if err != nil || p.Name != "bootstrap" || p.Role != RoleAdmin {
		t.Fatalf("bootstrap key verifies as %+v, %v", p, err)
	}
	if again, err := s.EnsureBootstrap(ctx); err != nil || again != nil {
		t.Fatalf("second EnsureBootstrap = %v, %v; want nothing created", again, err)
	}
}

func TestBootstrapRefusesPlantedLink(t *testing.T) {
	s, _, path := newStore(t)
	dir, outside := filepath.Dir(path), t.TempDir()
	if err := os.Symlink(filepath.Join(outside, "stolen"), filepath.Join(dir, BootstrapFile+".tmp")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnsureBootstrap(context.Background()); err == nil {
		t.Fatal("bootstrap wrote through a link leaving the state folder")
	}
	if _, err := os.Stat(filepath.Join(outside, "stolen")); !os.IsNotExist(err) {
		t.Fatal("the secret landed outside the state folder")
	}
	if n, _ := s.CountActive(context.Background()); n != 0 {
		t.Fatal("a bootstrap key exists although its secret could not be written")
	}
}

func TestPrincipalAccess(t *testing.T) {
	team := Principal{Namespaces: []string{"@team", "@ops"}}
	all := Principal{Namespaces: []string{"*"}}
	tests := []struct {
		p    Principal
		name string
		want bool
	}{
		{team, "@team/app", true}, {team, "@ops/x", true}, {team, "@other/app", false},
		{team, "app", false}, {team, "@teamx/app", false},
		{all, "app", true}, {all, "@any/app", true}, {Root(), "@any/app", true},
	}
	for _, tt := range tests {
		if got := tt.p.CanAccess(tt.name); got != tt.want {
			t.Errorf("%v.CanAccess(%q) = %v", tt.p.Namespaces, tt.name, got)
		}
	}
	if !team.Covers([]string{"@team"}) || team.Covers([]string{"*"}) || team.Covers([]string{"@team", "@x"}) || !all.Covers([]string{"*"}) {
		t.Error("Covers is wrong")
	}
	if !Root().Has(KeysCreate) || (Principal{Permissions: []string{KeysRead}}).Has(KeysCreate) {
		t.Error("Has is wrong")
	}
}

// TestListFollowsWrites checks that the cached listing follows every write to the keys: a new
// key, a first use once recorded, a revocation; and that a caller's changes to the slice it
// got do not reach the next caller.
func TestListFollowsWrites(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newStore(t)
	ids := func() (out []int64) {
		list, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range list {
			out = append(out, k.ID)
		}
		return out
	}
	a, err := s.Create(ctx, NewKey{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(); !slices.Equal(got, []int64{a.ID}) {
		t.Fatalf("after one create: %v", got)
	}
	b, err := s.Create(ctx, NewKey{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(); !slices.Equal(got, []int64{a.ID, b.ID}) {
		t.Fatalf("after a second create: %v", got)
	}

	if _, err := s.Verify(ctx, b.Secret); err != nil {
		t.Fatal(err)
	}
	if err := s.FlushUsage(ctx); err != nil {
		t.Fatal(err)
	}
	list, _ := s.List(ctx)
	if len(list) != 2 || list[1].LastUsedAt != s.now().Unix() {
		t.Fatalf("after a use: %+v", list)
	}

	list[0] = KeyRecord{ID: 999}
	if got := ids(); !slices.Equal(got, []int64{a.ID, b.ID}) {
		t.Fatalf("a caller's change reached the next listing: %v", got)
	}

	if err := s.Revoke(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if got := ids(); !slices.Equal(got, []int64{b.ID}) {
		t.Fatalf("after a revocation: %v", got)
	}
}
