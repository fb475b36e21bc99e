package caddymodule

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/keystore"
)

// refreshDomains gives the host router the verified custom domains the key store holds now.
func (s *state) refreshDomains(ctx context.Context) error {
	store := s.keys.Load()
	if store == nil {
		return nil
	}
	list, err := store.Domains.List(ctx, "")
	if err != nil {
		return fmt.Errorf("reading the custom domains: %v", err)
	}
	verified, pending := make(map[string]string, len(list)), map[string]string{}
	for _, d := range list {
		if d.Verified() {
			verified[d.Domain] = d.Worker
		} else {
			pending[d.Domain] = d.Worker
		}
	}
	s.hosts.SetCustom(verified, pending)
	return nil
}

// followDomains refreshes the router's custom domains after each change the key store
// signals: one made here, or one a pull brought from another instance. A failed read is tried
// again a little later; meanwhile the router keeps what it had. Every hour it drops the claims
// pending for longer than keystore.PendingDomainTTL (the drop signals a change).
func (s *state) followDomains(store *keystore.Store) {
	defer close(s.domainsDone)
	var retry <-chan time.Time
	expire := time.NewTicker(time.Hour)
	defer expire.Stop()
	for {
		select {
		case <-store.Domains.Changed():
		case <-retry:
		case <-expire.C:
			if n, err := store.Domains.DropExpired(context.Background()); err != nil {
				s.logger.Warn("dropping expired custom domain claims; they are tried again in an hour (listings skip them meanwhile)", zap.Error(err))
			} else if n > 0 {
				s.logger.Info("dropped custom domain claims pending for too long", zap.Int("claims", n),
					zap.Duration("pending_for", keystore.PendingDomainTTL))
			}
			continue
		case <-s.stopDomains:
			return
		}
		retry = nil
		if err := s.refreshDomains(context.Background()); err != nil {
			s.logger.Error("refreshing the custom domains", zap.Error(err))
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
