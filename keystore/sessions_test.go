package keystore

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestSessionLifecycle(t *testing.T) {
	ctx := context.Background()
	s, c, path := newStore(t)
	k, err := s.Create(ctx, NewKey{Name: "browser", Role: RoleViewer})
	if err != nil {
		t.Fatal(err)
	}
	token, rec, err := s.Sessions.Create(ctx, NewSession{Principal: k.Principal(), TTL: 2 * time.Hour, UserAgent: "Firefox\x00/1\xff"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(token, SessionPrefix) || len(token) != keyLength || strings.HasPrefix(token, KeyPrefix) {
		t.Fatalf("token %q is not rts_ + 43 characters", token)
	}
	now := c.now().Unix()
	if rec.CreatedAt != now || rec.ExpiresAt != now+7200 || rec.LastSeenAt != now || rec.UserAgent != "Firefox/1" {
		t.Fatalf("session = %+v", rec)
	}
	p, got, err := s.Sessions.Verify(ctx, token, "")
	if err != nil || p.ID != k.ID || p.Role != RoleViewer || got.ID != rec.ID {
		t.Fatalf("Sessions.Verify = %+v %+v %v", p, got, err)
	}
	// A token is no key, and a key no token.
	if _, err := s.Verify(ctx, token); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("a token verified as a key: %v", err)
	}
	if _, _, err := s.Sessions.Verify(ctx, k.Secret, ""); !errors.Is(err, ErrInvalidSession) {
		t.Fatalf("a key verified as a token: %v", err)
	}
	// Only the token's hash reaches the disk.
	s.FlushUsage(ctx)
	for _, f := range []string{path, path + "-wal"} {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), token[4:]) {
			t.Fatalf("%s contains the session token", f)
		}
	}

	// lastSeenAt: at most once a minute, in the background.
	c.add(30 * time.Second)
	s.Sessions.Verify(ctx, token, "")
	c.add(40 * time.Second)
	s.Sessions.Verify(ctx, token, "")
	s.FlushUsage(ctx)
	list, err := s.Sessions.List(ctx, p, "")
	if err != nil || len(list) != 1 || list[0].LastSeenAt != c.now().Unix() || list[0].UserAgent != "Firefox/1" {
		t.Fatalf("Sessions.List = %+v %v", list, err)
	}

	// The server enforces the lifetime, whatever the browser keeps.
	c.add(2*time.Hour - 70*time.Second - time.Second)
	if _, _, err := s.Sessions.Verify(ctx, token, ""); err != nil {
		t.Fatalf("session refused a second before its end: %v", err)
	}
	c.add(time.Second)
	if _, _, err := s.Sessions.Verify(ctx, token, ""); !errors.Is(err, ErrInvalidSession) {
		t.Fatalf("session past its TTL verified: %v", err)
	}
	if list, _ := s.Sessions.List(ctx, p, ""); len(list) != 0 {
		t.Fatalf("an expired session is listed: %+v", list)
	}
}

