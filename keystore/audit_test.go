package keystore

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestAuditTrail(t *testing.T) {
	s, clk, _ := newStore(t)
	ctx := context.Background()
	ops := []AuditEntry{
		{Action: "session.login", Outcome: "denied", RemoteAddr: "10.0.0.1"},
		{Action: "key.create", Target: "ci (#2)", Outcome: "success", Actor: &AuditActor{ID: 0, Name: "root", KeyPrefix: "root"},
			Details: map[string]any{"key": map[string]any{"id": 2.0, "role": "editor"}}},
		{Action: "worker.upload", Target: "@team/app@1.0.0", Scope: "@team", Outcome: "success", Actor: &AuditActor{ID: 2, Name: "ci", KeyPrefix: "rk_ab12"}},
		{Action: "worker.disable", Target: "@team/app@1.0.0", Scope: "@team", Outcome: "success", Actor: &AuditActor{ID: 2, Name: "ci", KeyPrefix: "rk_ab12"}},
		{Action: "worker.upload", Target: "other@2.0.0", Outcome: "failed", Actor: &AuditActor{ID: 2, Name: "ci", KeyPrefix: "rk_ab12"}},
	}
	for _, e := range ops {
		clk.add(time.Minute)
		if err := s.Audit.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Unix(1_800_000_000, 0)
	actions := func(q AuditQuery) []string {
		t.Helper()
		if q.Limit == 0 {
			q.Limit = 100
		}
		got, _, err := s.Audit.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range got {
			out = append(out, e.Action+" "+e.Target)
		}
		return out
	}
	for _, tt := range []struct {
		name string
		q    AuditQuery
		want []string
	}{
		{"all, newest first", AuditQuery{}, []string{"worker.upload other@2.0.0", "worker.disable @team/app@1.0.0", "worker.upload @team/app@1.0.0", "key.create ci (#2)", "session.login "}},
		{"one action", AuditQuery{Action: "worker.upload"}, []string{"worker.upload other@2.0.0", "worker.upload @team/app@1.0.0"}},
		{"a family", AuditQuery{Action: "worker."}, []string{"worker.upload other@2.0.0", "worker.disable @team/app@1.0.0", "worker.upload @team/app@1.0.0"}},
		{"by actor name", AuditQuery{Actor: "root"}, []string{"key.create ci (#2)"}},
		{"by key prefix", AuditQuery{Actor: "rk_ab12", Target: "@team/app"}, []string{"worker.disable @team/app@1.0.0", "worker.upload @team/app@1.0.0"}},
		{"time range", AuditQuery{Since: start.Add(2 * time.Minute), Until: start.Add(4 * time.Minute)}, []string{"worker.upload @team/app@1.0.0", "key.create ci (#2)"}},
		{"a restricted key's scopes", AuditQuery{Scopes: []string{"@team"}}, []string{"worker.disable @team/app@1.0.0", "worker.upload @team/app@1.0.0"}},
		{"no scopes", AuditQuery{Scopes: []string{}}, nil},
	} {
		if got := actions(tt.q); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}

	// Paging: two at a time, following the cursor, ends with every entry once.
	var paged []int64
	q := AuditQuery{Limit: 2}
	for {
		page, more, err := s.Audit.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			paged = append(paged, e.ID)
		}
		if !more {
			break
		}
		q.Before = page[len(page)-1].ID
	}
	if !slices.Equal(paged, []int64{5, 4, 3, 2, 1}) {
		t.Fatalf("pages gave %v", paged)
	}

	all, _, _ := s.Audit.List(ctx, AuditQuery{Limit: 10})
	if e := all[3]; e.Actor == nil || e.Actor.Name != "root" || e.Details["key"].(map[string]any)["role"] != "editor" || !e.Time.Equal(start.Add(2*time.Minute)) {
		t.Errorf("key.create entry = %+v", e)
	}
	if all[4].Actor != nil || all[4].RemoteAddr != "10.0.0.1" {
		t.Errorf("refused login = %+v", all[4])
	}

	n, err := s.Audit.Prune(ctx, start.Add(3*time.Minute))
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
	if got := actions(AuditQuery{}); len(got) != 3 {
		t.Fatalf("after pruning: %q", got)
	}
}
