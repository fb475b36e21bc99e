package caddymodule

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/serving"
	"github.com/caddy-runtime/runtime/keystore"
)

// trafficFollower is the state's part that keeps the traffic splits in force as the key store
// holds them (its follower applies them), and applies them at once after a change the API made.
type trafficFollower struct {
	follower
	splits *serving.Splits
	mu     sync.Mutex // one apply at a time, so a later read is never replaced by an earlier one
}

func newTrafficFollower(keys func() *keystore.Store, splits *serving.Splits, logger *zap.Logger) *trafficFollower {
	t := &trafficFollower{splits: splits}
	t.follower = follower{what: "the traffic splits", topic: keystore.TrafficTopic, keys: keys, apply: t.apply, logger: logger}
	return t
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
