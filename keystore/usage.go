package keystore

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// usageInterval is the shortest time between two lastUsedAt writes for one key.
const usageInterval = time.Minute

// usageRecorder writes lastUsedAt in the background, at most once per usageInterval per key,
// so verifying a key never waits for a database write.
type usageRecorder struct {
	db      *sql.DB
	writeMu *sync.Mutex

	mu      sync.Mutex
	written map[int64]int64 // key id → last lastUsedAt written (or read)
	pending map[int64]int64 // key id → lastUsedAt to write

	wake chan struct{}
	done chan struct{}
	quit chan struct{}
	once sync.Once
}

func newUsageRecorder(db *sql.DB, writeMu *sync.Mutex) *usageRecorder {
	u := &usageRecorder{
		db: db, writeMu: writeMu,
		written: map[int64]int64{}, pending: map[int64]int64{},
		wake: make(chan struct{}, 1), done: make(chan struct{}), quit: make(chan struct{}),
	}
	go u.loop()
	return u
}

// touch notes a use of key id at now; stored is the lastUsedAt the caller last saw.
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
	u.mu.Lock()
	batch := u.pending
	u.pending = map[int64]int64{}
	u.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	u.writeMu.Lock()
	defer u.writeMu.Unlock()
	for id, at := range batch {
		if _, err := u.db.ExecContext(ctx, `UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)`, at, id, at); err != nil {
			return err
		}
	}
	return nil
}

func (u *usageRecorder) stop() {
	u.once.Do(func() { close(u.quit) })
	<-u.done
}
