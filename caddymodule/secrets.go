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
	// kept is each worker's secrets as opened, for the starts of its processes and its
	// WebAssembly requests; apply drops a worker's when they change.
	kept keptSecrets
	// What the follower works with, set by newState: the pool once opened.
	pool func() *workers.Pool
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
	// What was opened with the keys before stays out of use: opened again with these, or
	// refused when they cannot.
	s.secrets.kept.forget("")
	return nil
}

// secretsKey returns the key of the latest config, nil when none is configured.
func (s *state) secretsKey() *secrets.Key { return s.secrets.key.Load() }

// workerSecrets returns the secrets of worker, for a process of it that starts or a
// WebAssembly request: as kept since they were last opened, or opened now (openSecrets).
func (s *state) workerSecrets(ctx context.Context, worker string) (map[string]string, error) {
	return s.secrets.kept.get(ctx, worker, s.openSecrets)
}

// openSecrets reads and opens the secrets of worker. A worker with secrets and no key to
// open them with does not start: it would run without them.
func (s *state) openSecrets(ctx context.Context, worker string) (map[string]string, error) {
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
	if seen == nil {
		// What was opened before the first look may predate a change it cannot tell.
		ss.kept.forget("")
		return nil
	}
	pool := ss.pool()
	if ss.restarted == nil {
		ss.restarted = map[string]restart{}
	}
	for worker, change := range versions {
		if seen[worker] == change {
			continue
		}
		ss.kept.forget(worker) // the processes it restarts, and its next WebAssembly request, open them again
		if pool == nil {
			continue
		}
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

// keptSecrets keeps each worker's opened secrets (none, for most) between the starts of its
// processes, sparing each start a read of the key store (a third of a millisecond of a cold
// start). The state drops a worker's when its change number moves (secretState.apply, which
// a change made here runs before the API answers, and the feed runs for one pulled from the
// primary), and all of them with new keys; gen counts the drops, so an open that a change
// overtook is not kept.
type keptSecrets struct {
	mu       sync.Mutex
	byWorker map[string]map[string]string
	gen      uint64
}

// maxKeptSecrets bounds the workers whose secrets are kept; past it they start afresh.
const maxKeptSecrets = 4096

// get returns worker's secrets as kept, or opened with open and kept.
func (k *keptSecrets) get(ctx context.Context, worker string, open func(context.Context, string) (map[string]string, error)) (map[string]string, error) {
	k.mu.Lock()
	kept, ok := k.byWorker[worker]
	gen := k.gen
	k.mu.Unlock()
	if ok {
		return kept, nil
	}
	opened, err := open(ctx, worker)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gen == gen {
		if k.byWorker == nil || len(k.byWorker) >= maxKeptSecrets {
			k.byWorker = map[string]map[string]string{}
		}
		k.byWorker[worker] = opened
	}
	return opened, nil
}

// forget drops the kept secrets of worker, or of every worker for "".
func (k *keptSecrets) forget(worker string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if worker == "" {
		k.byWorker = nil
	} else {
		delete(k.byWorker, worker)
	}
	k.gen++
}
