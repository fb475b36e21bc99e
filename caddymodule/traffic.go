package caddymodule

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/lifecycle"
	"github.com/caddy-runtime/runtime/internal/serving"
	"github.com/caddy-runtime/runtime/keystore"
)

// trafficFollower is the state's part that keeps the traffic splits in force as the key store
// holds them: read at start, and again whenever the key store's change (a pull brought a
// split set on another instance), until it stops.
type trafficFollower struct {
	keys   func() *keystore.Store
	splits *serving.Splits
	logger *zap.Logger
	mu     sync.Mutex // one apply at a time, so a later read is never replaced by an earlier one
	loop   lifecycle.Loop
}

// apply puts the traffic splits the key store holds in force.
func (t *trafficFollower) apply(ctx context.Context) error {
	store := t.keys()
	if store == nil {
		return errStarting
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	all, err := store.Traffic.List(ctx)
	if err != nil {
		return err
	}
	splits := make(map[string][]serving.Share, len(all))
	for _, tr := range all {
		for _, sh := range tr.Shares {
			splits[tr.Name] = append(splits[tr.Name], serving.Share{Version: sh.Version, Percent: sh.Percent})
		}
	}
	t.splits.Replace(splits)
	return nil
}

// Start applies the splits the opened key store holds and follows its changes.
func (t *trafficFollower) Start() error {
	if err := t.apply(context.Background()); err != nil {
		return fmt.Errorf("reading the traffic splits: %w", err)
	}
	store := t.keys()
	t.loop.Go(func(ctx context.Context) {
		for {
			select {
			case <-store.Traffic.Changed():
				if err := t.apply(context.Background()); err != nil {
					t.logger.Error("applying the traffic splits; the ones before stay in force", zap.Error(err))
				}
			case <-ctx.Done():
				return
			}
		}
	})
	return nil
}

// Stop stops following the key store's changes.
func (t *trafficFollower) Stop() error { return t.loop.Stop() }
