package keystore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// unitVersion is a live, enabled unit version whose archive hash is the digit d repeated.
func unitVersion(kind, name, version string, d byte) UnitVersion {
	return UnitVersion{UnitRef: UnitRef{Kind: kind, Name: name, Version: version},
		SHA256: strings.Repeat(string(d), 64), Size: 1000 + int64(d), Enabled: true}
}

// deployer is the key the tests change the desired state with.
var deployer = Principal{ID: 7, KeyPrefix: "rtk_deployer"}

// signalled reports whether s's feed announced a change of the desired state, and takes it.
func signalled(s *Store) bool { return changed(s, UnitsTopic) }

// findUnit returns the row of ref in units, failing the test when there is none.
func findUnit(t *testing.T, units []UnitVersion, ref UnitRef) UnitVersion {
	t.Helper()
	for _, u := range units {
		if u.UnitRef == ref {
			return u
		}
	}
	t.Fatalf("no row for %+v in %+v", ref, units)
	return UnitVersion{}
}

// TestUnitsLocal runs the desired state on a local store, where the store's file takes the
// writes: every write takes a new change number and is read back at once, a removal leaves a
// tombstone that a put revives, a plugin keeps one live version, and bad input is refused.
func TestUnitsLocal(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newStore(t)
	if n, err := s.Units.LatestChange(ctx); err != nil || n != 0 {
		t.Fatalf("LatestChange of an empty store = %d, %v", n, err)
	}
	app1 := unitVersion(UnitWorker, "@team/app", "1.0.0", 'a')
	c1, err := s.Units.Put(ctx, app1, deployer)
	if err != nil {
		t.Fatal(err)
	}
	if !signalled(s) {
		t.Error("a put did not signal the units feed")
	}
	c2, err := s.Units.Put(ctx, unitVersion(UnitWorker, "@team/app", "2.0.0", 'b'), Root())
	if err != nil || c2 <= c1 {
		t.Fatalf("second put = %d, %v (first %d)", c2, err, c1)
	}
	units := unitsOf(t, s)
	want := app1
	want.Scope, want.UpdatedAt, want.ChangedByID, want.ChangedByPrefix, want.Change = "@team", c.now().Unix(), 7, "rtk_deployer", c1
	if got := findUnit(t, units, app1.UnitRef); len(units) != 2 || got != want {
		t.Fatalf("after two puts: %+v, want %+v among 2", units, want)
	}

	c.add(time.Minute)
	c3, err := s.Units.SetEnabled(ctx, app1.UnitRef, false, Root())
	if err != nil {
		t.Fatal(err)
	}
	c4, err := s.Units.Remove(ctx, UnitRef{Kind: UnitWorker, Name: "@team/app"}, deployer) // every version
	if err != nil {
		t.Fatal(err)
	}
	units = unitsOf(t, s)
	for _, u := range units {
		if u.Live() || u.RemovedAt != c.now().Unix() || u.Change != c4 {
			t.Errorf("after removing every version: %+v", u)
		}
	}
	if u := findUnit(t, units, app1.UnitRef); u.Enabled || u.ChangedByPrefix != "rtk_deployer" {
		t.Errorf("the disabled, then removed version: %+v", u)
	}
	if changes, _ := s.Units.ChangesSince(ctx, c3); len(changes) != 2 || changes[0].Change != c4 {
		t.Errorf("changes since %d = %+v, want the two tombstones of %d", c3, changes, c4)
	}
	for name, err := range map[string]error{
		"disable a removed version": second(s.Units.SetEnabled(ctx, app1.UnitRef, false, deployer)),
		"remove it again":           second(s.Units.Remove(ctx, app1.UnitRef, deployer)),
		"enable an unknown worker":  second(s.Units.SetEnabled(ctx, UnitRef{Kind: UnitWorker, Name: "nope", Version: "1"}, true, deployer)),
	} {
		if !errors.Is(err, ErrUnitNotFound) {
			t.Errorf("%s = %v, want ErrUnitNotFound", name, err)
		}
	}
	if n, _ := s.Units.LatestChange(ctx); n != c4 {
		t.Errorf("LatestChange = %d, want %d (refused changes take none)", n, c4)
	}
	signalled(s) // the changes that succeeded
	if _, err := s.Units.Remove(ctx, app1.UnitRef, deployer); err == nil || signalled(s) {
		t.Errorf("a refused change signalled the units feed (%v)", err)
	}

	c5, err := s.Units.Put(ctx, app1, deployer)
	if err != nil {
		t.Fatal(err)
	}
	if u := findUnit(t, unitsOf(t, s), app1.UnitRef); !u.Live() || !u.Enabled || u.Change != c5 {
		t.Errorf("a removed version put again: %+v", u)
	}

	// A plugin is installed at one version at a time.
	p1 := unitVersion(UnitPlugin, "auth", "1.0.0", 'c')
	p2 := unitVersion(UnitPlugin, "auth", "1.1.0", 'd')
	s.Units.Put(ctx, p1, deployer)
	c6, err := s.Units.Put(ctx, p2, deployer)
	if err != nil {
		t.Fatal(err)
	}
	units = unitsOf(t, s)
	if u := findUnit(t, units, p1.UnitRef); u.Live() || u.Change != c6 {
		t.Errorf("plugin 1.0.0 after 1.1.0 was put: %+v", u)
	}
	if u := findUnit(t, units, p2.UnitRef); !u.Live() {
		t.Errorf("plugin 1.1.0: %+v", u)
	}
	if _, err := s.Units.SetEnabled(ctx, UnitRef{Kind: UnitPlugin, Name: "auth"}, false, deployer); err != nil {
		t.Fatalf("disabling a plugin by name: %v", err)
	}
	if u := findUnit(t, unitsOf(t, s), p2.UnitRef); u.Enabled {
		t.Errorf("plugin disabled by name: %+v", u)
	}

	bad := func(f func(u *UnitVersion)) UnitVersion { u := app1; f(&u); return u }
	for name, u := range map[string]UnitVersion{
		"unknown kind":    bad(func(u *UnitVersion) { u.Kind = "app" }),
		"no name":         bad(func(u *UnitVersion) { u.Name = "" }),
		"no version":      bad(func(u *UnitVersion) { u.Version = "" }),
		"control char":    bad(func(u *UnitVersion) { u.Name = "app\n" }),
		"short hash":      bad(func(u *UnitVersion) { u.SHA256 = "abc" }),
		"not hex":         bad(func(u *UnitVersion) { u.SHA256 = strings.Repeat("g", 64) }),
		"negative size":   bad(func(u *UnitVersion) { u.Size = -1 }),
		"another's scope": bad(func(u *UnitVersion) { u.Scope = "@other" }),
	} {
		var in *InputError
		if _, err := s.Units.Put(ctx, u, deployer); !errors.As(err, &in) {
			t.Errorf("%s: put = %v, want an InputError", name, err)
		}
	}
	if _, err := s.Units.Remove(ctx, UnitRef{Kind: UnitWorker}, deployer); err == nil {
		t.Error("a removal naming no unit was accepted")
	}
}

