package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRegisterTwiceAndAcrossRegistries(t *testing.T) {
	s := New()
	s.APIRequest("GET /health", 200)
	for range 2 { // a reload: a new registry each time, and two handlers of one config each
		reg := prometheus.NewRegistry()
		for range 2 {
			if err := s.Register(reg); err != nil {
				t.Fatal(err)
			}
		}
		got, err := testutil.GatherAndCount(reg, "runtime_api_requests_total")
		if err != nil || got != 1 {
			t.Fatalf("series = %d, %v", got, err)
		}
	}
	if err := (*Set)(nil).Register(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
}

func TestCounts(t *testing.T) {
	s := New()
	s.APIRequest("GET /health", 0)
	s.APIRequest("GET /health", 200)
	s.APIRequest("unmatched", 404)
	s.AuthFailure("missing_credential")
	s.WorkerRequest("@team/app", "1.2.0", 200, 3*time.Millisecond)
	s.WorkerRequest("@team/app", "1.3.0", 503, time.Millisecond)
	s.ProcessStarted("@team/app")
	s.ProcessCrashed("@team/app")
	s.ProcessRestarted("@team/app")
	s.CrashLooping("@team/app")
	s.Install("worker", "installed", time.Millisecond, 1000)
	s.Install("worker", "refused", time.Millisecond, 1000)
	s.PluginReload(time.Millisecond, 2)
	s.KeyStoreQuery("verify", time.Millisecond)
	s.ReconcileFailure("worker", "corrupt")
	s.ReconcileFailure("worker", "corrupt")
	s.ReconcileFailure("plugin", "missing")
	remove := s.AddPool(func() map[string]int { return map[string]int{"running": 2, "draining": 1, "crash-looping": 1} })
	s.AddPool(func() map[string]int { return map[string]int{"running": 1} })

	want := `
# HELP runtime_api_requests_total Management API requests by route pattern and status code.
# TYPE runtime_api_requests_total counter
runtime_api_requests_total{code="200",route="GET /health"} 2
runtime_api_requests_total{code="404",route="unmatched"} 1
# HELP runtime_auth_failures_total Management API requests refused by authentication or authorization, by reason.
# TYPE runtime_auth_failures_total counter
runtime_auth_failures_total{reason="missing_credential"} 1
# HELP runtime_worker_requests_total Requests served by workers, by worker name, version and status code.
# TYPE runtime_worker_requests_total counter
runtime_worker_requests_total{code="200",version="1.2.0",worker="@team/app"} 1
runtime_worker_requests_total{code="503",version="1.3.0",worker="@team/app"} 1
# HELP runtime_worker_process_starts_total Worker processes started and ready, by worker name.
# TYPE runtime_worker_process_starts_total counter
runtime_worker_process_starts_total{worker="@team/app"} 1
# HELP runtime_worker_process_crashes_total Worker processes that exited unasked or failed to start, by worker name.
# TYPE runtime_worker_process_crashes_total counter
runtime_worker_process_crashes_total{worker="@team/app"} 1
# HELP runtime_worker_process_restarts_total Worker processes restarted on request (POST .../restart), by worker name.
# TYPE runtime_worker_process_restarts_total counter
runtime_worker_process_restarts_total{worker="@team/app"} 1
# HELP runtime_worker_crash_loops_total Times a worker version began to crash-loop (its process crashed 3 times in a row, each soon after it started), by worker name.
# TYPE runtime_worker_crash_loops_total counter
runtime_worker_crash_loops_total{worker="@team/app"} 1
# HELP runtime_install_bytes_total Bytes of installed archives once unpacked, by kind (worker or plugin).
# TYPE runtime_install_bytes_total counter
runtime_install_bytes_total{kind="worker"} 1000
# HELP runtime_plugin_load_failures_total Plugins that failed to load in a plugin reload (one per plugin and reload).
# TYPE runtime_plugin_load_failures_total counter
runtime_plugin_load_failures_total 2
# HELP runtime_reconcile_failures_total Cluster mode: unit versions this instance failed to converge, by kind and class (missing, corrupt, unavailable, store, install); once per unit version and failure, not per retry.
# TYPE runtime_reconcile_failures_total counter
runtime_reconcile_failures_total{class="corrupt",kind="worker"} 2
runtime_reconcile_failures_total{class="missing",kind="plugin"} 1
# HELP runtime_worker_processes Worker processes alive now, by state; crash-looping: worker versions whose process crashed repeatedly and waits to start again.
# TYPE runtime_worker_processes gauge
runtime_worker_processes{state="crash-looping"} 1
runtime_worker_processes{state="draining"} 1
runtime_worker_processes{state="running"} 3
runtime_worker_processes{state="starting"} 0
`
	names := []string{"runtime_api_requests_total", "runtime_auth_failures_total", "runtime_worker_requests_total",
		"runtime_worker_process_starts_total", "runtime_worker_process_crashes_total", "runtime_worker_process_restarts_total",
		"runtime_worker_crash_loops_total", "runtime_install_bytes_total", "runtime_plugin_load_failures_total", "runtime_reconcile_failures_total", "runtime_worker_processes"}
	if err := testutil.CollectAndCompare(s, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]int{
		"runtime_worker_request_duration_seconds": 2, "runtime_install_duration_seconds": 2,
		"runtime_plugin_reload_duration_seconds": 1, "runtime_keystore_query_duration_seconds": 1,
	} {
		if got := testutil.CollectAndCount(s, name); got != n {
			t.Errorf("%s: %d series, want %d", name, got, n)
		}
	}
	remove()
	if err := testutil.CollectAndCompare(s, strings.NewReader(`
# HELP runtime_worker_processes Worker processes alive now, by state; crash-looping: worker versions whose process crashed repeatedly and waits to start again.
# TYPE runtime_worker_processes gauge
runtime_worker_processes{state="crash-looping"} 0
runtime_worker_processes{state="draining"} 0
runtime_worker_processes{state="running"} 1
runtime_worker_processes{state="starting"} 0
`), "runtime_worker_processes"); err != nil {
		t.Fatal(err)
	}
}

func TestWorkerSeriesCap(t *testing.T) {
	s := New()
	for i := range MaxWorkerSeries + 50 {
		s.WorkerRequest(fmt.Sprintf("w%03d", i), "1.0.0", 200, time.Millisecond)
	}
	s.WorkerRequest("w000", "1.0.0", 200, time.Millisecond) // a worker seen before keeps its series
	if got := testutil.CollectAndCount(s, "runtime_worker_requests_total"); got != MaxWorkerSeries+1 {
		t.Fatalf("series = %d, want %d (the cap and other)", got, MaxWorkerSeries+1)
	}
	if got := testutil.ToFloat64(s.workerRequests.WithLabelValues(OtherWorker, OtherVersion, "200")); got != 50 {
		t.Fatalf("other = %v, want 50", got)
	}
	if got := testutil.ToFloat64(s.workerRequests.WithLabelValues("w000", "1.0.0", "200")); got != 2 {
		t.Fatalf("w000 = %v, want 2", got)
	}
}

// TestVersionSeriesCap checks that the versions of one worker get series of their own up to
// MaxVersionSeries, and count as other after that, the worker keeping its name.
func TestVersionSeriesCap(t *testing.T) {
	s := New()
	for i := range MaxVersionSeries + 5 {
		s.WorkerRequest("app", fmt.Sprintf("1.0.%d", i), 200, time.Millisecond)
	}
	s.WorkerRequest("app", "1.0.0", 200, time.Millisecond)
	if got := testutil.CollectAndCount(s, "runtime_worker_requests_total"); got != MaxVersionSeries+1 {
		t.Fatalf("series = %d, want %d (the cap and other)", got, MaxVersionSeries+1)
	}
	if got := testutil.ToFloat64(s.workerRequests.WithLabelValues("app", OtherVersion, "200")); got != 5 {
		t.Fatalf("other = %v, want 5", got)
	}
	if got := testutil.ToFloat64(s.workerRequests.WithLabelValues("app", "1.0.0", "200")); got != 2 {
		t.Fatalf("1.0.0 = %v, want 2", got)
	}
}

func TestNilSet(t *testing.T) {
	var s *Set
	s.APIRequest("x", 200)
	s.AuthFailure("x")
	s.WorkerRequest("x", "1.0.0", 200, 0)
	s.ProcessStarted("x")
	s.ProcessCrashed("x")
	s.ProcessRestarted("x")
	s.CrashLooping("x")
	s.Install("worker", "installed", 0, 1)
	s.PluginReload(0, 1)
	s.KeyStoreQuery("x", 0)
	s.ReconcileFailure("worker", "corrupt")
	s.AddPool(func() map[string]int { return nil })()
}

func TestRouteCounter(t *testing.T) {
	s := New()
	c := s.Route("GET /health")
	for _, status := range []int{0, 200, 404, 200} {
		c.Count(status, time.Millisecond)
	}
	if got := testutil.ToFloat64(s.apiRequests.WithLabelValues("GET /health", "200")); got != 3 {
		t.Errorf("200s = %v, want 3", got)
	}
	if got := testutil.ToFloat64(s.apiRequests.WithLabelValues("GET /health", "404")); got != 1 {
		t.Errorf("404s = %v, want 1", got)
	}
	(*Set)(nil).Route("x").Count(200, 0) // a nil set counts nothing
}
