package caddymodule

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/hosts"
	"github.com/caddy-runtime/runtime/internal/lifecycle"
	"github.com/caddy-runtime/runtime/keystore"
)

// domainFollower is the state's part that keeps the host router's custom domains as the key
// store holds them, from its start until it stops.
type domainFollower struct {
	keys   func() *keystore.Store
	router *hosts.Router
	logger *zap.Logger
	loop   lifecycle.Loop
}

// refresh gives the host router the verified custom domains the key store holds now.
func (d *domainFollower) refresh(ctx context.Context) error {
	store := d.keys()
	if store == nil {
		return nil
	}
	list, err := store.Domains.List(ctx, "")
	if err != nil {
		return fmt.Errorf("reading the custom domains: %w", err)
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

// Start reads the custom domains of the opened key store and follows its changes.
func (d *domainFollower) Start() error {
	if err := d.refresh(context.Background()); err != nil {
		return err
	}
	store := d.keys()
	d.loop.Go(func(ctx context.Context) { d.follow(ctx, store) })
	return nil
}

// Stop stops following the key store's changes.
func (d *domainFollower) Stop() error { return d.loop.Stop() }

// follow refreshes the router's custom domains after each change the key store signals: one
// made here, or one a pull brought from another instance. A failed read is tried again a
// little later; meanwhile the router keeps what it had. Every hour it drops the claims
// pending for longer than keystore.PendingDomainTTL (the drop signals a change).
func (d *domainFollower) follow(ctx context.Context, store *keystore.Store) {
	var retry <-chan time.Time
	expire := time.NewTicker(time.Hour)
	defer expire.Stop()
	for {
		select {
		case <-store.Domains.Changed():
		case <-retry:
		case <-expire.C:
			if n, err := store.Domains.DropExpired(context.Background()); err != nil {
				d.logger.Warn("dropping expired custom domain claims; they are tried again in an hour (listings skip them meanwhile)", zap.Error(err))
			} else if n > 0 {
				d.logger.Info("dropped custom domain claims pending for too long", zap.Int("claims", n),
					zap.Duration("pending_for", keystore.PendingDomainTTL))
			}
			continue
		case <-ctx.Done():
			return
		}
		retry = nil
		if err := d.refresh(context.Background()); err != nil {
			d.logger.Error("refreshing the custom domains", zap.Error(err))
			retry = time.After(5 * time.Second)
		}
	}
}

// ownHosts are the host names serving the API: no custom domain may take one.
func (s *state) ownHosts() []string {
	if p := s.apiHosts.Load(); p != nil {
		return *p
	}
	return nil
}