func second[T any](_ T, err error) error { return err }

// unitsOf returns the desired state s holds, failing the test when it cannot be read.
func unitsOf(t *testing.T, s *Store) []UnitVersion {
	t.Helper()
	units, err := s.Units.Versions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return units
}

// TestHeartbeatLocal checks that a local store keeps its instance's row, rewritten by each
// heartbeat, and refuses a bad id.
func TestHeartbeatLocal(t *testing.T) {
	ctx := context.Background()
	s, c, _ := newStore(t)
	in := Instance{ID: "i1", Address: "http://127.0.0.1:8080", Version: "1.2.3", AppliedChange: 4, Health: "ok"}
	if err := s.Heartbeat(ctx, in); err != nil {
		t.Fatal(err)
	}
	c.add(time.Minute)
	in.AppliedChange, in.Health = 9, "degraded: disk full"
	if err := s.Heartbeat(ctx, in); err != nil {
		t.Fatal(err)
	}
	in.LastSeen = c.now().Unix()
	if got, err := s.Instances(ctx); err != nil || !reflect.DeepEqual(got, []Instance{in}) {
		t.Fatalf("Instances = %+v, %v, want %+v", got, err, in)
	}
	if n, err := metaInt(ctx, s.db, "change_seq", -1); err != nil || n != 0 {
		t.Fatalf("after two heartbeats the change number is %d, %v, want 0", n, err)
	}
	for _, id := range []string{"", "a/b", strings.Repeat("x", 65)} {
		if err := s.Heartbeat(ctx, Instance{ID: id}); err == nil {
			t.Errorf("heartbeat with id %q accepted", id)
		}
	}
}

// TestInstanceID checks that the id is created once, owner-only, and kept; that instances
// creating it at once agree; and that a damaged file is refused, not replaced.
func TestInstanceID(t *testing.T) {
	dir := t.TempDir()
	ids := make([]string, 4)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			var err error
			if ids[i], err = InstanceID(dir); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || len(id) != 32 {
			t.Fatalf("ids %q: want one id of 32 hex digits", ids)
		}
	}
	path := filepath.Join(dir, InstanceIDFile)
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the id file: %v, %v", info, err)
	}
	if again, err := InstanceID(dir); err != nil || again != ids[0] {
		t.Fatalf("the id read again = %q, %v, want %q", again, err, ids[0])
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the state folder holds %d entries, want the id file only", len(entries))
	}
	os.WriteFile(path, []byte("edge-1\n"), 0o600)
	if id, err := InstanceID(dir); err != nil || id != "edge-1" {
		t.Fatalf("an operator's id = %q, %v", id, err)
	}
	os.WriteFile(path, []byte(""), 0o600)
	if _, err := InstanceID(dir); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("an empty id file = %v", err)
	}
}

