package caddymodule

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/lifecycle"
	"github.com/caddy-runtime/runtime/keystore"
)

// followRetry is how long a follower waits to apply again after a failed apply.
const followRetry = 5 * time.Second

// follower is a state part that keeps something in force as the key store holds it: apply
// reads it at Start and again after each change the store's feed announces on topic (one
// made here, or one a pull brought from another instance), until Stop. A failed apply is
// tried again after followRetry; what it put in force before stays meanwhile.
type follower struct {
	what   string // what apply keeps in force, for errors and the log
	topic  keystore.Topic
	keys   func() *keystore.Store
	apply  func(ctx context.Context) error
	logger *zap.Logger
	loop   lifecycle.Loop
}

// Start subscribes to the feed, then applies what the opened key store holds, so no change
// falls between the two, and follows the changes.
func (f *follower) Start() error {
	store := f.keys()
	if store == nil {
		return errStarting
	}
	changes, unfollow := store.Feed.Follow(f.topic)
	if err := f.apply(context.Background()); err != nil {
		unfollow()
		return fmt.Errorf("reading %s: %w", f.what, err)
	}
	f.loop.Go(func(ctx context.Context) {
		defer unfollow()
		var retry <-chan time.Time
		for {
			select {
			case <-changes:
			case <-retry:
			case <-ctx.Done():
				return
			}
			retry = nil
			if err := f.apply(ctx); err != nil && ctx.Err() == nil {
				f.logger.Error("applying "+f.what+"; what was in force stays, and it is tried again shortly", zap.Error(err))
				retry = time.After(followRetry)
			}
		}
	})
	return nil
}

// Stop stops following the key store's changes.
func (f *follower) Stop() error { return f.loop.Stop() }
