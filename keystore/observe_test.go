package keystore

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestObserverHearsQueriesOnly checks that the observer hears each operation that reached the
// database, and not the answers served from the caches.
func TestObserverHearsQueriesOnly(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	var mu sync.Mutex
	var ops []string
	s.SetObserver(func(op string, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if d < 0 {
			t.Errorf("%s took %v", op, d)
		}
		ops = append(ops, op)
	})
	created, err := s.Create(ctx, NewKey{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second is answered from the cache
		if _, err := s.Verify(ctx, created.Secret); err != nil {
			t.Fatal(err)
		}
	}
	// The first verification writes the key's lastUsedAt in the background, which changes the
	// listing: wait for it, so both listings below read the same rows.
	if err := s.FlushUsage(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.List(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Revoke(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	s.SetObserver(nil)
	if _, err := s.List(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"create", "verify", "list", "revoke"}; !slices.Equal(ops, want) {
		t.Fatalf("ops = %v, want %v", ops, want)
	}
}