// TestSyncDesiredState shares the desired state between two instances on one primary: a
// change made on one reaches the other with its change number at the other's next pull, a
// removal leaves a tombstone both see, and both list both heartbeats.
func TestSyncDesiredState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testkit.StartSqld(t)
	a, _ := syncStore(t, primary, time.Hour) // pulls only when told to
	b, _ := syncStore(t, primary, time.Hour)
	pull := func(s *Store) {
		t.Helper()
		if err := s.replica.pull(ctx); err != nil {
			t.Fatal(err)
		}
	}
	app := unitVersion(UnitWorker, "app", "1.0.0", 'a')
	c1, err := a.Units.Put(ctx, app, deployer)
	if err != nil {
		t.Fatal(err)
	}
	if u := findUnit(t, unitsOf(t, a), app.UnitRef); u.Change != c1 {
		t.Fatalf("on A, its own put: %+v", u)
	}
	if units := unitsOf(t, b); len(units) != 0 {
		t.Fatalf("B holds %+v before it pulled", units)
	}
	signalled(b) // of its first pull
	if !b.Units.Refresh(ctx) || !signalled(b) {
		t.Fatal("B's asked-for pull failed or did not signal the units feed")
	}
	if u := findUnit(t, unitsOf(t, b), app.UnitRef); u.Change != c1 || !u.Enabled || u.SHA256 != app.SHA256 ||
		u.ChangedByPrefix != deployer.KeyPrefix {
		t.Fatalf("on B after its pull: %+v, want A's change %d", u, c1)
	}

	c2, err := b.Units.SetEnabled(ctx, app.UnitRef, false, Root())
	if err != nil {
		t.Fatal(err)
	}
	pull(a)
	if u := findUnit(t, unitsOf(t, a), app.UnitRef); u.Enabled || u.Change != c2 || u.ChangedByPrefix != "root" {
		t.Fatalf("on A after B disabled it: %+v, want B's change %d", u, c2)
	}

	c3, err := a.Units.Remove(ctx, app.UnitRef, deployer)
	if err != nil {
		t.Fatal(err)
	}
	pull(b)
	for name, s := range map[string]*Store{"A": a, "B": b} {
		units := unitsOf(t, s)
		if len(units) != 1 || units[0].Live() || units[0].Change != c3 {
			t.Errorf("on %s after the removal: %+v, want one tombstone of change %d", name, units, c3)
		}
		if n, _ := s.Units.LatestChange(ctx); n != c3 {
			t.Errorf("on %s: LatestChange = %d, want %d", name, n, c3)
		}
	}
	if _, err := b.Units.SetEnabled(ctx, app.UnitRef, true, deployer); !errors.Is(err, ErrUnitNotFound) {
		t.Errorf("enabling the removed version = %v, want ErrUnitNotFound", err)
	}
	if st, _ := b.Sync(); !st.Reachable {
		t.Errorf("a refused change marked the primary away: %+v", st)
	}

	cursor := a.replica.cursor
	ia := Instance{ID: "a", Address: "http://a", Version: "1", AppliedChange: c3, Health: "ok"}
	ib := Instance{ID: "b", Address: "http://b", Version: "1", AppliedChange: c2, Health: "ok"}
	if err := a.Heartbeat(ctx, ia); err != nil {
		t.Fatal(err)
	}
	if err := b.Heartbeat(ctx, ib); err != nil {
		t.Fatal(err)
	}
	signalled(a)
	pull(a)
	pull(b)
	if signalled(a) {
		t.Error("a pull that brought heartbeats only signalled the units feed")
	}
	for name, s := range map[string]*Store{"A": a, "B": b} {
		got, err := s.Instances(ctx)
		if err != nil || len(got) != 2 || got[0].ID != "a" || got[1].ID != "b" || got[1].AppliedChange != c2 || got[0].LastSeen == 0 {
			t.Errorf("instances on %s = %+v, %v", name, got, err)
		}
	}
	if a.replica.cursor != cursor {
		t.Errorf("the heartbeats moved the change number from %d to %d", cursor, a.replica.cursor)
	}
}

