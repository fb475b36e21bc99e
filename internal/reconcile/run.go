package reconcile

import (
	"context"
	"time"

	"github.com/caddy-runtime/runtime/keystore"
)

// Run is the one loop that converges this instance: a pass at once, then one after each
// signal on changed (a subscription to the key store's keystore.UnitsTopic: a change made here, or a pull that brought
// changed rows), one when a failed unit's retry is due, one at once after a pass that left
// installs to the next (Result.Deferred, Hurry), and one every interval (0: keystore.DefaultSyncInterval)
// even without a signal, so that a tree removed or changed by hand is put right. Signals that come during
// a pass are merged into one pass after it. Each pass's result, or the error of a pass that
// could not compare, goes to report, in the loop's goroutine. Run returns when ctx ends.
func (r *Reconciler) Run(ctx context.Context, changed <-chan struct{}, interval time.Duration, report func(Result, error)) {
	if interval <= 0 {
		interval = keystore.DefaultSyncInterval
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	failed := 0 // passes in a row that could not compare
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-r.kick:
		case <-timer.C:
		}
		res, err := r.Reconcile(ctx)
		if ctx.Err() != nil {
			return
		}
		report(res, err)
		wait := interval
		if err != nil {
			failed++
			wait = min(wait, r.backoff(failed))
		} else {
			failed = 0
		}
		if next := res.NextRetry(); !next.IsZero() {
			wait = min(wait, max(next.Sub(r.opts.Now()), 0))
		}
		if len(res.Deferred) > 0 {
			wait = 0 // after the caller it made way for
		}
		timer.Reset(wait)
	}
}
