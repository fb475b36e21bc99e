package harness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/packagestore"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

func TestGroupWait(t *testing.T) {
	g := Group{{cfg: Config{Name: "A"}}, {cfg: Config{Name: "B"}}}
	var rounds atomic.Int64
	err := g.Wait(time.Second, func(s *Server) error {
		if s.Name() == "A" {
			rounds.Add(1)
		}
		if s.Name() == "B" && rounds.Load() < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || rounds.Load() != 3 {
		t.Fatalf("a condition holding on B in round 3: %v after %d rounds", err, rounds.Load())
	}

	err = g.Wait(100*time.Millisecond, func(s *Server) error {
		if s.Name() == "B" {
			return errors.New("never")
		}
		return nil
	})
	if err == nil || err.Error() != "B: never" {
		t.Fatalf("a condition never holding on B = %v, want the error naming B alone", err)
	}

	// One that holds on A in odd rounds and on B in even ones never holds on both at once.
	var round atomic.Int64
	err = g.Wait(200*time.Millisecond, func(s *Server) error {
		if s.Name() == "A" && round.Add(1)%2 == 0 || s.Name() == "B" && round.Load()%2 == 1 {
			return errors.New("flaps")
		}
		return nil
	})
	if err == nil {
		t.Fatal("a condition never true on both servers in one round passed")
	}
}

// TestGate signs requests through the gate with the package store's own client: uploads and
// checks pass, a download waits while the gate holds and completes once it is released.
func TestGate(t *testing.T) {
	s3 := testkit.StartS3(t)
	gate := NewGate(t, s3.Endpoint)
	ctx := context.Background()
	store, err := packagestore.New(ctx, packagestore.Options{Endpoint: gate.URL, Bucket: s3.Bucket(t, "gated"), Region: s3.Region,
		Prefix: "p", AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Check(ctx); err != nil {
		t.Fatalf("check through the gate: %v", err)
	}
	data := []byte("an archive")
	sum := sha256.Sum256(data)
	gate.Hold()
	if err := store.Put(ctx, sum, int64(len(data)), bytes.NewReader(data)); err != nil {
		t.Fatalf("put through a holding gate: %v", err)
	}
	got := make(chan string, 1)
	go func() {
		r, err := store.Open(ctx, sum, int64(len(data)))
		if err != nil {
			got <- err.Error()
			return
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(b)
	}()
	Eventually(t, "the download to wait at the gate", 10*time.Second, func() bool { return gate.Waiting() == 1 })
	select {
	case g := <-got:
		t.Fatalf("the download passed a holding gate: %q", g)
	default:
	}
	gate.Release()
	select {
	case g := <-got:
		if g != string(data) {
			t.Fatalf("the download through the released gate = %q", g)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the released download did not complete")
	}
	if _, err := os.Stat(s3.Object("gated", "p/sha256/"+hex.EncodeToString(sum[:]))); err != nil {
		t.Fatalf("the object put through the gate: %v", err)
	}
}
