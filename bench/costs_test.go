package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// costsKeys is the number of keys GET /keys lists, the admin key that asks included.
const costsKeys = 100

// BenchmarkCosts compares the listings with the public health probe, each on its own process:
// GET /api/workers with 20 workers and GET /api/keys with 100 keys on one runtime, GET
// /api/workers with 1 000 workers on another; and the health probe with Caddy's respond
// serving the same bytes on the first. All alternate round by round. The listings are asked
// for in gzip, as browsers and Go's default client ask, and (the -identity requests) without
// it, as curl and most scripts ask; the 1 000 workers also 100 at a time, every page in turn. A
// bare net/http server answering as many bytes as the keys listing and as health gives that
// pair's floor on the machine, and the keys listing's first page of one key (the same request,
// headers and work but a small body) what the listing costs without its bytes.
func BenchmarkCosts(b *testing.B) {
	// The respond route serves the health probe's bytes, which name the version (it serves a
	// placeholder until they are known), with the same headers: the X-Request-Id that every
	// answer of the runtime carries is Caddy's request UUID there too.
	respondSite := func(body string) string {
		return "\thandle /respond {\n\t\theader Content-Type application/json\n\t\theader X-Request-Id {http.request.uuid}\n" +
			"\t\trespond `" + body + "` 200\n\t}"
	}
	// The bare server shares the client's session, as the runtime does (see likeRuntime).
	backend := startBackend(b, likeRuntime)
	small := startWithWorkers(b, 20, respondSite("pending"))
	large := startWithWorkers(b, 1000, "")
	admin := small.CreateKey(rootKey, map[string]any{"name": "bench-admin", "role": "admin"})
	for i := range costsKeys - 1 {
		small.CreateKey(rootKey, map[string]any{"name": fmt.Sprintf("bench-%03d", i), "role": "viewer"})
	}
	largeAdmin := large.CreateKey(rootKey, map[string]any{"name": "bench-admin", "role": "admin"})

	// One validated request each: the listings hold what the benchmark claims.
	var workers []any
	if resp := small.Get(small.API+"/workers", harness.WithKey(admin.Secret)); resp.Status != http.StatusOK || resp.JSON(&workers) != nil || len(workers) != 20 {
		b.Fatalf("GET %s/workers = %s", small.API, resp)
	}
	if resp := large.Get(large.API+"/workers", harness.WithKey(largeAdmin.Secret)); resp.Status != http.StatusOK || resp.JSON(&workers) != nil || len(workers) != 1000 {
		b.Fatalf("GET %s/workers (1 000) = %s", large.API, resp)
	}
	// The pages of 100 a client walking the 1 000 workers asks for, each checked.
	pages := []string{large.API + "/workers?limit=100"}
	for {
		resp := large.Get(pages[len(pages)-1], harness.WithKey(largeAdmin.Secret))
		if resp.Status != http.StatusOK || resp.JSON(&workers) != nil || len(workers) != 100 {
			b.Fatalf("GET %s = %s", pages[len(pages)-1], resp)
		}
		next := resp.Header.Get("X-Next-Cursor")
		if next == "" {
			break
		}
		pages = append(pages, large.API+"/workers?limit=100&cursor="+next)
	}
	if len(pages) != 10 {
		b.Fatalf("%d pages of 100 workers, want 10", len(pages))
	}
	var keys struct{ Keys []any }
	if resp := small.Get(small.API+"/keys", harness.WithKey(admin.Secret)); resp.Status != http.StatusOK || resp.JSON(&keys) != nil || len(keys.Keys) != costsKeys {
		b.Fatalf("GET %s/keys = %s", small.API, resp)
	}

	if resp := small.Get(small.API+"/keys?limit=1", harness.WithKey(admin.Secret)); resp.Status != http.StatusOK || resp.JSON(&keys) != nil ||
		len(keys.Keys) != 1 || resp.Header.Get("X-Next-Cursor") == "" {
		b.Fatalf("GET %s/keys?limit=1 = %s", small.API, resp)
	}

	client, conns := newClient()
	defer client.CloseIdleConnections()
	reqs := map[string][]*http.Request{} // a benchmark's requests, sent in turn
	for name, target := range map[string]struct {
		s         *harness.Server
		path, key string
		identity  bool
	}{
		"health":            {small, small.API + "/health", "", false},
		"respond":           {small, "/respond", "", false},
		"workers-20":        {small, small.API + "/workers", admin.Secret, false},
		"keys-100":          {small, small.API + "/keys", admin.Secret, false},
		"keys-100-identity": {small, small.API + "/keys", admin.Secret, true},
		"keys-1-identity":   {small, small.API + "/keys?limit=1", admin.Secret, true},
		"health-1000":       {large, large.API + "/health", "", false},
		"workers-1000":      {large, large.API + "/workers", largeAdmin.Secret, false},
	} {
		// The gzip requests accept it, as browsers, curl --compressed and Go's default client
		// do: a listing of 1 000 workers is bytes on the wire more than work. The -identity ones
		// send no Accept-Encoding, as curl and most scripts do.
		header := http.Header{"Accept-Encoding": {"gzip"}}
		if target.identity {
			header = http.Header{}
		}
		if target.key != "" {
			header.Set("X-API-Key", target.key)
		}
		req, err := newRequest(target.s.URL+target.path, header)
		if err != nil {
			b.Fatal(err)
		}
		reqs[name] = []*http.Request{req}
	}
	for _, page := range pages {
		req, err := newRequest(large.URL+page, http.Header{"X-API-Key": {largeAdmin.Secret}})
		if err != nil {
			b.Fatal(err)
		}
		reqs["workers-1000-page-identity"] = append(reqs["workers-1000-page-identity"], req)
	}
	health := fetch(b, client, reqs["health"][0])
	// The floor of the keys listing's row without gzip: a bare net/http server (the test
	// worker, outside the runtime) answering as many bytes as the listing has, against as many
	// as the health probe has, to the same client.
	keysBody := fetch(b, client, reqs["keys-100-identity"][0])
	for name, size := range map[string]int{"bare-health": len(health), "bare-keys": len(keysBody)} {
		req, err := newRequest(fmt.Sprintf("http://%s/bytes?n=%d", backend, size), nil)
		if err != nil {
			b.Fatal(err)
		}
		if got := fetch(b, client, req); len(got) != size {
			b.Fatalf("the bare server answers %d bytes, want %d", len(got), size)
		}
		reqs[name] = []*http.Request{req}
	}
	if err := small.Reload(harness.Config{Global: accessLog, Site: respondSite(health)}); err != nil {
		b.Fatal(err)
	}
	harness.Eventually(b, "the respond route to serve the health bytes", 10*time.Second, func() bool {
		// Not through small.Get: the route is Caddy's, outside the API's contract.
		resp, err := client.Do(reqs["respond"][0].Clone(reqs["respond"][0].Context()))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK && string(body) == health &&
			resp.Header.Get("Content-Type") == "application/json" && len(resp.Header.Get("X-Request-Id")) == len("01234567-89ab-cdef-0123-456789abcdef")
	})

	order := []string{"health", "respond", "workers-20", "keys-100", "keys-100-identity", "keys-1-identity", "health-1000", "workers-1000", "workers-1000-page-identity",
		"bare-health", "bare-keys"}
	for _, name := range order {
		if err := loadEach(client, reqs[name], conns, warmUp); err != nil {
			b.Fatalf("warming up %s: %v", name, err)
		}
	}
	reversed := slices.Clone(order)
	slices.Reverse(reversed)
	for round := range *rounds {
		// Every other round runs the other way round, so that whatever the first or the last
		// measurement of a round meets (a warm-up, a collection) falls on both sides of a pair.
		names := order
		if round%2 == 1 {
			names = reversed
		}
		for _, name := range names {
			b.Run(name, func(b *testing.B) { benchGetEach(b, client, reqs[name], conns) })
		}
	}
}