func TestSessionEnds(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newStore(t)
	k, _ := s.Create(ctx, NewKey{Name: "k"})
	other, _ := s.Create(ctx, NewKey{Name: "other"})
	begin := func(p Principal, root string) (string, SessionRecord) {
		t.Helper()
		token, rec, err := s.Sessions.Create(ctx, NewSession{Principal: p, RootKey: root, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return token, rec
	}
	valid := func(token, root string) bool {
		_, _, err := s.Sessions.Verify(ctx, token, root)
		return err == nil
	}

	// Logout ends the session on the server; a copy of the token is worthless.
	t1, _ := begin(k.Principal(), "")
	valid(t1, "")
	if err := s.Sessions.EndToken(ctx, t1); err != nil || valid(t1, "") {
		t.Fatalf("logout: %v, still valid %v", err, valid(t1, ""))
	}
	if err := s.Sessions.EndToken(ctx, t1); err != nil {
		t.Fatalf("second logout = %v", err)
	}

	// A caller ends its own sessions only.
	t2, r2 := begin(k.Principal(), "")
	if err := s.Sessions.End(ctx, other.Principal(), "", r2.ID); !errors.Is(err, ErrSessionNotFound) || !valid(t2, "") {
		t.Fatalf("another key ended the session: %v", err)
	}
	if err := s.Sessions.End(ctx, Root(), "a-root-key-0123456789", r2.ID); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("root ended a key's session: %v", err)
	}
	if err := s.Sessions.End(ctx, k.Principal(), "", r2.ID); err != nil || valid(t2, "") {
		t.Fatalf("Sessions.End = %v", err)
	}

	// Ending the other sessions keeps the one named, and another key's and root's sessions.
	keep, kept := begin(k.Principal(), "")
	gone1, _ := begin(k.Principal(), "")
	gone2, _ := begin(k.Principal(), "")
	theirs, _ := begin(other.Principal(), "")
	const root = "a-root-key-0123456789"
	rootSession, _ := begin(Root(), root)
	if n, err := s.Sessions.EndOthers(ctx, k.Principal(), "", kept.ID); err != nil || n != 2 {
		t.Fatalf("Sessions.EndOthers = %d, %v; want 2 ended", n, err)
	}
	if !valid(keep, "") || valid(gone1, "") || valid(gone2, "") || !valid(theirs, "") || !valid(rootSession, root) {
		t.Fatalf("after ending the others: kept %v, others %v %v, another key's %v, root's %v",
			valid(keep, ""), valid(gone1, ""), valid(gone2, ""), valid(theirs, ""), valid(rootSession, root))
	}
	if n, err := s.Sessions.EndOthers(ctx, k.Principal(), "", kept.ID); err != nil || n != 0 {
		t.Fatalf("Sessions.EndOthers with none left = %d, %v", n, err)
	}
	// Keeping none (a header credential) ends them all; root's are those of its root key.
	if n, err := s.Sessions.EndOthers(ctx, Root(), root, 0); err != nil || n != 1 || valid(rootSession, root) {
		t.Fatalf("Sessions.EndOthers of root = %d, %v", n, err)
	}
	if err := s.Sessions.End(ctx, k.Principal(), "", kept.ID); err != nil {
		t.Fatal(err)
	}

	// Revoking a key ends its sessions, and only its.
	t3, _ := begin(k.Principal(), "")
	t4, _ := begin(other.Principal(), "")
	valid(t3, "")
	if err := s.Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if valid(t3, "") || !valid(t4, "") {
		t.Fatalf("after revoking the key: its session valid %v, another key's %v", valid(t3, ""), valid(t4, ""))
	}

	// A session ends when its key expires, even before its own end.
	exp, _ := ParseExpiresIn("1d", c.now())
	short, _ := s.Create(ctx, NewKey{Name: "short", ExpiresAt: exp})
	if _, rec := begin(short.Principal(), ""); rec.ExpiresAt != c.now().Unix()+3600 {
		t.Fatalf("an hour's session of a key expiring in a day ends at %d", rec.ExpiresAt)
	}
	long, rec, err := s.Sessions.Create(ctx, NewSession{Principal: short.Principal(), TTL: 48 * time.Hour})
	if err != nil || rec.ExpiresAt != exp {
		t.Fatalf("a session outlives its key: ends %d, key %d (%v)", rec.ExpiresAt, exp, err)
	}
	valid(long, "")
	c.add(24 * time.Hour)
	if valid(long, "") {
		t.Fatal("a session of an expired key verified")
	}
}

func TestRootSessions(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newStore(t)
	const root, rotated = "first-root-key-0123456789abcdef", "second-root-key-0123456789abcdef"
	if _, _, err := s.Sessions.Create(ctx, NewSession{Principal: Root(), TTL: time.Hour}); err == nil {
		t.Fatal("a root session began without the root key")
	}
	token, rec, err := s.Sessions.Create(ctx, NewSession{Principal: Root(), RootKey: root, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if p, _, err := s.Sessions.Verify(ctx, token, root); err != nil || !p.IsRoot {
		t.Fatalf("root session = %+v %v", p, err)
	}
	var fp string
	s.db.QueryRow(`SELECT root_fp FROM sessions WHERE id = ?`, rec.ID).Scan(&fp)
	if fp == "" || strings.Contains(fp, HashKey(root)) {
		t.Fatalf("root fingerprint %q is empty or the bare hash of the root key", fp)
	}
	// The root key changes: the session is over, and no longer listed as the root's.
	for _, now := range []string{rotated, ""} {
		if _, _, err := s.Sessions.Verify(ctx, token, now); !errors.Is(err, ErrInvalidSession) {
			t.Fatalf("root session with root key %q: %v", now, err)
		}
		if list, _ := s.Sessions.List(ctx, Root(), now); len(list) != 0 {
			t.Fatalf("root sessions under root key %q: %+v", now, list)
		}
	}
	if list, _ := s.Sessions.List(ctx, Root(), root); len(list) != 1 || list[0].ID != rec.ID {
		t.Fatalf("root sessions = %+v", list)
	}
	// A salt of its own per store: the same root key gives another fingerprint elsewhere.
	s2, _, _ := newStore(t)
	if s2.rootFingerprint(root) == s.rootFingerprint(root) {
		t.Fatal("two stores share the root fingerprint")
	}
}

func TestSessionsPerOwnerAreBounded(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newStore(t)
	k, _ := s.Create(ctx, NewKey{Name: "k"})
	first, _, _ := s.Sessions.Create(ctx, NewSession{Principal: k.Principal(), TTL: time.Hour})
	s.Sessions.Verify(ctx, first, "")
	for range MaxSessionsPerOwner {
		if _, _, err := s.Sessions.Create(ctx, NewSession{Principal: k.Principal(), TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	if list, _ := s.Sessions.List(ctx, k.Principal(), ""); len(list) != MaxSessionsPerOwner {
		t.Fatalf("%d sessions, want %d", len(list), MaxSessionsPerOwner)
	}
	if _, _, err := s.Sessions.Verify(ctx, first, ""); !errors.Is(err, ErrInvalidSession) {
		t.Fatalf("the oldest session outlived the bound: %v", err)
	}
}
