package keystore

import (
	"context"
	"encoding/json"
	"fmt"
)

// Traffic is the store's traffic_splits table: how each worker's unpinned requests split
// between its versions.
type Traffic struct{ s *Store }

// Share is one version's part of a traffic split: Percent of a worker's unpinned requests.
type Share struct {
	Version string `json:"version"`
	Percent int    `json:"percent"`
}

// TrafficSplit is the split of a worker's unpinned requests between its versions, as stored:
// empty Shares means no split (the newest enabled version serves them). Times are Unix
// seconds.
type TrafficSplit struct {
	Name            string // "app" or "@team/app"
	Scope           string // the namespace of Name, "" when unscoped
	Shares          []Share
	UpdatedAt       int64
	ChangedByID     int64 // the key that made the last change (0: the root key)
	ChangedByPrefix string
	Change          int64 // the change number of the last change
}

// trafficColumns are the columns of traffic_splits, change_seq last (as syncedTables wants).
const trafficColumns = "name, scope, split, updated_at, changed_by_id, changed_by_prefix, change_seq"

// MaxShares bounds the versions of one split.
const MaxShares = 10

// CheckShares validates a split: at most MaxShares versions, each named once, each with a
// whole percentage from 1 to 100, summing to 100. Whether the versions exist and are enabled
// is for the caller to check against what is installed.
func CheckShares(shares []Share) error {
	if len(shares) == 0 {
		return inputErr("INVALID_SPLIT", "the split is empty; name the versions and their percentages, or end the split with DELETE")
	}
	if len(shares) > MaxShares {
		return inputErr("INVALID_SPLIT", "the split names %d versions; at most %d", len(shares), MaxShares)
	}
	sum, seen := 0, map[string]bool{}
	for _, sh := range shares {
		if sh.Version == "" {
			return inputErr("INVALID_SPLIT", "a share of the split names no version")
		}
		if err := checkText("split version", "INVALID_SPLIT", sh.Version, maxUnitVersion); err != nil {
			return err
		}
		if seen[sh.Version] {
			return inputErr("INVALID_SPLIT", "the split names version %s twice", sh.Version)
		}
		seen[sh.Version] = true
		if sh.Percent < 1 || sh.Percent > 100 {
			return inputErr("INVALID_SPLIT", "version %s has %d percent; each share is a whole number from 1 to 100", sh.Version, sh.Percent)
		}
		sum += sh.Percent
	}
	if sum != 100 {
		return inputErr("INVALID_SPLIT", "the percentages sum to %d; they must sum to 100", sum)
	}
	return nil
}

// Set puts the split shares (CheckShares) in force for the worker name, changed by by,
// and returns the change number of the write; nil or empty shares end the split.
func (f Traffic) Set(ctx context.Context, name string, shares []Share, by Principal) (int64, error) {
	s := f.s
	defer s.timed("set_traffic")()
	if err := checkRef(UnitRef{Kind: UnitWorker, Name: name}, true); err != nil {
		return 0, err
	}
	if len(shares) > 0 {
		if err := CheckShares(shares); err != nil {
			return 0, err
		}
	} else {
		shares = []Share{}
	}
	raw, err := json.Marshal(shares)
	if err != nil {
		return 0, err
	}
	var change int64
	err = s.write(ctx, func(tx writeTx) error {
		change = tx.seq
		_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO traffic_splits (`+trafficColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			name, NamespaceOf(name), string(raw), s.now().Unix(), by.ID, by.KeyPrefix, tx.seq)
		if err != nil {
			return fmt.Errorf("storing the traffic split of %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	f.s.Feed.publish(TrafficTopic)
	return change, nil
}

// Get returns the split of the worker name as this instance holds it; its Shares are
// empty when none is in force.
func (f Traffic) Get(ctx context.Context, name string) (TrafficSplit, error) {
	splits, err := f.read(ctx, `SELECT `+trafficColumns+` FROM traffic_splits WHERE name = ?`, name)
	if err != nil || len(splits) == 0 {
		return TrafficSplit{Name: name, Scope: NamespaceOf(name), Shares: []Share{}}, err
	}
	return splits[0], nil
}

// List returns every split in force as this instance holds it (in sync mode, its
// replica as of the last pull), by worker name; ended splits are left out.
func (f Traffic) List(ctx context.Context) ([]TrafficSplit, error) {
	return f.read(ctx, `SELECT `+trafficColumns+` FROM traffic_splits WHERE split <> '[]' ORDER BY name`)
}

func (f Traffic) read(ctx context.Context, query string, args ...any) ([]TrafficSplit, error) {
	s := f.s
	defer s.timed("list_traffic")()
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the traffic splits: %w", err)
	}
	defer rows.Close()
	out := []TrafficSplit{}
	for rows.Next() {
		var t TrafficSplit
		var raw string
		if err := rows.Scan(&t.Name, &t.Scope, &raw, &t.UpdatedAt, &t.ChangedByID, &t.ChangedByPrefix, &t.Change); err != nil {
			return nil, fmt.Errorf("reading the traffic splits: %w", err)
		}
		if err := json.Unmarshal([]byte(raw), &t.Shares); err != nil {
			return nil, fmt.Errorf("the traffic split of %s is damaged: %w", t.Name, err)
		}
		if t.Shares == nil {
			t.Shares = []Share{}
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