// startWithWorkers starts a runtime with site and n static workers on disk.
func startWithWorkers(b *testing.B, n int, site string) *harness.Server {
	s := harness.Start(b, harness.Config{Global: accessLog, Site: site,
		Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	for i := range n {
		name := fmt.Sprintf("app-%04d", i)
		writeWorker(b, s, name, fmt.Sprintf("name: %s\nversion: 1.0.0\nentrypoint: index.html\n", name),
			map[string]string{"index.html": "<!doctype html><title>" + name + "</title>"})
	}
	return s
}

// idleSettle is how long a started server is left alone before its idle memory is read:
// idle means after the start-up's garbage has had a collection's time to go.
const idleSettle = 3 * time.Second

// BenchmarkIdleRSS reads the resident memory of an idle runtime (the default settings, no
// workers) and of an idle plain Caddy serving a respond site from the same binary, round by
// round; each round reads both (the loop itself measures nothing).
func BenchmarkIdleRSS(b *testing.B) {
	rt := harness.Start(b, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	plain := startPlainCaddy(b)
	rt.Client.CloseIdleConnections()
	plain.Client.CloseIdleConnections()
	time.Sleep(idleSettle)
	for range *rounds {
		for _, s := range []struct {
			name string
			pid  int
		}{{"runtime", rt.PID()}, {"caddy", plain.PID()}} {
			b.Run(s.name, func(b *testing.B) {
				mib := rssMiB(b, s.pid)
				for range b.N {
				}
				b.ReportMetric(mib, "MiB")
			})
		}
	}
}

// startPlainCaddy starts the runtime's binary serving a Caddyfile without the runtime (one
// respond site), once it answers.
func startPlainCaddy(b *testing.B) *harness.Server {
	port := harness.FreePort(b)
	plain, err := harness.Launch(b, harness.Config{Port: port, File: fmt.Sprintf(`{
	admin 127.0.0.1:%d
	auto_https off
	persist_config off
	default_bind 127.0.0.1
}

:%d {
	respond "ok"
}
`, harness.FreePort(b), port)})
	if err != nil {
		b.Fatal(err)
	}
	harness.Eventually(b, "plain Caddy to answer", 30*time.Second, func() bool {
		resp, err := plain.Client.Get(plain.URL + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	return plain
}

// rssMiB returns the resident set size of process pid in MiB (Linux's /proc).
func rssMiB(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				b.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb / 1024
		}
	}
	b.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
