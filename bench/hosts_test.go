package bench

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/hosts"
	"github.com/caddy-runtime/runtime/internal/serving"
	"github.com/caddy-runtime/runtime/packages"
)

// BenchmarkHosts compares, on one runtime process with workers_domain set, a static worker's
// index file at the worker's own host (Host: site.apps.localhost) with the same file at its
// path (/site/); the two alternate round by round.
func BenchmarkHosts(b *testing.B) {
	port := harness.FreePort(b)
	s := harness.Start(b, harness.Config{Global: accessLog, Port: port, App: fmt.Sprintf("workers_domain http://apps.localhost:%d", port),
		Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	page := "<!doctype html><html><head><title>bench</title></head><body>" + strings.Repeat("<p>static content</p>", 100) + "</body></html>"
	writeWorker(b, s, "site", "name: site\nversion: 1.0.0\nentrypoint: index.html\n", map[string]string{"index.html": page})

	client, conns := newClient()
	defer client.CloseIdleConnections()
	byPath, err := newRequest(s.URL+"/site/", nil)
	if err != nil {
		b.Fatal(err)
	}
	byHost, err := newRequest(s.URL+"/", nil)
	if err != nil {
		b.Fatal(err)
	}
	byHost.Host = fmt.Sprintf("site.apps.localhost:%d", port)
	reqs := map[string]*http.Request{"by-host": byHost, "by-path": byPath}
	if a, c := fetch(b, client, byHost), fetch(b, client, byPath); a != c {
		b.Fatalf("the host answers %q, the path %q", a, c)
	}
	for _, req := range reqs {
		if err := load(client, req, conns, warmUp); err != nil {
			b.Fatalf("warming up: %v", err)
		}
	}
	names := []string{"by-host", "by-path"}
	for i := range *rounds {
		for j := range names {
			name := names[(i+j)%len(names)]
			b.Run(name, func(b *testing.B) { benchGet(b, client, reqs[name]) })
		}
	}
}

// BenchmarkHostPermission times the answer of the TLS permission module (tls.permission.runtime)
// over 10 000 names, 5 000 workers and 5 000 verified custom domains, asked in turn for a
// worker's host, a custom domain and an unknown name: what a handshake for a name without a
// certificate waits for.
func BenchmarkHostPermission(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "apps")
	const n = 5000
	custom := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("app-%04d", i)
		if i%4 == 0 {
			name = fmt.Sprintf("@team%d/app-%04d", i%10, i)
		}
		p := filepath.Join(dir, filepath.FromSlash(name), "1.0.0")
		if err := os.MkdirAll(p, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "manifest.yaml"), []byte(fmt.Sprintf("name: '%s'\nversion: 1.0.0\n", name)), 0o644); err != nil {
			b.Fatal(err)
		}
		custom[fmt.Sprintf("shop-%04d.example.org", i)] = name
	}
	catalog := packages.NewCatalog(packages.WorkerLayout, []string{dir}, packages.DefaultLimits)
	defer catalog.Close()
	var router hosts.Router
	router.SetDomain(hosts.Domain{Name: "apps.example.com", Scheme: "https"})
	router.SetCustom(custom, nil)
	names := []string{"app-0001.apps.example.com", "app-0004.team4.apps.example.com", "shop-0002.example.org", "unknown.example.net", "nobody.apps.example.com"}
	for i, name := range names {
		if why := serving.HostServed(&router, catalog, name); (i < 3) != (why == "") {
			b.Fatalf("HostServed(%s) = %q", name, why)
		}
	}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		serving.HostServed(&router, catalog, names[i%len(names)])
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/check")
}
