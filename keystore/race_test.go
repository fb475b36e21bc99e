package keystore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// raceTrials is how many races each race test runs, spread over raceWorkers goroutines: 3000,
// or 1000 under the race detector, which keeps the tests within seconds.
var raceTrials = map[bool]int{false: 3000, true: 1000}[raceDetector]

const raceWorkers = 8

// raceAll runs trial for each of raceTrials numbers from raceWorkers goroutines and fails the
// test with the number of trials that left a survivor: a credential that was ended and still
// verifies.
func raceAll(t *testing.T, what string, trial func(n int) (survived bool, err error)) {
	t.Helper()
	var survivors atomic.Int64
	var wg sync.WaitGroup
	for w := range raceWorkers {
		wg.Go(func() {
			for i := w; i < raceTrials; i += raceWorkers {
				survived, err := trial(i)
				if err != nil {
					t.Error(err)
					return
				}
				if survived {
					survivors.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := survivors.Load(); n > 0 {
		t.Fatalf("%d of %d %s still verify", n, raceTrials, what)
	}
}

// race runs the functions at once and waits for them.
func race(fns ...func()) {
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Go(fn)
	}
	wg.Wait()
}

// credentials stores n keys with a session each, in one transaction (one write per key would
// make the race tests slow under the race detector), and returns their secrets and tokens.
func credentials(t *testing.T, s *Store, n int) (keys []Created, tokens []string) {
	t.Helper()
	ctx := context.Background()
	now := s.now().Unix()
	err := s.write(ctx, func(tx writeTx) error {
		for i := range n {
			secret, _ := newSecret(KeyPrefix)
			token, _ := newSecret(SessionPrefix)
			rec, err := Normalize(NewKey{Name: fmt.Sprintf("race-%d", i)}, s.now())
			if err != nil {
				return err
			}
			rec.KeyPrefix, rec.CreatedAt = secret[:KeyPrefixLength], now
			if rec.ID, err = insertKey(ctx, tx, rec, HashKey(secret)); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (token_hash, key_id, created_at, expires_at, last_seen_at)
				VALUES (?, ?, ?, ?, ?)`, HashKey(token), rec.ID, now, now+3600, now); err != nil {
				return err
			}
			keys, tokens = append(keys, Created{KeyRecord: rec, Secret: secret}), append(tokens, token)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys, tokens
}

// TestRevokeRacingFirstUse races the first use of a key and of one of its sessions (which fill
// the caches) against the key's revocation, and checks that no revoked key, and no session of
// one, verifies afterwards.
func TestRevokeRacingFirstUse(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newStore(t)
	keys, tokens := credentials(t, s, raceTrials)
	raceAll(t, "revoked keys or their sessions", func(n int) (bool, error) {
		k, token := keys[n], tokens[n]
		var revokeErr error
		race(
			func() { s.Verify(ctx, k.Secret) },
			func() { s.Sessions.Verify(ctx, token, "") },
			func() { revokeErr = s.Revoke(ctx, k.ID) },
		)
		if revokeErr != nil {
			return false, revokeErr
		}
		_, keyErr := s.Verify(ctx, k.Secret)
		_, _, sessErr := s.Sessions.Verify(ctx, token, "")
		return !errors.Is(keyErr, ErrInvalidKey) || !errors.Is(sessErr, ErrInvalidSession), nil
	})
	if list, _ := s.List(ctx); len(list) != 0 {
		t.Fatalf("%d revoked keys are listed", len(list))
	}
}

// TestLogoutRacingFirstUse races the first use of a session against its end.
func TestLogoutRacingFirstUse(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newStore(t)
	_, tokens := credentials(t, s, raceTrials)
	raceAll(t, "ended sessions", func(n int) (bool, error) {
		token := tokens[n]
		var endErr error
		race(
			func() { s.Sessions.Verify(ctx, token, "") },
			func() { endErr = s.Sessions.EndToken(ctx, token) },
		)
		_, _, err := s.Sessions.Verify(ctx, token, "")
		return !errors.Is(err, ErrInvalidSession), endErr
	})
}
