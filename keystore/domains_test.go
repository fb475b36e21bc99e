package keystore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestDomains: a domain attaches to one worker at a time, with a token; a check records its
// outcome; a removed domain is gone from the listing and may attach elsewhere; every change
// signals the domains feed.
func TestDomains(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	watch(s)
	by := Principal{ID: 7, KeyPrefix: "rt_abc"}
	signalled := func(what string) {
		t.Helper()
		select {
		case <-changes(s, DomainsTopic):
		default:
			t.Errorf("%s did not signal the domains feed", what)
		}
	}
	d, err := s.Domains.Attach(ctx, "shop.example.org", "@team/shop", 0, by)
	if err != nil || d.Token == "" || d.Scope != "@team" || d.Verified() {
		t.Fatalf("attach = %+v, %v", d, err)
	}
	signalled("attach")
	again, err := s.Domains.Attach(ctx, "shop.example.org", "@team/shop", 0, by)
	if err != nil || again.Token != d.Token {
		t.Errorf("attaching again = %+v, %v; want the same token", again, err)
	}
	failed, err := s.Domains.RecordCheck(ctx, "shop.example.org", "@team/shop", false, "no TXT record")
	if err != nil || failed.Verified() || failed.CheckError != "no TXT record" || failed.CheckedAt == 0 {
		t.Errorf("failed check = %+v, %v", failed, err)
	}
	passed, err := s.Domains.RecordCheck(ctx, "shop.example.org", "@team/shop", true, "")
	if err != nil || !passed.Verified() || passed.CheckError != "" {
		t.Errorf("passed check = %+v, %v", passed, err)
	}
	if _, err := s.Domains.Attach(ctx, "shop.example.org", "other", 0, by); !errors.Is(err, ErrDomainTaken) {
		t.Errorf("attach of a verified domain to another worker = %v", err)
	}
	if _, err := s.Domains.RecordCheck(ctx, "shop.example.org", "other", true, ""); !errors.Is(err, ErrDomainTaken) {
		t.Errorf("check of another worker's domain = %v", err)
	}
	if list, err := s.Domains.List(ctx, "@team/shop"); err != nil || len(list) != 1 || !list[0].Verified() {
		t.Errorf("Domains = %+v, %v", list, err)
	}
	if err := s.Domains.Remove(ctx, "shop.example.org", "other", by); !errors.Is(err, ErrDomainNotFound) {
		t.Errorf("removing through another worker = %v", err)
	}
	if err := s.Domains.Remove(ctx, "shop.example.org", "@team/shop", by); err != nil {
		t.Fatal(err)
	}
	signalled("remove")
	if list, _ := s.Domains.List(ctx, ""); len(list) != 0 {
		t.Errorf("after removal: %+v", list)
	}
	moved, err := s.Domains.Attach(ctx, "shop.example.org", "other", 0, by)
	if err != nil || moved.Token == d.Token || moved.Verified() {
		t.Errorf("attach after removal = %+v, %v; want a new, unverified row", moved, err)
	}
}

