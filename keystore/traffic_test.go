package keystore

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

func trafficSignalled(s *Store) bool { return changed(s, TrafficTopic) }

func TestCheckShares(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shares []Share
		ok     bool
	}{
		{"two", []Share{{"1.2.0", 90}, {"1.3.0", 10}}, true},
		{"one at 100", []Share{{"1.3.0", 100}}, true},
		{"empty", nil, false},
		{"sum under", []Share{{"1.2.0", 80}, {"1.3.0", 10}}, false},
		{"sum over", []Share{{"1.2.0", 95}, {"1.3.0", 10}}, false},
		{"zero share", []Share{{"1.2.0", 100}, {"1.3.0", 0}}, false},
		{"negative", []Share{{"1.2.0", 110}, {"1.3.0", -10}}, false},
		{"twice", []Share{{"1.2.0", 50}, {"1.2.0", 50}}, false},
		{"no version", []Share{{"", 100}}, false},
		{"control character", []Share{{"1.2.0\n", 100}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckShares(tc.shares)
			var in *InputError
			if tc.ok != (err == nil) || err != nil && (!errors.As(err, &in) || in.Code != "INVALID_SPLIT") {
				t.Errorf("CheckShares(%v) = %v", tc.shares, err)
			}
		})
	}
}

// TestTrafficLocal sets, reads, replaces and ends a split in a local store, which keeps it
// across a reopen.
func TestTrafficLocal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "api-keys.db")
	s, _ := openStore(t, path)
	if got, err := s.Traffic.Get(ctx, "@team/app"); err != nil || len(got.Shares) != 0 || got.Scope != "@team" {
		t.Fatalf("before any split: %+v, %v", got, err)
	}
	shares := []Share{{"1.2.0", 90}, {"1.3.0", 10}}
	change, err := s.Traffic.Set(ctx, "@team/app", shares, deployer)
	if err != nil || change == 0 {
		t.Fatalf("Traffic.Set = %d, %v", change, err)
	}
	if !trafficSignalled(s) {
		t.Error("a split set here did not signal the traffic feed")
	}
	if _, err := s.Traffic.Set(ctx, "other", []Share{{"1.0.0", 50}}, deployer); err == nil {
		t.Error("a split summing to 50 was stored")
	}
	got, err := s.Traffic.Get(ctx, "@team/app")
	if err != nil || !reflect.DeepEqual(got.Shares, shares) || got.ChangedByPrefix != deployer.KeyPrefix || got.Change != change {
		t.Fatalf("Traffic = %+v, %v", got, err)
	}
	s.Close()
	s, _ = openStore(t, path)
	all, err := s.Traffic.List(ctx)
	if err != nil || len(all) != 1 || !reflect.DeepEqual(all[0].Shares, shares) {
		t.Fatalf("after a reopen, Traffic.List = %+v, %v", all, err)
	}
	if _, err := s.Traffic.Set(ctx, "@team/app", nil, Root()); err != nil {
		t.Fatal(err)
	}
	if all, err := s.Traffic.List(ctx); err != nil || len(all) != 0 {
		t.Fatalf("after the end, Traffic.List = %+v, %v", all, err)
	}
	if got, err := s.Traffic.Get(ctx, "@team/app"); err != nil || len(got.Shares) != 0 {
		t.Fatalf("after the end, Traffic = %+v, %v", got, err)
	}
}

// TestSyncTraffic checks that a split set on one instance, and its end, reach another by a
// pull that signals the traffic feed there.
func TestSyncTraffic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testkit.StartSqld(t)
	a, _ := syncStore(t, primary, time.Hour)
	b, _ := syncStore(t, primary, time.Hour)
	trafficSignalled(b)
	shares := []Share{{"1.2.0", 70}, {"1.3.0", 30}}
	if _, err := a.Traffic.Set(ctx, "app", shares, deployer); err != nil {
		t.Fatal(err)
	}
	if err := b.replica.pull(ctx); err != nil {
		t.Fatal(err)
	}
	if !trafficSignalled(b) {
		t.Error("the pull that brought the split did not signal the traffic feed")
	}
	if all, err := b.Traffic.List(ctx); err != nil || len(all) != 1 || !reflect.DeepEqual(all[0].Shares, shares) {
		t.Fatalf("on B: %+v, %v", all, err)
	}
	if _, err := a.Traffic.Set(ctx, "app", nil, deployer); err != nil {
		t.Fatal(err)
	}
	if err := b.replica.pull(ctx); err != nil {
		t.Fatal(err)
	}
	if !trafficSignalled(b) {
		t.Error("the pull that brought the end did not signal the traffic feed")
	}
	if all, err := b.Traffic.List(ctx); err != nil || len(all) != 0 {
		t.Fatalf("on B after the end: %+v, %v", all, err)
	}
}
