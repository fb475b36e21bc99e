package reconcile

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/caddy-runtime/runtime/internal/packagestore"
	"github.com/caddy-runtime/runtime/keystore"
)

// DefaultGrace is how long an archive no live row refers to stays in the package store. An
// upload puts its object before it writes its row, and an upload may wait on a slow client
// and a busy primary in between: a day is far beyond any upload, so an object put moments
// ago is never taken from under its row. A removed version's archive stays as long after the
// removal, so an instance that was away, or is still converging on the removal, never asks
// for it (removing a tree needs no archive; the day is for a tombstone that arrives
// together with a rollback to it).
const DefaultGrace = 24 * time.Hour

// DefaultCollectInterval is how often a Collector collects: archives are few and large, and
// listing a bucket costs requests, so every few hours is enough.
const DefaultCollectInterval = 6 * time.Hour

// Why an object was kept.
const (
	KeptLive    = "live"    // a live row refers to it
	KeptRecent  = "recent"  // put within the grace period: an upload may be about to write its row
	KeptRemoved = "removed" // only removed rows refer to it, the last removal within the grace period
)

// Collected is what one collection did with each object of the store.
type Collected struct {
	Deleted []packagestore.Object
	Kept    []KeptObject
	Failed  []FailedObject
}

// KeptObject is an object a collection left, and why (KeptLive, KeptRecent, KeptRemoved).
type KeptObject struct {
	packagestore.Object
	Reason string
}

// FailedObject is an object a collection could not delete.
type FailedObject struct {
	packagestore.Object
	Err error
}

// Collect deletes the objects of store that no live row of rows refers to and whose last
// change is older than grace before now: the object's own time, and for an object that only
// removed rows refer to, the last of those removals too. rows must be the whole desired state
// (keystore.Units.Versions), tombstones included.
//
// Each object to delete is looked at again (a HEAD) right before its delete, and kept when
// its time is no longer older than grace: an upload put it again since the listing (see
// packagestore.RefreshAfter) and is about to write its row. A look or delete that fails is
// reported and the collection goes on; the error is a listing that failed (what was done
// before it is reported) or a grace that is not positive.
//
// Several instances may collect at once: an object another one deleted is skipped (and a
// delete of an object already gone succeeds), and each decides from the same rows and times.
func Collect(ctx context.Context, store packagestore.Store, rows []keystore.UnitVersion, grace time.Duration, now time.Time) (Collected, error) {
	var out Collected
	if grace <= 0 {
		return out, fmt.Errorf("collecting the package store: grace %v is not positive", grace)
	}
	live := map[[32]byte]bool{}
	removed := map[[32]byte]time.Time{} // the last removal of each archive's rows
	for _, row := range rows {
		sum, err := packagestore.ParseSum(strings.ToLower(row.SHA256))
		if err != nil {
			continue
		}
		if row.Live() {
			live[sum] = true
		} else if at := time.Unix(row.RemovedAt, 0); at.After(removed[sum]) {
			removed[sum] = at
		}
	}
	cutoff := now.Add(-grace)
	for obj, err := range store.List(ctx) {
		if err != nil {
			return out, fmt.Errorf("listing the package store: %w", err)
		}
		reason := ""
		switch {
		case live[obj.Sum]:
			reason = KeptLive
		case obj.Modified.After(cutoff):
			reason = KeptRecent
		case removed[obj.Sum].After(cutoff):
			reason = KeptRemoved
		}
		if reason != "" {
			out.Kept = append(out.Kept, KeptObject{Object: obj, Reason: reason})
			continue
		}
		// An upload may have put the archive again since the rows were read, its row not in
		// them (Put sends an old object again, so its time is now: packagestore.RefreshAfter):
		// the object's time as it is now decides, right before the delete.
		cur, err := store.Stat(ctx, obj.Sum)
		switch {
		case errors.Is(err, packagestore.ErrNotFound):
			continue // another collector deleted it
		case err == nil && cur.Modified.After(cutoff):
			out.Kept = append(out.Kept, KeptObject{Object: cur, Reason: KeptRecent})
			continue
		case err == nil:
			err = store.Delete(ctx, obj.Sum)
		}
		if err != nil {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			out.Failed = append(out.Failed, FailedObject{Object: obj, Err: err})
			continue
		}
		out.Deleted = append(out.Deleted, obj)
	}
	return out, ctx.Err()
}

// Collector collects the package store every few hours, reading the desired state afresh
// each time. Every instance of a cluster may run one.
type Collector struct {
	Desired Desired
	Store   packagestore.Store
	// Grace is passed to Collect; 0 is DefaultGrace.
	Grace time.Duration
	// Interval is the mean time between collections; 0 is DefaultCollectInterval. Each wait
	// is drawn between half and one and a half of it, so instances started together do not
	// list the bucket together.
	Interval time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Run collects after a first random wait, then again every Interval (jittered), until ctx
// ends; report gets each collection's result, or the error of one that could not read the
// desired state or list the store, in Run's goroutine. A desired state that cannot be read
// deletes nothing.
func (c Collector) Run(ctx context.Context, report func(Collected, error)) {
	if c.Interval <= 0 {
		c.Interval = DefaultCollectInterval
	}
	timer := time.NewTimer(jitter(c.Interval))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		res, err := c.Once(ctx)
		if ctx.Err() != nil {
			return
		}
		report(res, err)
		timer.Reset(jitter(c.Interval))
	}
}

// syncer is a desired state that is a replica of the primary; keystore.Store.Units is one.
type syncer interface {
	Sync() (keystore.SyncStatus, bool)
}

// Once collects once: it reads the desired state, then collects. A replica that has never
// pulled, or cannot reach its primary now, collects nothing: what it holds may lack rows, and
// an object a missing row refers to would be deleted.
func (c Collector) Once(ctx context.Context) (Collected, error) {
	if c.Desired == nil || c.Store == nil {
		return Collected{}, errors.New("collecting the package store: no desired state or no store")
	}
	if s, ok := c.Desired.(syncer); ok {
		if st, sync := s.Sync(); sync && (!st.Synced || !st.Reachable) {
			return Collected{}, fmt.Errorf("collecting the package store: the key store primary %s is not reachable, "+
				"so the desired state may be incomplete: nothing collected", st.Primary)
		}
	}
	grace, now := c.Grace, time.Now
	if grace <= 0 {
		grace = DefaultGrace
	}
	if c.Now != nil {
		now = c.Now
	}
	rows, err := c.Desired.Versions(ctx)
	if err != nil {
		return Collected{}, fmt.Errorf("reading the desired state: %w", err)
	}
	return Collect(ctx, c.Store, rows, grace, now())
}

// jitter returns a wait between half and one and a half of d.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d)
}
