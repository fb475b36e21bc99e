package caddymodule

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/secrets"
	"github.com/caddy-runtime/runtime/internal/workers"
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
	// What the follower works with, set by newState: the pool once opened, and the drop of a
	// worker's secrets kept for WebAssembly requests.
	pool   func() *workers.Pool
	forget func(worker string)
	// follower (its keys: the key store once opened) applies every change of the secrets this instance holds (one made here, or
	// one pulled from the primary) to the running processes of each worker concerned.
	follower
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
			return fmt.Errorf("invalid %s: %w", k.setting, err)
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
			return nil, fmt.Errorf("secret %s: %w", r.Name, err)
		}
		out[r.Name] = value
	}
	return out, nil
}

// secretsKeyHint says how to configure a secrets key.
const secretsKeyHint = "set RUNTIME_SECRETS_KEY to 32 random bytes in base64 (" + secrets.GenerateHint +
	"), or write secrets_key {env.RUNTIME_SECRETS_KEY} in the global runtime option, and restart the runtime"

// apply restarts the processes of the workers whose secrets changed since it last looked;
// its first look only takes note. Changes are applied once, whoever calls it first: the
// follower, or the API after a change it made.
func (ss *secretState) apply(ctx context.Context) error {
	store := ss.keys()
	if store == nil {
		return nil
	}
	versions, err := store.Secrets.Versions(ctx)
	if err != nil {
		return fmt.Errorf("reading the changes of the workers' secrets: %w", err)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	seen := ss.seen
	ss.seen = versions
	pool := ss.pool()
	if seen == nil || pool == nil {
		return nil
	}
	if ss.restarted == nil {
		ss.restarted = map[string]restart{}
	}
	for worker, change := range versions {
		if seen[worker] == change {
			continue
		}
		ss.forget(worker) // its next WebAssembly request opens them again
		restarted := pool.Restart(worker, "")
		ss.restarted[worker] = restart{change: change, versions: restarted}
		if len(restarted) > 0 {
			ss.logger.Info("the worker's secrets changed: restarted its processes", zap.String("worker", worker), zap.Strings("versions", restarted))
		}
	}
	return nil
}

// changed applies a change the API made to worker's secrets, numbered change, before it
// answers, and returns the versions of worker restarted for it (or a later change).
func (ss *secretState) changed(worker string, change int64) []string {
	if err := ss.apply(context.Background()); err != nil {
		ss.logger.Error("applying a change of the workers' secrets", zap.Error(err))
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if r := ss.restarted[worker]; r.change >= change {
		return r.versions
	}
	return nil
}
