package keystore

import (
	"context"
	"testing"
	"time"
)

// TestMemoLivesWithItsVerification checks that a memo is shared by the requests served from
// one cached verification, is not shared between a key and a session of that key, and is
// gone once the verification is read again (after a write that ends a credential).
func TestMemoLivesWithItsVerification(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	k, err := s.Create(ctx, NewKey{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Create(ctx, NewKey{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	verify := func() Principal {
		t.Helper()
		p, err := s.Verify(ctx, k.Secret)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := verify()
	if first.Memo() == nil || first.Memo().Load() != nil {
		t.Fatalf("first memo = %p holding %q, want a new empty one", first.Memo(), first.Memo().Load())
	}
	first.Memo().Store([]byte("answer"))
	if again := verify(); again.Memo() != first.Memo() || string(again.Memo().Load()) != "answer" {
		t.Fatal("a verification served from the cache has another memo")
	}

	token, _, err := s.Sessions.Create(ctx, NewSession{Principal: first, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	sp, _, err := s.Sessions.Verify(ctx, token, "")
	if err != nil {
		t.Fatal(err)
	}
	if sp.Memo() == nil || sp.Memo() == first.Memo() || sp.Memo().Load() != nil {
		t.Fatal("a session shares its key's memo")
	}

	if err := s.Revoke(ctx, other.ID); err != nil { // ends every cached verification
		t.Fatal(err)
	}
	if after := verify(); after.Memo() == first.Memo() || after.Memo().Load() != nil {
		t.Fatal("a memo outlived its verification")
	}

	root := Root()
	root.Memo().Store([]byte("x")) // a no-op: nothing to keep it with
	if root.Memo().Load() != nil {
		t.Fatal("the root principal keeps a memo")
	}
}
