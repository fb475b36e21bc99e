package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// writePlugin writes a plugin on disk.
func writePlugin(b *testing.B, s *harness.Server, name, manifest string) {
	dir := filepath.Join(s.DataDir, "plugins", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte("name: "+name+"\n"+manifest), 0o644); err != nil {
		b.Fatal(err)
	}
}

// reloadPlugins asks the runtime to reload and checks how many plugins loaded.
func reloadPlugins(b *testing.B, s *harness.Server, want int) {
	resp, err := s.Send("POST", s.API+"/plugins/reload", harness.WithKey(rootKey))
	if err != nil {
		b.Fatal(err)
	}
	var out struct {
		Plugins []struct{ Name string }
		Failed  []struct{ Name, Error string }
	}
	if resp.Status != 200 || json.Unmarshal(resp.Body, &out) != nil || len(out.Plugins) != want {
		b.Fatalf("reload = %s", resp)
	}
}

// BenchmarkPluginReload times POST /api/plugins/reload with 50 plugins, each with routes under
// its own base and every fifth with an onRequest hook: rescanning, planning, provisioning the
// new table in a child context, swapping it in and retiring the old one.
func BenchmarkPluginReload(b *testing.B) {
	s := harness.Start(b, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, Global: accessLog})
	for i := range 50 {
		m := fmt.Sprintf("base: /p%02d\nroutes:\n  - match: [{path: [/]}]\n    handle: [{handler: static_response, body: p%02d}]\n"+
			"  - handle: [{handler: file_server}]\n", i, i)
		if i%5 == 0 {
			m += "onRequest:\n  - {handler: headers, response: {set: {X-P: [\"1\"]}}}\n"
		}
		if i > 0 {
			m += fmt.Sprintf("dependencies: [p%02d]\n", i-1) // a chain: the longest order to compute
		}
		writePlugin(b, s, fmt.Sprintf("p%02d", i), m)
	}
	reloadPlugins(b, s, 50)
	if got := s.Get("/p49/"); got.Status != 200 || string(got.Body) != "p49" {
		b.Fatalf("plugin route = %s", got)
	}
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		reloadPlugins(b, s, 50)
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/reload")
}

// BenchmarkHooks compares a static worker's throughput on a runtime with five pass-through
// onRequest hooks with one that has none, round by round.
func BenchmarkHooks(b *testing.B) {
	plain := harness.Start(b, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, Global: accessLog})
	hooked := harness.Start(b, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, Global: accessLog})
	for _, s := range []*harness.Server{plain, hooked} {
		writeWorker(b, s, "site", "name: site\nversion: 1.0.0\nentrypoint: index.html\n",
			map[string]string{"index.html": "<!doctype html><p>" + strings.Repeat("x", 2000)})
	}
	for i := range 5 {
		writePlugin(b, hooked, fmt.Sprintf("hook%d", i), fmt.Sprintf("onRequest:\n  - {handler: vars, hook%d: passed}\n", i))
	}
	reloadPlugins(b, hooked, 5)
	client, conns := newClient()
	defer client.CloseIdleConnections()
	reqs := map[string]string{"no-hooks": plain.URL + "/site/", "five-hooks": hooked.URL + "/site/"}
	for name, url := range reqs {
		req, _ := newRequest(url, nil)
		if err := load(client, req, conns, warmUp); err != nil {
			b.Fatalf("warming up %s: %v", name, err)
		}
	}
	for i := range *rounds {
		order := []string{"no-hooks", "five-hooks"}
		if i%2 == 1 { // neither side always runs second, on a machine that has warmed up
			order = []string{"five-hooks", "no-hooks"}
		}
		for _, name := range order {
			req, _ := newRequest(reqs[name], nil)
			b.Run(name, func(b *testing.B) { benchGet(b, client, req) })
		}
	}
}
