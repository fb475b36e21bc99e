package keystore

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// secretsSignalled reports whether s's feed announced a change of the secrets, and takes it.
func secretsSignalled(s *Store) bool { return changed(s, SecretsTopic) }

func names(rows []SecretRecord) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, r.Name)
	}
	return out
}

// TestSecrets: set, replace, list (live only, by name), remove as a tombstone that moves the
// worker's change number, set again; an unknown removal changes nothing.
func TestSecrets(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newStore(t)
	c1, err := s.Secrets.Change(ctx, "@team/app", []SealedSecret{{"B", "k1", "sealed-b"}, {"A", "k1", "sealed-a"}}, nil, deployer)
	if err != nil {
		t.Fatal(err)
	}
	if !secretsSignalled(s) {
		t.Error("a change did not signal the secrets feed")
	}
	rows, err := s.Secrets.List(ctx, "@team/app")
	if err != nil || !reflect.DeepEqual(names(rows), []string{"A", "B"}) {
		t.Fatalf("Secrets = %v, %v", names(rows), err)
	}
	if r := rows[0]; r.Scope != "@team" || r.KeyID != "k1" || r.Sealed != "sealed-a" || r.ChangedByName != deployer.Name ||
		r.ChangedByPrefix != deployer.KeyPrefix || r.UpdatedAt != c.now().Unix() || r.Change != c1 {
		t.Errorf("row = %+v", r)
	}
	if other, _ := s.Secrets.List(ctx, "@team/other"); len(other) != 0 {
		t.Errorf("another worker's secrets: %v", names(other))
	}
	c2, err := s.Secrets.Change(ctx, "@team/app", nil, []string{"B"}, Root())
	if err != nil || c2 <= c1 {
		t.Fatalf("remove: %d, %v", c2, err)
	}
	if rows, _ := s.Secrets.List(ctx, "@team/app"); !reflect.DeepEqual(names(rows), []string{"A"}) {
		t.Errorf("after removing B: %v", names(rows))
	}
	if v, _ := s.Secrets.Versions(ctx); v["@team/app"] != c2 {
		t.Errorf("Secrets.Versions = %v, want @team/app at %d", v, c2)
	}
	if _, err := s.Secrets.Change(ctx, "@team/app", []SealedSecret{{"C", "k1", "c"}}, []string{"B"}, Root()); !errors.Is(err, ErrSecretNotFound) {
		t.Fatalf("removing a removed secret: %v, want ErrSecretNotFound", err)
	}
	if rows, _ := s.Secrets.List(ctx, "@team/app"); !reflect.DeepEqual(names(rows), []string{"A"}) {
		t.Errorf("a refused change changed: %v", names(rows))
	}
	if _, err := s.Secrets.Change(ctx, "@team/app", []SealedSecret{{"B", "k1", "b2"}}, nil, deployer); err != nil {
		t.Fatal(err)
	}
	if rows, _ := s.Secrets.List(ctx, "@team/app"); !reflect.DeepEqual(names(rows), []string{"A", "B"}) || rows[1].Sealed != "b2" {
		t.Errorf("B set again: %+v", rows)
	}
	if _, err := s.Secrets.Change(ctx, "@team/app", []SealedSecret{{"D", "k1", ""}}, nil, deployer); err == nil {
		t.Error("a secret with nothing sealed was stored")
	}
}

// TestResealSecrets re-seals every live secret in one write, keeping who set it; an error
// leaves every one as it was.
func TestResealSecrets(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newStore(t)
	s.Secrets.Change(ctx, "app", []SealedSecret{{"A", "old", "a"}, {"B", "new", "b"}}, nil, deployer)
	s.Secrets.Change(ctx, "app", nil, []string{"B"}, deployer)
	s.Secrets.Change(ctx, "@team/x", []SealedSecret{{"C", "old", "c"}}, nil, deployer)
	set := c.now().Unix()
	c.t = c.t.Add(time.Hour)
	_, err := s.Secrets.Reseal(ctx, func(r SecretRecord) (string, string, bool, error) {
		if r.Worker == "@team/x" {
			return "", "", false, errors.New("cannot open")
		}
		return "new", "re-" + r.Sealed, false, nil
	})
	if err == nil {
		t.Fatal("a failing reseal succeeded")
	}
	if rows, _ := s.Secrets.List(ctx, "app"); rows[0].Sealed != "a" {
		t.Fatalf("a failed reseal changed %+v", rows[0])
	}
	n, err := s.Secrets.Reseal(ctx, func(r SecretRecord) (string, string, bool, error) {
		if r.KeyID == "new" {
			return "", "", true, nil
		}
		return "new", "re-" + r.Sealed, false, nil
	})
	if err != nil || n != 2 {
		t.Fatalf("Secrets.Reseal = %d, %v; want the 2 live secrets", n, err)
	}
	for _, w := range []string{"app", "@team/x"} {
		rows, _ := s.Secrets.List(ctx, w)
		if len(rows) != 1 || rows[0].KeyID != "new" || rows[0].Sealed[:3] != "re-" || rows[0].UpdatedAt != set || rows[0].ChangedByName != deployer.Name {
			t.Errorf("%s after reseal: %+v", w, rows)
		}
	}
	if n, _ := s.Secrets.Reseal(ctx, func(SecretRecord) (string, string, bool, error) { return "", "", true, nil }); n != 0 {
		t.Errorf("a second rotation re-sealed %d", n)
	}
}

// TestSyncSecrets: a secret set on one instance, and its removal, reach another by a pull,
// which signals the secrets feed there.
func TestSyncSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testkit.StartSqld(t)
	a, _ := syncStore(t, primary, time.Hour)
	b, _ := syncStore(t, primary, time.Hour)
	if _, err := a.Secrets.Change(ctx, "app", []SealedSecret{{"TOKEN", "k1", "sealed"}}, nil, deployer); err != nil {
		t.Fatal(err)
	}
	secretsSignalled(b)
	if err := b.replica.pull(ctx); err != nil {
		t.Fatal(err)
	}
	if !secretsSignalled(b) {
		t.Error("the pull did not signal the secrets feed")
	}
	if rows, _ := b.Secrets.List(ctx, "app"); len(rows) != 1 || rows[0].Sealed != "sealed" {
		t.Fatalf("B's secrets: %+v", rows)
	}
	if _, err := a.Secrets.Change(ctx, "app", nil, []string{"TOKEN"}, deployer); err != nil {
		t.Fatal(err)
	}
	if err := b.replica.pull(ctx); err != nil {
		t.Fatal(err)
	}
	if rows, _ := b.Secrets.List(ctx, "app"); len(rows) != 0 {
		t.Fatalf("B's secrets after the removal: %+v", rows)
	}
	va, _ := a.Secrets.Versions(ctx)
	vb, _ := b.Secrets.Versions(ctx)
	if !reflect.DeepEqual(va, vb) {
		t.Errorf("Secrets.Versions: A %v, B %v", va, vb)
	}
}
