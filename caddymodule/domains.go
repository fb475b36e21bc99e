package caddymodule

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/hosts"
	"github.com/caddy-runtime/runtime/internal/lifecycle"
	"github.com/caddy-runtime/runtime/keystore"
)

// domainFollower is the state's part that keeps the host router's custom domains as the key
// store holds them (its follower refreshes them), and refreshes them at once after a change
// the API made.
type domainFollower struct {
	follower
	router *hosts.Router
}

func newDomainFollower(keys func() *keystore.Store, router *hosts.Router, logger *zap.Logger) *domainFollower {
	d := &domainFollower{router: router}
	d.follower = follower{what: "the custom domains", topic: keystore.DomainsTopic, keys: keys, apply: d.refresh, logger: logger}
	return d
}

// refresh gives the host router the verified custom domains the key store holds now.
func (d *domainFollower) refresh(ctx context.Context) error {
	store := d.keys()
	if store == nil {
		return nil
	}
	list, err := store.Domains.List(ctx, "")
	if err != nil {
		return err
	}
	verified, pending := make(map[string]string, len(list)), map[string]string{}
	for _, dom := range list {
		if dom.Verified() {
			verified[dom.Domain] = dom.Worker
		} else {
			pending[dom.Domain] = dom.Worker
		}
	}
	d.router.SetCustom(verified, pending)
	return nil
}

// expireDomains drops, every hour until Stop, the claims pending for longer than
// keystore.PendingDomainTTL (the drop is a change, which the follower applies).
type expireDomains struct {
	keys   func() *keystore.Store
	logger *zap.Logger
	loop   lifecycle.Loop
}

// Start starts the hourly drop.
func (e *expireDomains) Start() error {
	e.loop.Go(func(ctx context.Context) {
		tick := time.NewTicker(time.Hour)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
			store := e.keys()
			if store == nil {
				continue
			}
			if n, err := store.Domains.DropExpired(ctx); err != nil {
				e.logger.Warn("dropping expired custom domain claims; they are tried again in an hour (listings skip them meanwhile)", zap.Error(err))
			} else if n > 0 {
				e.logger.Info("dropped custom domain claims pending for too long", zap.Int("claims", n),
					zap.Duration("pending_for", keystore.PendingDomainTTL))
			}
		}
	})
	return nil
}

// Stop stops the hourly drop.
func (e *expireDomains) Stop() error { return e.loop.Stop() }

// ownHosts are the host names serving the API: no custom domain may take one.
func (s *state) ownHosts() []string {
	if p := s.apiHosts.Load(); p != nil {
		return *p
	}
	return nil
}
