package integration

import (
	"slices"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
)

// statsOf reads the stats at path (the runtime's, or a worker's) with key.
func statsOf[T any](t *testing.T, s *harness.Server, path, key string) T {
	t.Helper()
	var out T
	if resp := s.Get(s.API+path, harness.WithKey(key)); resp.Status != 200 || resp.JSON(&out) != nil {
		t.Fatalf("GET %s = %s", path, resp)
	}
	return out
}

// sum adds the requests of a series over the hour.
func sum(s api.StatsSeries) int64 {
	var n int64
	for _, r := range s.Requests {
		n += r
	}
	return n
}

// TestStats sends known traffic to a process worker and a static one and reads it back from
// the runtime's history: per worker, for the whole runtime, and the process worker's memory.
func TestStats(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	processWorker(t, s, "echo", "1.0.0", "")
	uploadOK(t, s, "workers", "site.tgz", harness.TarGz(t, pkg("name: site\nversion: 1.0.0\nentrypoint: index.html\n",
		harness.File{Name: "index.html", Body: "<p>hi</p>"})...), rootKey)
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "viewer", "namespaces": []string{"@team"}}).Secret

	// The list says which version each serves and what kind of worker it is.
	list := workers(t, s, rootKey)
	if e, st := list["echo"], list["site"]; e.Served != "1.0.0" || e.Kinds["1.0.0"] != "process" || st.Served != "1.0.0" || st.Kinds["1.0.0"] != "spa" {
		t.Errorf("the workers list: echo %+v, site %+v; want each serving 1.0.0, a process worker and a single-page app", e, st)
	}
	if got := sum(statsOf[api.WorkerStats](t, s, "/workers/_/echo/stats", rootKey).Stats); got != 0 {
		t.Fatalf("before any request the echo worker has %d requests", got)
	}
	for range 5 {
		echoOf(t, s.Get("/echo/"))
	}
	for range 3 {
		if resp := s.Get("/site/"); resp.Status != 200 {
			t.Fatalf("the static worker = %s", resp)
		}
	}
	// The memory of the worker's process is sampled once a step (10 s).
	harness.Eventually(t, "the echo worker's memory in its stats", 25*time.Second, func() bool {
		st := statsOf[api.WorkerStats](t, s, "/workers/_/echo/stats", rootKey)
		return slices.ContainsFunc(st.Stats.MemoryBytes, func(m *int64) bool { return m != nil && *m > 1<<20 })
	})
	// A crash answers 502: an error in the echo worker's series.
	if resp := s.Get("/echo/crash"); resp.Status != 502 {
		t.Fatalf("a crashing request = %s, want 502", resp)
	}

	echo := statsOf[api.WorkerStats](t, s, "/workers/_/echo/stats", rootKey)
	if echo.Worker != "echo" || echo.Step != 10 || echo.Points != 360 || sum(echo.Stats) != 6 {
		t.Errorf("the echo worker's stats: worker %q, step %d, points %d, %d requests; want 6 requests in 360 steps of 10 s",
			echo.Worker, echo.Step, echo.Points, sum(echo.Stats))
	}
	if !slices.ContainsFunc(echo.Stats.ErrorRate, func(r *float64) bool { return r != nil && *r > 0 }) {
		t.Errorf("no step of the echo worker shows its 502: %v", echo.Stats.ErrorRate)
	}
	if !slices.ContainsFunc(echo.Stats.P99Ms, func(p *float64) bool { return p != nil && *p > 0 }) {
		t.Errorf("no step of the echo worker has a latency")
	}
	site := statsOf[api.WorkerStats](t, s, "/workers/_/site/stats", rootKey)
	if sum(site.Stats) != 3 || slices.ContainsFunc(site.Stats.MemoryBytes, func(m *int64) bool { return m != nil }) {
		t.Errorf("the static worker: %d requests, memory %v; want 3 and no memory", sum(site.Stats), site.Stats.MemoryBytes)
	}
	all := statsOf[api.RuntimeStats](t, s, "/stats", rootKey)
	if sum(all.Workers) != 9 || sum(all.API) == 0 {
		t.Errorf("the runtime's stats: %d worker requests, %d API requests; want 9 and some", sum(all.Workers), sum(all.API))
	}
	if resp := s.Get(s.API+"/stats", harness.WithKey(team)); resp.Status != 403 || resp.ErrorCode() != "NAMESPACE_DENIED" {
		t.Errorf("the runtime's stats with a namespaced key = %s", resp)
	}

}
