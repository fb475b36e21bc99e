package keystore

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestAuditedWritesAreAtomic: a key, a revocation, a session, a change of secrets or a detached
// domain and its audit entry are written together or not at all. A trigger that refuses every
// audit insert stands for a crash between the two writes: each change must then leave nothing
// behind, on the local file and on a sync-mode primary.
func TestAuditedWritesAreAtomic(t *testing.T) {
	modes := []struct {
		name string
		open func(t *testing.T) (*Store, *sql.DB) // the store, and the database taking its writes
	}{
		{"local", func(t *testing.T) (*Store, *sql.DB) {
			s, _, _ := newStore(t)
			return s, s.db
		}},
		{"sync", func(t *testing.T) (*Store, *sql.DB) {
			s, _ := syncStore(t, testkit.StartSqld(t), time.Hour)
			return s, s.replica.primary
		}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := context.Background()
			s, db := m.open(t)
			kept, err := s.Create(ctx, NewKey{Name: "kept"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, `CREATE TRIGGER audit_fails BEFORE INSERT ON audit
				BEGIN SELECT RAISE(ABORT, 'injected audit failure'); END`); err != nil {
				t.Fatal(err)
			}
			entry := func(k KeyRecord) AuditEntry {
				return AuditEntry{Action: "key.create", Target: k.Name, Outcome: "success"}
			}
			if _, err := s.CreateAudited(ctx, NewKey{Name: "orphan"}, entry); err == nil {
				t.Error("CreateAudited succeeded although its audit entry could not be stored")
			}
			if err := s.RevokeAudited(ctx, kept.ID, &AuditEntry{Action: "key.revoke", Outcome: "success"}); err == nil {
				t.Error("RevokeAudited succeeded although its audit entry could not be stored")
			}
			if _, err := s.Domains.Attach(ctx, "shop.example.org", "@team/app", 0, Principal{}); err != nil {
				t.Fatal(err)
			}
			failing := &AuditEntry{Action: "change", Outcome: "success"}
			if _, err := s.Secrets.ChangeAudited(ctx, "@team/app", []SealedSecret{{"TOKEN", "k1", "sealed"}}, nil, Root(), failing); err == nil {
				t.Error("Secrets.ChangeAudited succeeded although its audit entry could not be stored")
			}
			if got, err := s.Secrets.List(ctx, "@team/app"); err != nil || len(got) != 0 {
				t.Errorf("secrets after a failed audited change = %+v, %v; want none", got, err)
			}
			if err := s.Domains.RemoveAudited(ctx, "shop.example.org", "@team/app", Principal{}, failing); err == nil {
				t.Error("Domains.RemoveAudited succeeded although its audit entry could not be stored")
			}
			if got, err := s.Domains.List(ctx, "@team/app"); err != nil || len(got) != 1 {
				t.Errorf("domains after a failed audited detach = %+v, %v; want the domain still attached", got, err)
			}
			p, err := s.Verify(ctx, kept.Secret)
			if err != nil {
				t.Fatal(err)
			}
			login := NewSession{Principal: p, TTL: time.Hour, Audit: func(r SessionRecord) AuditEntry {
				return AuditEntry{Action: "session.login", Target: fmt.Sprint(r.ID), Outcome: "success"}
			}}
			if _, _, err := s.Sessions.Create(ctx, login); err == nil {
				t.Error("Sessions.Create succeeded although its audit entry could not be stored")
			}
			var sessions int
			if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sessions`).Scan(&sessions); err != nil || sessions != 0 {
				t.Errorf("sessions after a failed audited login = %d, %v; want none", sessions, err)
			}
			keys, err := s.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != 1 || keys[0].ID != kept.ID {
				t.Errorf("keys after the failed audited writes = %+v; want only the kept key, not revoked", keys)
			}
			if _, err := s.Verify(ctx, kept.Secret); err != nil {
				t.Errorf("the kept key after a failed audited revocation: %v", err)
			}

			if _, err := db.ExecContext(ctx, `DROP TRIGGER audit_fails`); err != nil {
				t.Fatal(err)
			}
			made, err := s.CreateAudited(ctx, NewKey{Name: "audited"}, entry)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Sessions.Create(ctx, login); err != nil {
				t.Fatal(err)
			}
			if err := s.RevokeAudited(ctx, kept.ID, &AuditEntry{Action: "key.revoke", Target: "kept", Outcome: "success"}); err != nil {
				t.Fatal(err)
			}
			got, _, err := s.Audit.List(ctx, AuditQuery{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 3 || got[0].Action != "key.revoke" || got[1].Action != "session.login" || got[2].Action != "key.create" || got[2].Target != made.Name {
				t.Errorf("audit trail = %+v; want key.create of audited, session.login, then key.revoke", got)
			}
		})
	}
}