// TestSyncDesiredStatePrimaryDown checks an outage: changes to the desired state and
// heartbeats answer ErrPrimaryUnavailable, what the replica holds is still read, and once
// the primary is back changes go through.
func TestSyncDesiredStatePrimaryDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testkit.StartSqld(t)
	s, _ := syncStore(t, primary, time.Hour)
	app := unitVersion(UnitWorker, "app", "1.0.0", 'a')
	c1, err := s.Units.Put(ctx, app, deployer)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Heartbeat(ctx, Instance{ID: "a"}); err != nil {
		t.Fatal(err)
	}

	primary.Stop()
	for name, err := range map[string]error{
		"put":       second(s.Units.Put(ctx, unitVersion(UnitWorker, "app", "2.0.0", 'b'), deployer)),
		"disable":   second(s.Units.SetEnabled(ctx, app.UnitRef, false, deployer)),
		"remove":    second(s.Units.Remove(ctx, app.UnitRef, deployer)),
		"heartbeat": s.Heartbeat(ctx, Instance{ID: "a"}),
	} {
		if !errors.Is(err, ErrPrimaryUnavailable) {
			t.Errorf("%s while the primary is down = %v, want ErrPrimaryUnavailable", name, err)
		}
	}
	if units, err := s.Units.Versions(ctx); err != nil || len(units) != 1 || units[0].Change != c1 || !units[0].Enabled {
		t.Errorf("the desired state while the primary is down = %+v, %v", units, err)
	}
	if n, err := s.Units.LatestChange(ctx); err != nil || n != c1 {
		t.Errorf("LatestChange while the primary is down = %d, %v", n, err)
	}
	if got, err := s.Instances(ctx); err != nil || len(got) != 1 {
		t.Errorf("instances while the primary is down = %+v, %v", got, err)
	}

	primary.Restart(t)
	c2, err := s.Units.SetEnabled(ctx, app.UnitRef, false, deployer)
	if err != nil || c2 <= c1 {
		t.Fatalf("disable after the outage = %d, %v", c2, err)
	}
	if u := findUnit(t, unitsOf(t, s), app.UnitRef); u.Enabled || u.Change != c2 {
		t.Fatalf("after the outage: %+v", u)
	}
}

// TestSyncRefusesNewerUnitsSchema starts an instance against a primary whose desired-state
// tables a newer runtime has migrated: it refuses to start, naming both versions.
func TestSyncRefusesNewerUnitsSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testkit.StartSqld(t)
	s, _ := syncStore(t, primary, time.Hour) // gives the primary its tables
	s.Close()
	db, err := openPrimary(SyncOptions{URL: primary.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `UPDATE store_meta SET value = ? WHERE name = 'units_schema'`, strconv.Itoa(UnitsSchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	_, err = OpenSync(ctx, filepath.Join(t.TempDir(), "api-keys.db"), SyncOptions{URL: primary.URL})
	want := fmt.Sprintf("the key store primary %s: desired-state schema (units_schema) version %d is newer than this runtime understands (%d)",
		primary.URL, UnitsSchemaVersion+1, UnitsSchemaVersion)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("OpenSync = %v, want %q", err, want)
	}
}

// TestSyncReloadRequest checks that a reload asked of one instance reaches another with its
// change number, signals the units feed there, and counts as a change of the desired state.
func TestSyncReloadRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testkit.StartSqld(t)
	a, _ := syncStore(t, primary, time.Hour)
	b, _ := syncStore(t, primary, time.Hour)
	if n, err := b.Units.ReloadRequested(ctx, UnitPlugin); err != nil || n != 0 {
		t.Fatalf("before any request: %d, %v", n, err)
	}
	c1, err := a.Units.RequestReload(ctx, UnitPlugin, deployer)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := a.Units.ReloadRequested(ctx, UnitPlugin); n != c1 {
		t.Fatalf("on A, its own request: %d, want %d", n, c1)
	}
	signalled(b)
	if !b.Units.Refresh(ctx) || !signalled(b) {
		t.Fatal("B's pull failed or did not signal the units feed")
	}
	c2, err := a.Units.RequestReload(ctx, UnitPlugin, Root())
	if err != nil || c2 <= c1 {
		t.Fatalf("second request: %d, %v (first %d)", c2, err, c1)
	}
	if err := b.replica.pull(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := b.Units.ReloadRequested(ctx, UnitPlugin); n != c2 {
		t.Errorf("on B: %d, want the latest request %d", n, c2)
	}
	if n, _ := b.Units.ReloadRequested(ctx, UnitWorker); n != 0 {
		t.Errorf("worker reloads on B: %d, want none", n)
	}
	if n, _ := b.Units.LatestChange(ctx); n != c2 {
		t.Errorf("LatestChange on B = %d, want the reload's %d", n, c2)
	}
	if _, err := a.Units.RequestReload(ctx, "theme", deployer); err == nil {
		t.Error("a reload of an unknown kind was accepted")
	}
}
