package keystore

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

// TestAddUnitVersion: a new unit version is stored as a put would store it; a row of the
// same version (live or removed, of the same archive or another) and a plugin's other live
// version are refused with that row, and nothing is written.
func TestAddUnitVersion(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newStore(t)
	app := unitVersion(UnitWorker, "@team/app", "1.0.0", 'a')
	change, err := s.Units.Add(ctx, app, deployer)
	if err != nil {
		t.Fatal(err)
	}
	if !signalled(s) {
		t.Error("an add did not signal the units feed")
	}
	stored := findUnit(t, unitsOf(t, s), app.UnitRef)
	if stored.Change != change || stored.Scope != "@team" || stored.SHA256 != app.SHA256 || !stored.Live() || stored.ChangedByPrefix != deployer.KeyPrefix {
		t.Fatalf("stored %+v (change %d)", stored, change)
	}
	if _, err := s.Units.Put(ctx, unitVersion(UnitPlugin, "hello", "2.0.0", 'c'), Root()); err != nil {
		t.Fatal(err)
	}
	gone := unitVersion(UnitWorker, "gone", "1.0.0", 'd')
	if _, err := s.Units.Put(ctx, gone, Root()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Units.Remove(ctx, gone.UnitRef, Root()); err != nil {
		t.Fatal(err)
	}
	before := unitsOf(t, s)
	latest, _ := s.Units.LatestChange(ctx)

	for _, tc := range []struct {
		name     string
		add      UnitVersion
		existing UnitRef
	}{
		{"same archive", app, app.UnitRef},
		{"another archive", unitVersion(UnitWorker, "@team/app", "1.0.0", 'b'), app.UnitRef},
		{"removed", gone, gone.UnitRef},
		{"plugin's other version", unitVersion(UnitPlugin, "hello", "1.0.0", 'e'), UnitRef{Kind: UnitPlugin, Name: "hello", Version: "2.0.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Units.Add(ctx, tc.add, Root())
			var exists *UnitExistsError
			if !errors.As(err, &exists) || exists.Existing != findUnit(t, before, tc.existing) {
				t.Fatalf("add = %v, want the row of %+v", err, tc.existing)
			}
		})
	}
	if after, _ := s.Units.LatestChange(ctx); after != latest || !reflect.DeepEqual(unitsOf(t, s), before) {
		t.Fatal("a refused add changed the desired state")
	}
	// Another worker version, and a plugin once its live version is removed, are added.
	if _, err := s.Units.Add(ctx, unitVersion(UnitWorker, "@team/app", "2.0.0", 'f'), Root()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Units.Remove(ctx, UnitRef{Kind: UnitPlugin, Name: "hello"}, Root()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Units.Add(ctx, unitVersion(UnitPlugin, "hello", "1.0.0", 'e'), Root()); err != nil {
		t.Fatal(err)
	}
}
