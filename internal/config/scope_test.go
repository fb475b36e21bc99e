package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestDiffering(t *testing.T) {
	a := AppValues{StateDir: "/s", PoolSize: 4, WorkerDirs: []string{"/w"}}
	tests := []struct {
		name   string
		b      AppValues
		strict bool
		want   []string
	}{
		{"equal", a, true, nil},
		{"one differs", AppValues{StateDir: "/s", PoolSize: 5, WorkerDirs: []string{"/w"}}, false, []string{"pool_size"}},
		{"a list differs", AppValues{StateDir: "/s", PoolSize: 4, WorkerDirs: []string{"/w", "/x"}}, false, []string{"worker_dirs"}},
		{"unset is no difference", AppValues{PoolSize: 4}, false, nil},
		{"unset is one when strict", AppValues{PoolSize: 4, SessionTTL: "1h"}, true, []string{"worker_dirs", "state_dir", "session_ttl"}},
		{"in the order of Definitions", AppValues{StateDir: "/t", PoolSize: 5, WorkerDirs: []string{"/v"}}, false, []string{"worker_dirs", "state_dir", "pool_size"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Differing(a, tt.b, tt.strict); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Differing = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOverAndNames(t *testing.T) {
	base := AppValues{StateDir: "/s", PoolSize: 4, RootKey: "{env.K}"}
	own := AppValues{PoolSize: 8, WorkerDirs: []string{"/w"}}
	want := AppValues{StateDir: "/s", PoolSize: 8, RootKey: "{env.K}", WorkerDirs: []string{"/w"}}
	if got := own.Over(base); !reflect.DeepEqual(got, want) {
		t.Fatalf("Over = %+v, want %+v", got, want)
	}
	if got := own.Names(); !reflect.DeepEqual(got, []string{"worker_dirs", "pool_size"}) {
		t.Fatalf("Names = %v", got)
	}
	if got := (AppValues{}).Names(); got != nil {
		t.Fatalf("Names of nothing = %v", got)
	}
}

// TestScopes keeps the scopes true to the structs: a per-site setting is a field of
// SiteValues, a process-wide one of AppValues, under its name.
func TestScopes(t *testing.T) {
	fields := func(v any) map[string]bool {
		out := map[string]bool{}
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			out[name] = true
		}
		return out
	}
	// The package store is the app's module, whose s3 fields are S3Values.
	site, app, store := fields(SiteValues{}), fields(AppValues{}), fields(S3Values{})
	store["package_store"] = true
	for _, d := range Definitions {
		if d.Scope == Site && !site[d.Name] || d.Scope == Process && !app[d.Name] || d.Scope == Store && !store[d.Name] {
			t.Errorf("%s: scope %d, but no such field in the struct of that scope", d.Name, d.Scope)
		}
	}
	if len(site)+len(app)+len(store) != len(Definitions) {
		t.Errorf("%d fields, %d definitions", len(site)+len(app)+len(store), len(Definitions))
	}
}
