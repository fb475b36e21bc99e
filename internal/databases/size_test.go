package databases

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/internal/hrana"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestSizeNow: a namespace's size on a real sqld is what it holds as soon as rows are
// written. sqld's own count (the admin API's storage_bytes_used) is refreshed a second after
// the namespace opens and then once a minute: a worker trusted by it could write far past
// limits.database for a minute. A namespace not made yet holds nothing.
func TestSizeNow(t *testing.T) {
	admin := testkit.FreePort(t)
	sqld := testkit.StartSqld(t, "--enable-namespaces", "--admin-listen-addr", fmt.Sprintf("127.0.0.1:%d", admin))
	r, err := NewRemote(fmt.Sprintf("http://localhost:%d", sqld.Port), "", fmt.Sprintf("http://127.0.0.1:%d", admin), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tests := []struct {
		name string
		rows int // of 256 KiB each; -1: the namespace is not made
		min  int64
		max  int64
	}{
		{"not made", -1, 0, 0},
		{"empty", 0, 0, 64 << 10},
		{"two MiB written", 8, 2 << 20, 3 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := Namespace("size-" + strings.ReplaceAll(tt.name, " ", "-"))
			if tt.rows >= 0 {
				if err := r.Ensure(ctx, ns); err != nil {
					t.Fatal(err)
				}
				write(t, r, ns, tt.rows)
			}
			got, err := r.Size(ctx, ns)
			if err != nil || got < tt.min || got > tt.max {
				t.Errorf("Size = %d, %v; want between %d and %d", got, err, tt.min, tt.max)
			}
		})
	}
}

// write adds n rows of 256 KiB to namespace ns, in one pipeline.
func write(t *testing.T, r *Remote, ns string, n int) {
	t.Helper()
	text, _ := json.Marshal(strings.Repeat("x", 256<<10))
	reqs := []string{`{"type":"execute","stmt":{"sql":"create table if not exists t (v)"}}`}
	for range n {
		reqs = append(reqs, `{"type":"execute","stmt":{"sql":"insert into t values (?)","args":[{"type":"text","value":`+string(text)+`}]}}`)
	}
	reqs = append(reqs, `{"type":"close"}`)
	_, out, err := r.pipeline(context.Background(), ns, []byte(`{"requests":[`+strings.Join(reqs, ",")+`]}`))
	var resp hrana.PipelineResponse
	if err != nil || json.Unmarshal(out, &resp) != nil || len(resp.Results) != n+2 {
		t.Fatalf("writing: %v %.300s", err, out)
	}
	for _, res := range resp.Results {
		if res.Type != "ok" {
			t.Fatalf("writing: %.300s", out)
		}
	}
}
