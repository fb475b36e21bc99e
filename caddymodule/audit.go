package caddymodule

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/lifecycle"
	"github.com/caddy-runtime/runtime/keystore"
)

// auditPruneEvery is how often the audit trail drops the entries past its retention.
const auditPruneEvery = time.Hour

// auditPruner is the state's part that drops the audit entries older than the retention, at
// start and then every auditPruneEvery, until it stops.
type auditPruner struct {
	keys      func() *keystore.Store
	retention atomic.Int64 // audit_retention of the latest config
	logger    *zap.Logger
	loop      lifecycle.Loop
}

// Start starts pruning the opened key store.
func (p *auditPruner) Start() error {
	store := p.keys()
	p.loop.Go(func(ctx context.Context) { p.run(ctx, store) })
	return nil
}

// Stop stops pruning and waits for a pass under way.
func (p *auditPruner) Stop() error { return p.loop.Stop() }

func (p *auditPruner) run(ctx context.Context, store *keystore.Store) {
	tick := time.NewTicker(auditPruneEvery)
	defer tick.Stop()
	for {
		if keep := time.Duration(p.retention.Load()); keep > 0 {
			n, err := store.Audit.Prune(context.Background(), time.Now().Add(-keep))
			switch {
			case err != nil:
				p.logger.Error("pruning the audit trail", zap.Error(err))
			case n > 0:
				p.logger.Info("pruned the audit trail", zap.Int64("entries", n), zap.Duration("audit_retention", keep))
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}
