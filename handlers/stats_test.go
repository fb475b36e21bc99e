package handlers

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/metrics"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

func TestStatsRoutes(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"apps/app/1.0.0/manifest.yaml":       "name: app\nversion: 1.0.0\n",
		"apps/@team/web/1.0.0/manifest.yaml": "name: '@team/web'\nversion: 1.0.0\n",
	})
	store := openStore(t, dir)
	set := metrics.New()
	a, v := testAPI(t, Options{RootKey: fileTestRoot, Metrics: set,
		Workers: packages.NewCatalog(packages.WorkerLayout, []string{filepath.Join(dir, "apps")}, packages.DefaultLimits),
		Keys:    func() (*keystore.Store, error) { return store, nil }})
	key := func(k keystore.NewKey) string {
		created, err := store.Create(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		return created.Secret
	}
	viewer := key(keystore.NewKey{Name: "viewer", Role: keystore.RoleViewer})
	team := key(keystore.NewKey{Name: "team", Role: keystore.RoleEditor, Namespaces: []string{"@team"}})
	keysOnly := key(keystore.NewKey{Name: "auditor", Role: keystore.RoleCustom, Permissions: []string{keystore.KeysRead}})

	set.WorkerRequest("app", "1.0.0", 200, 2*time.Millisecond)
	set.WorkerRequest("app", "1.0.0", 502, 40*time.Millisecond)
	set.WorkerRequest("@team/web", "1.0.0", 200, time.Millisecond)
	set.History().Memory(map[string]int64{"app": 8 << 20})

	for _, tt := range []struct {
		name, path, key string
		status          int
		code            string
		requests        int64 // in the worker series, over the hour
	}{
		{"runtime as root", "/api/stats", fileTestRoot, 200, "", 3},
		{"runtime as viewer", "/api/stats", viewer, 200, "", 3},
		{"runtime as a namespaced key", "/api/stats", team, 403, CodeNamespaceDenied, 0},
		{"runtime without workers:read", "/api/stats", keysOnly, 403, "PERMISSION_DENIED", 0},
		{"runtime without a key", "/api/stats", "", 401, "AUTH_REQUIRED", 0},
		{"worker as root", "/api/workers/_/app/stats", fileTestRoot, 200, "", 2},
		{"worker as viewer", "/api/workers/_/app/stats", viewer, 200, "", 2},
		{"scoped worker in the key's namespace", "/api/workers/@team/web/stats", team, 200, "", 1},
		{"worker outside the key's namespaces", "/api/workers/_/app/stats", team, 403, CodeNamespaceDenied, 0},
		{"worker without workers:read", "/api/workers/_/app/stats", keysOnly, 403, "PERMISSION_DENIED", 0},
		{"unknown worker", "/api/workers/_/nobody/stats", fileTestRoot, 404, "WORKER_NOT_FOUND", 0},
		{"malformed name", "/api/workers/_/Bad%20Name/stats", fileTestRoot, 400, "INVALID_PACKAGE_NAME", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", tt.path, nil)
			if tt.key != "" {
				req.Header.Set(APIKeyHeader, tt.key)
			}
			resp := serve(t, a, v, req)
			body := bodyOf(t, resp)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if tt.code != "" {
				if !strings.Contains(body, `"code":"`+tt.code+`"`) {
					t.Errorf("body %s, want code %s", body, tt.code)
				}
				return
			}
			var series api.StatsSeries
			var start int64
			var step, points int
			if strings.Contains(tt.path, "/workers/") {
				var ws api.WorkerStats
				if err := json.Unmarshal([]byte(body), &ws); err != nil {
					t.Fatal(err)
				}
				series, start, step, points = ws.Stats, ws.Start, ws.Step, ws.Points
			} else {
				var rs api.RuntimeStats
				if err := json.Unmarshal([]byte(body), &rs); err != nil {
					t.Fatal(err)
				}
				series, start, step, points = rs.Workers, rs.Start, rs.Step, rs.Points
				if len(rs.API.Requests) != metrics.HistoryPoints {
					t.Errorf("the API series has %d points", len(rs.API.Requests))
				}
			}
			if step != 10 || points != metrics.HistoryPoints || time.Since(time.Unix(start, 0)) < 59*time.Minute {
				t.Errorf("window start %d, step %d, points %d; want the last hour in 360 steps of 10 s", start, step, points)
			}
			checkSeries(t, series, tt.requests)
		})
	}
}

// checkSeries checks a series' shape and that it holds requests requests, with null where a
// step has none.
func checkSeries(t *testing.T, s api.StatsSeries, requests int64) {
	t.Helper()
	for name, n := range map[string]int{"requests": len(s.Requests), "requestsPerSecond": len(s.RequestsPerSecond),
		"errorRate": len(s.ErrorRate), "p50Ms": len(s.P50Ms), "p99Ms": len(s.P99Ms), "memoryBytes": len(s.MemoryBytes)} {
		if n != metrics.HistoryPoints {
			t.Errorf("%s has %d points, want %d", name, n, metrics.HistoryPoints)
		}
	}
	var total int64
	for i, n := range s.Requests {
		total += n
		if (n == 0) != (s.P50Ms[i] == nil) || (n == 0) != (s.ErrorRate[i] == nil) || (n == 0) != (s.P99Ms[i] == nil) {
			t.Errorf("step %d: %d requests, p50 %v, error rate %v: want null exactly where there is no request", i, n, s.P50Ms[i], s.ErrorRate[i])
		}
		if n > 0 && (s.RequestsPerSecond[i] <= 0 || *s.P99Ms[i] < *s.P50Ms[i]) {
			t.Errorf("step %d: %v requests per second, p50 %v, p99 %v", i, s.RequestsPerSecond[i], *s.P50Ms[i], *s.P99Ms[i])
		}
	}
	if total != requests {
		t.Errorf("%d requests over the hour, want %d", total, requests)
	}
}