// TestSyncSharesDomains: a domain attached, verified and removed on one instance reaches
// another by its pulls, which signal the domains feed there.
func TestSyncSharesDomains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testkit.StartSqld(t)
	a, _ := syncStore(t, primary, time.Hour)
	b, _ := syncStore(t, primary, 200*time.Millisecond)
	if _, err := a.Domains.Attach(ctx, "shop.example.org", "shop", 0, Principal{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Domains.RecordCheck(ctx, "shop.example.org", "shop", true, ""); err != nil {
		t.Fatal(err)
	}
	state := func() error {
		list, err := b.Domains.List(ctx, "")
		switch {
		case err != nil:
			return err
		case len(list) != 1 || !list[0].Verified():
			return fmt.Errorf("B holds %+v", list)
		}
		return nil
	}
	testkit.EventuallyNil(t, 5*time.Second, state)
	select {
	case <-changes(b, DomainsTopic):
	default:
	}
	if err := a.Domains.Remove(ctx, "shop.example.org", "shop", Principal{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changes(b, DomainsTopic): // the pull that brings the removal
	case <-time.After(5 * time.Second):
		t.Fatal("B's pull did not signal the domains feed")
	}
	testkit.EventuallyNil(t, 5*time.Second, func() error {
		if list, err := b.Domains.List(ctx, ""); err != nil || len(list) != 0 {
			return fmt.Errorf("after removal on A, B holds %+v, %v", list, err)
		}
		return nil
	})
}

// TestDomainClaims: a namespace holds at most maxPending pending claims; a pending claim
// blocks no other worker, which gets a token of its own, and the first verified takes the
// domain and drops the others; a claim not verified within PendingDomainTTL is dropped and
// counts no more.
func TestDomainClaims(t *testing.T) {
	ctx := context.Background()
	s, clk, _ := newStore(t)
	by := Principal{ID: 7, KeyPrefix: "rt_abc"}
	names := func(worker string) []string {
		t.Helper()
		list, err := s.Domains.List(ctx, worker)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, d := range list {
			out = append(out, d.Domain+" "+d.Worker)
		}
		return out
	}
	squat := map[string]WorkerDomain{}
	for _, d := range []string{"a.example.org", "b.example.org"} {
		c, err := s.Domains.Attach(ctx, d, "@team/app", 2, by)
		if err != nil {
			t.Fatal(err)
		}
		squat[d] = c
	}
	if _, err := s.Domains.Attach(ctx, "c.example.org", "@team/app", 2, by); !errors.Is(err, ErrTooManyPending) {
		t.Errorf("a third pending claim with a cap of 2 = %v, want ErrTooManyPending", err)
	}
	if _, err := s.Domains.Attach(ctx, "c.example.org", "@team/other", 2, by); !errors.Is(err, ErrTooManyPending) {
		t.Errorf("a third pending claim of the namespace through another worker = %v, want ErrTooManyPending", err)
	}
	if _, err := s.Domains.Attach(ctx, "a.example.org", "@team/app", 2, by); err != nil {
		t.Errorf("attaching a claim held already, at the cap = %v", err)
	}

	owner, err := s.Domains.Attach(ctx, "a.example.org", "@other/app", 2, by)
	if err != nil || owner.Token == squat["a.example.org"].Token || owner.Verified() {
		t.Fatalf("a claim of a domain pending elsewhere = %+v, %v; want pending with a token of its own", owner, err)
	}
	if got, want := names(""), []string{"a.example.org @other/app", "a.example.org @team/app", "b.example.org @team/app"}; !slices.Equal(got, want) {
		t.Errorf("Domains = %q, want %q", got, want)
	}
	if d, err := s.Domains.RecordCheck(ctx, "a.example.org", "@other/app", true, ""); err != nil || !d.Verified() || d.Worker != "@other/app" {
		t.Fatalf("the owner's passed check = %+v, %v", d, err)
	}
	if got, want := names(""), []string{"a.example.org @other/app", "b.example.org @team/app"}; !slices.Equal(got, want) {
		t.Errorf("Domains after the owner verified = %q, want %q (the squatter's claim dropped)", got, want)
	}
	if _, err := s.Domains.RecordCheck(ctx, "a.example.org", "@team/app", true, ""); !errors.Is(err, ErrDomainTaken) {
		t.Errorf("the squatter's passed check after the owner's = %v, want ErrDomainTaken", err)
	}
	if _, err := s.Domains.Attach(ctx, "a.example.org", "@team/app", 2, by); !errors.Is(err, ErrDomainTaken) {
		t.Errorf("claiming a domain verified elsewhere = %v, want ErrDomainTaken", err)
	}
	if _, err := s.Domains.Attach(ctx, "c.example.org", "@team/app", 2, by); err != nil {
		t.Errorf("a claim once the dropped one freed the cap = %v", err)
	}

	clk.add(PendingDomainTTL)
	if got, want := names(""), []string{"a.example.org @other/app"}; !slices.Equal(got, want) {
		t.Errorf("Domains after PendingDomainTTL = %q, want %q (expired claims gone, the verified one kept)", got, want)
	}
	select { // the signal of the last attach
	case <-changes(s, DomainsTopic):
	default:
	}
	if n, err := s.Domains.DropExpired(ctx); n != 2 || err != nil {
		t.Errorf("Domains.DropExpired = %d, %v; want the 2 expired claims", n, err)
	}
	select {
	case <-changes(s, DomainsTopic):
	default:
		t.Error("Domains.DropExpired did not signal the domains feed")
	}
	var tombstones int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM worker_domains WHERE removed_at != 0 AND verified_at = 0 AND worker = '@team/app'`).Scan(&tombstones); err != nil || tombstones != 3 {
		t.Errorf("the squatter's dropped claims = %d, %v; want 3 tombstones (a, b, c)", tombstones, err)
	}
	if n, err := s.Domains.DropExpired(ctx); n != 0 || err != nil {
		t.Errorf("Domains.DropExpired again = %d, %v; want none", n, err)
	}
	if _, err := s.Domains.RecordCheck(ctx, "b.example.org", "@team/app", true, ""); !errors.Is(err, ErrDomainNotFound) {
		t.Errorf("a passed check of an expired claim = %v, want ErrDomainNotFound", err)
	}
	for _, d := range []string{"d.example.org", "e.example.org"} {
		if _, err := s.Domains.Attach(ctx, d, "@team/app", 2, by); err != nil {
			t.Errorf("a claim once the others expired: %s = %v", d, err)
		}
	}
	fresh, err := s.Domains.Attach(ctx, "b.example.org", "@team/next", 0, by)
	if err != nil || fresh.Token == squat["b.example.org"].Token {
		t.Errorf("claiming an expired claim's domain again = %+v, %v; want a new claim", fresh, err)
	}
}

// TestDomainClaimsMigration: a store of the schema before claims (one row per domain) keeps its
// domains, and then takes a second claim of a pending one.
func TestDomainClaimsMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "api-keys.db")
	db, err := sql.Open("libsql", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	const before = 10 // the schema version before worker_domains became one row per claim
	for _, q := range append(slices.Clone(migrations[:before]), fmt.Sprintf(`PRAGMA user_version = %d`, before),
		`INSERT INTO worker_domains (domain, worker, scope, token, created_at, change_seq)
			VALUES ('shop.example.org', '@team/shop', '@team', 'runtime-old', 1799999000, 1)`) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s, _ := openStore(t, path)
	list, err := s.Domains.List(ctx, "")
	if err != nil || len(list) != 1 || list[0].Token != "runtime-old" || list[0].Worker != "@team/shop" {
		t.Fatalf("Domains after the migration = %+v, %v", list, err)
	}
	if _, err := s.Domains.Attach(ctx, "shop.example.org", "@other/shop", 10, Principal{}); err != nil {
		t.Errorf("a second claim of the migrated pending domain = %v", err)
	}
	if list, err := s.Domains.List(ctx, ""); err != nil || len(list) != 2 {
		t.Errorf("Domains after a second claim = %+v, %v", list, err)
	}
}
