package keystore

import (
	"context"
	"sync"
	"time"
)

// usageInterval is the shortest time between two usage writes (a key's lastUsedAt, a
// session's lastSeenAt) for one row.
const usageInterval = time.Minute

// usageRecorder writes a usage time in the background, at most once per usageInterval per
// row, so verifying a credential never waits for a database write.
type usageRecorder struct {
	write  func(ctx context.Context, fn func(tx writeTx) error) error
	update string // the UPDATE statement, with parameters time, change number, id, time

	onWrite func()     // called after each batch of writes
	flushMu sync.Mutex // one flush at a time, so a flush returns after any write under way
	mu      sync.Mutex
	written map[int64]int64 // row id → last time written (or read)
	pending map[int64]int64 // row id → time to write

	wake chan struct{}
	done chan struct{}
	quit chan struct{}
	once sync.Once
}

// newUsageRecorder starts a recorder writing through write with update, whose parameters are
// the time, the change number, the row id and the time again (so a write never moves the time
// back).
func newUsageRecorder(write func(ctx context.Context, fn func(tx writeTx) error) error, update string, written func()) *usageRecorder {
	u := &usageRecorder{
		write: write, update: update, onWrite: written,
		written: map[int64]int64{}, pending: map[int64]int64{},
		wake: make(chan struct{}, 1), done: make(chan struct{}), quit: make(chan struct{}),
	}
	go u.loop()
	return u
}

// touch notes a use of row id at now; stored is the time the caller last saw.
func (u *usageRecorder) touch(id, stored int64, now time.Time) {
	at := now.Unix()
	u.mu.Lock()
	last, ok := u.written[id]
	if !ok || stored > last {
		last = stored
	}
	due := at-last >= int64(usageInterval/time.Second)
	if due {
		u.written[id] = at
		u.pending[id] = at
	}
	u.mu.Unlock()
	if due {
		select {
		case u.wake <- struct{}{}:
		default:
		}
	}
}

func (u *usageRecorder) loop() {
	defer close(u.done)
	for {
		select {
		case <-u.wake:
			_ = u.flush(context.Background())
		case <-u.quit:
			_ = u.flush(context.Background())
			return
		}
	}
}

func (u *usageRecorder) flush(ctx context.Context) error {
	u.flushMu.Lock()
	defer u.flushMu.Unlock()
	u.mu.Lock()
	batch := u.pending
	u.pending = map[int64]int64{}
	u.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	defer u.onWrite() // after the writes, failed ones included: some may have gone through
	err := u.write(ctx, func(tx writeTx) error {
		for id, at := range batch {
			if _, err := tx.ExecContext(ctx, u.update, at, tx.seq, id, at); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		// Kept for the next flush (sync mode: when the primary is back), so no use is lost.
		u.mu.Lock()
		for id, at := range batch {
			if at > u.pending[id] {
				u.pending[id] = at
			}
		}
		u.mu.Unlock()
	}
	return err
}

// kick flushes pending writes in the background, if there are any.
func (u *usageRecorder) kick() {
	u.mu.Lock()
	n := len(u.pending)
	u.mu.Unlock()
	if n > 0 {
		select {
		case u.wake <- struct{}{}:
		default:
		}
	}
}

func (u *usageRecorder) stop() {
	u.once.Do(func() { close(u.quit) })
	<-u.done
}
