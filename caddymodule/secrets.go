package caddymodule

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/secrets"
	"github.com/caddy-runtime/runtime/keystore"
)

// secretState is what the state keeps for the workers' secrets: the key of the latest config
// and, to restart a worker's processes once after a change of its secrets, the change number
// of each worker's secrets the running processes were started with.
type secretState struct {
	key  atomic.Pointer[secrets.Key] // nil when none is configured
	old  atomic.Pointer[secrets.Key] // secrets_key_old: opens, never seals; nil when none
	mu   sync.Mutex
	seen map[string]int64 // guarded by mu
	// restarted is, by worker, the versions its last change of secrets restarted, and that
	// change's number (guarded by mu): the API reports them, whoever applied the change.
	restarted map[string]restart
	stop      context.CancelFunc
	done      chan struct{} // closed when the watcher has stopped
}

// restart is the versions of a worker restarted for the change of its secrets numbered change.
type restart struct {
	change   int64
	versions []string
}

// setSecretsKey makes text (base64, checked by the settings; "" for none) the key the state
// seals and opens secrets with, and old (likewise) the previous key, which opens the values
// still sealed under it while secrets rotate has not re-sealed them.
func (s *state) setSecretsKey(text, old string) error {
	for _, k := range []struct {
		setting, text string
		into          *atomic.Pointer[secrets.Key]
	}{{"secrets_key", text, &s.secrets.key}, {"secrets_key_old", old, &s.secrets.old}} {
		if k.text == "" {
			k.into.Store(nil)
			continue
		}
		key, err := secrets.ParseKey(k.text)
		if err != nil {
			return fmt.Errorf("invalid %s: %v", k.setting, err)
		}
		k.into.Store(key)
	}
	return nil
}

// secretsKey returns the key of the latest config, nil when none is configured.
func (s *state) secretsKey() *secrets.Key { return s.secrets.key.Load() }

// workerSecrets opens the secrets of worker for a process of it that starts. A worker with
// secrets and no key to open them with does not start: it would run without them.
func (s *state) workerSecrets(ctx context.Context, worker string) (map[string]string, error) {
	store, err := s.keyStore()
	if err != nil {
		return nil, err
	}
	rows, err := store.Secrets.List(ctx, worker)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	key := s.secretsKey()
	if key == nil {
		return nil, fmt.Errorf("worker %s has secrets, but no secrets_key is configured to open them: %s", worker, secretsKeyHint)
	}
	old := s.secrets.old.Load()
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		k := key
		if old != nil && r.KeyID == old.ID() {
			k = old
		}
		value, err := k.Open(r.Worker, r.Name, r.KeyID, r.Sealed)
		if err != nil {
			return nil, fmt.Errorf("secret %s: %v", r.Name, err)
		}
		out[r.Name] = value
	}
	return out, nil
}

// secretsKeyHint says how to configure a secrets key.
const secretsKeyHint = "set RUNTIME_SECRETS_KEY to 32 random bytes in base64 (" + secrets.GenerateHint +
	"), or write secrets_key {env.RUNTIME_SECRETS_KEY} in the global runtime option, and restart the runtime"

// watchSecrets restarts, on every change of the secrets this instance holds (a change made
// here, or one pulled from the primary), the running processes of each worker whose secrets
// changed, until ctx ends.
func (s *state) watchSecrets(ctx context.Context, store *keystore.Store) {
	defer close(s.secrets.done)
	s.applySecrets(store, true)
	for {
		select {
		case <-ctx.Done():
			return
		case <-store.Secrets.Changed():
			s.applySecrets(store, false)
		}
	}
}

// applySecrets restarts the processes of the workers whose secrets changed since it last
// looked, and returns the versions restarted by worker; first only takes note. Changes are
// applied once, whoever calls it first: the watcher, or the API after a change it made.
func (s *state) applySecrets(store *keystore.Store, first bool) {
	versions, err := store.Secrets.Versions(context.Background())
	if err != nil {
		s.logger.Error("reading the changes of the workers' secrets", zap.Error(err))
		return
	}
	s.secrets.mu.Lock()
	defer s.secrets.mu.Unlock()
	seen := s.secrets.seen
	s.secrets.seen = versions
	pool := s.workerPool()
	if first || seen == nil || pool == nil {
		return
	}
	if s.secrets.restarted == nil {
		s.secrets.restarted = map[string]restart{}
	}
	for worker, change := range versions {
		if seen[worker] == change {
			continue
		}
		s.forgetWasmSecrets(worker) // its next WebAssembly request opens them again
		restarted := pool.Restart(worker, "")
		s.secrets.restarted[worker] = restart{change: change, versions: restarted}
		if len(restarted) > 0 {
			s.logger.Info("the worker's secrets changed: restarted its processes", zap.String("worker", worker), zap.Strings("versions", restarted))
		}
	}
}

// startSecrets starts the watcher of the secrets of store.
func (s *state) startSecrets(store *keystore.Store) {
	ctx, stop := context.WithCancel(context.Background())
	s.secrets.stop, s.secrets.done = stop, make(chan struct{})
	go s.watchSecrets(ctx, store)
}

// stopSecrets stops the watcher, if it runs, and waits for it.
func (s *state) stopSecrets() {
	if s.secrets.stop != nil {
		s.secrets.stop()
		<-s.secrets.done
	}
}

// secretsChanged applies a change the API made to worker's secrets, numbered change, before
// it answers, and returns the versions of worker restarted for it (or a later change).
func (s *state) secretsChanged(worker string, change int64) []string {
	store := s.keys.Load()
	if store == nil {
		return nil
	}
	s.applySecrets(store, false)
	s.secrets.mu.Lock()
	defer s.secrets.mu.Unlock()
	if r := s.secrets.restarted[worker]; r.change >= change {
		return r.versions
	}
	return nil
}
