package keystore

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// usageInterval is the shortest time between two usage writes (a key's lastUsedAt, a
// session's lastSeenAt) for one row.
const usageInterval = time.Minute

// usageRecorder writes a usage time in the background, at most once per usageInterval per
// row, so verifying a credential never waits for a database write.
type usageRecorder struct {
	db      *sql.DB
	writeMu *sync.Mutex
	update  string // the UPDATE statement, with parameters time, id, time

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

// newUsageRecorder starts a recorder writing with update, whose parameters are the time, the
// row id and the time again (so a write never moves the time back).
func newUsageRecorder(db *sql.DB, writeMu *sync.Mutex, update string, written func()) *usageRecorder {
	u := &usageRecorder{
		db: db, writeMu: writeMu, update: update, onWrite: written,
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
	u.writeMu.Lock()
	defer u.writeMu.Unlock()
	defer u.onWrite() // after the writes, failed ones included: some may have gone through
	for id, at := range batch {
		if _, err := u.db.ExecContext(ctx, u.update, at, id, at); err != nil {
			return err
		}
	}
	return nil
}

func (u *usageRecorder) stop() {
	u.once.Do(func() { close(u.quit) })
	<-u.done
}
