package integration

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// scrape reads Caddy's admin /metrics into a map from series (name{labels}, as printed) to value.
func scrape(t *testing.T, s *harness.Server) map[string]float64 {
	t.Helper()
	resp, err := http.Get(s.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics = %d %s", resp.StatusCode, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestMetrics drives known traffic through the runtime and reads the counts back from Caddy's
// admin /metrics, across a config reload, with two site blocks sharing one state (so one
// config registers the series twice).
func TestMetrics(t *testing.T) {
	t.Parallel()
	port := harness.FreePort(t)
	cfg := splitConfig(port)
	s := harness.Start(t, cfg)
	apps := s.Host("apps.localhost")
	viewer := s.CreateKey(rootKey, map[string]any{"name": "viewer", "role": "viewer"}).Secret
	processWorker(t, s, "@team/echo", "1.0.0", "")

	for range 3 {
		s.Get(s.API + "/health")
	}
	s.Get(s.API + "/workers")                                                                          // no credential
	s.Get(s.API+"/workers", harness.WithKey("rk_not-a-key"))                                           // an unknown key
	s.Do("POST", s.API+"/workers/@team/echo/restart", harness.WithKey(viewer), harness.WithOrigin("")) // lacks the permission
	s.Get(s.API + "/no-such-route")                                                                    // unmatched
	uploadOK(t, s, "workers", "site.tgz", harness.TarGz(t, pkg("name: site\nversion: 1.0.0\n", harness.File{Name: "index.html", Body: "<p>hi</p>"})...), rootKey)
	for range 2 {
		resp := apps.Get("/@team/echo/")
		echoOf(t, resp)
		if v := resp.Header.Get("X-Worker-Version"); v != "1.0.0" {
			t.Errorf("a process worker's answer names version %q, want 1.0.0", v)
		}
	}
	if resp := apps.Get("/site/"); resp.Status != 200 || resp.Header.Get("X-Worker-Version") != "1.0.0" {
		t.Fatalf("GET /site/ = %s (X-Worker-Version %q)", resp, resp.Header.Get("X-Worker-Version"))
	}
	apps.Get("/@team/echo/crash") // the process exits: a crash
	harness.Eventually(t, "the crashed worker to serve again", 10*time.Second, func() bool {
		return apps.Get("/@team/echo/").Status == 200
	})
	if resp := s.Do("POST", s.API+"/workers/@team/echo/restart", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("restart = %s", resp)
	}
	if resp := s.Do("POST", s.API+"/plugins/reload", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("plugin reload = %s", resp)
	}

	check := func(m map[string]float64, want map[string]float64) {
		t.Helper()
		for series, v := range want {
			if got, ok := m[series]; !ok || got != v {
				t.Errorf("%s = %v (present %v), want %v", series, got, ok, v)
			}
		}
	}
	atLeast := func(m map[string]float64, want map[string]float64) {
		t.Helper()
		for series, v := range want {
			if got := m[series]; got < v {
				t.Errorf("%s = %v, want at least %v", series, got, v)
			}
		}
	}
	exact := map[string]float64{
		`runtime_api_requests_total{code="200",route="GET /health"}`:                          3,
		`runtime_api_requests_total{code="401",route="GET /workers"}`:                         2,
		`runtime_api_requests_total{code="403",route="POST /workers/{scope}/{name}/restart"}`: 1,
		`runtime_api_requests_total{code="200",route="POST /workers/{scope}/{name}/restart"}`: 1,
		`runtime_api_requests_total{code="200",route="POST /workers/upload"}`:                 1,
		`runtime_api_requests_total{code="404",route="unmatched"}`:                            1,
		`runtime_auth_failures_total{reason="missing_credential"}`:                            1,
		`runtime_auth_failures_total{reason="invalid_key"}`:                                   1,
		`runtime_auth_failures_total{reason="permission"}`:                                    1,
		`runtime_worker_requests_total{code="200",version="1.0.0",worker="site"}`:             1,
		`runtime_worker_process_crashes_total{worker="@team/echo"}`:                           1,
		`runtime_worker_process_restarts_total{worker="@team/echo"}`:                          1,
		`runtime_install_duration_seconds_count{kind="worker",outcome="installed"}`:           1,
	}
	m := scrape(t, s)
	check(m, exact)
	atLeast(m, map[string]float64{
		`runtime_worker_requests_total{code="200",version="1.0.0",worker="@team/echo"}`:      3,
		`runtime_worker_request_duration_seconds_count{version="1.0.0",worker="@team/echo"}`: 4,
		`runtime_worker_process_starts_total{worker="@team/echo"}`:                           2,
		`runtime_install_bytes_total{kind="worker"}`:                                         float64(len("<p>hi</p>")),
		`runtime_plugin_reload_duration_seconds_count`:                                       1,
		`runtime_keystore_query_duration_seconds_count{op="verify"}`:                         1,
	})
	harness.Eventually(t, "the restarted process to be the only one running", 10*time.Second, func() bool {
		m := scrape(t, s)
		return m[`runtime_worker_processes{state="running"}`] == 1 && m[`runtime_worker_processes{state="draining"}`] == 0 &&
			m[`runtime_worker_processes{state="starting"}`] == 0
	})

	// A reload keeps the counts (the same series, in the new config's registry) and logs no error.
	if err := s.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	s.Get(s.API + "/health")
	exact[`runtime_api_requests_total{code="200",route="GET /health"}`] = 4
	check(scrape(t, s), exact)
	for _, line := range strings.Split(s.Logs(), "\n") {
		if strings.Contains(line, `"level":"error"`) && strings.Contains(line, "metric") {
			t.Errorf("error logged about metrics: %s", line)
		}
	}
}
