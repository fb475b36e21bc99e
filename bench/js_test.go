package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// jsHello is the TypeScript hello-world of the JavaScript benchmarks, the same file for the
// runtime and for the bare Bun: the runtime's loader serves its fetch, and `bun run` serves a
// default export with fetch by itself (Bun.serve on PORT, at the export's hostname).
const jsHello = `export default {
  hostname: process.env.HOST,
  fetch(req: Request): Response {
    return new Response("hello from TypeScript");
  },
};
`

// startJS starts a runtime whose JavaScript engine is bun, with the site and the settings
// (lines of the global runtime option) besides.
func startJS(b *testing.B, bun, site string, env map[string]string, settings ...string) *harness.Server {
	app := "js_runtime " + bun
	for _, s := range settings {
		app += "\n" + s
	}
	all := map[string]string{"RUNTIME_ROOT_KEY": rootKey}
	for k, v := range env {
		all[k] = v
	}
	return harness.Start(b, harness.Config{Global: accessLog, Site: site, App: app, Env: all})
}

// writeJSWorker installs jsHello as a JavaScript worker, with extra manifest lines.
func writeJSWorker(b *testing.B, s *harness.Server, name, extra string) {
	writeWorker(b, s, name, fmt.Sprintf("name: %s\nversion: 1.0.0\nentrypoint: index.ts\n%s", name, extra), map[string]string{"index.ts": jsHello})
}

// bareJSFile writes jsHello for the bare Bun, outside any runtime's folders.
func bareJSFile(b *testing.B) string {
	file := filepath.Join(b.TempDir(), "index.ts")
	if err := os.WriteFile(file, []byte(jsHello), 0o644); err != nil {
		b.Fatal(err)
	}
	return file
}

// BenchmarkJSColdStart times the first byte of a TypeScript worker's first request on Bun,
// from the runtime, against a bare `bun run` of the same file, timed from its start until the
// first byte of the same request, dialled again every 100 µs until it listens. The worker has
// ttl: 0, so each request starts its process (the same start as any other cold one) and none
// is left from enabling it, whose check starts one: the runtime checks that nothing of the
// worker runs before each timed request. It has the default settings otherwise (it listens on
// PORT, on the host's network, and the runtime polls it); one handed its listener as
// descriptor 3 (listen: socket: Bun serves on the loopback behind a forwarder on descriptor 3)
// is timed too. The three alternate, request by request, each in each place of the round in
// turn (coldStarts).
//
// An op is jsStartsPerOp starts of each: the untimed waits between starts are far longer
// than the timed part, and b.N follows only that, so a 1 s run would time a handful of starts.
func BenchmarkJSColdStart(b *testing.B) {
	bun := harness.BunBinary(b)
	s := startJS(b, bun, "", nil)
	writeJSWorker(b, s, "cold", "ttl: 0\n")
	writeJSWorker(b, s, "coldsock", "ttl: 0\nlisten: socket\n")
	file := bareJSFile(b)
	client, _ := newClient()
	defer client.CloseIdleConnections()
	def, bare := coldStarts(b, b.N*jsStartsPerOp,
		func() time.Duration { return freshStart(b, s, client, "cold") }, "socket",
		func() time.Duration { return freshStart(b, s, client, "coldsock") },
		func() time.Duration { return bareStart(b, bun, "run", file) })
	b.ReportMetric(ms(percentile(def, 0.5)-percentile(bare, 0.5)), "p50-over-bare-ms")
}

// jsStartsPerOp is how many starts of each kind one op of BenchmarkJSColdStart times.
const jsStartsPerOp = 6

// freshStart waits until no process of the worker (ttl: 0) runs, then times its next request
// from the runtime until the first byte of the answer. The benchmark's timer runs for the
// timed part alone, so that b.N follows what is measured.
func freshStart(b *testing.B, s *harness.Server, client *http.Client, name string) time.Duration {
	b.StopTimer()
	harness.Eventually(b, "the last process of "+name+" to end", 10*time.Second, func() bool { return workerProcesses(b, s, name) == 0 })
	req, _ := http.NewRequest("GET", s.URL+"/"+name+"/", nil)
	b.StartTimer()
	start := time.Now()
	resp, err := client.Do(req) // returns at the first byte of the answer
	took := time.Since(start)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("cold request: %v %v", err, resp)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return took
}

// BenchmarkJSServing compares, on one runtime process, the TypeScript worker on Bun with the
// default settings (on PORT, the host's network) and with listen: socket (the runtime proxies
// over descriptor 3's unix socket to the loader's forwarder, which passes each connection to
// Bun.serve on the loopback) with Caddy's reverse_proxy to a bare `bun run` of the same file;
// the three alternate round by round.
func BenchmarkJSServing(b *testing.B) {
	bun := harness.BunBinary(b)
	// The bare Bun runs in a session of its own, as each worker does.
	backend := startProgram(b, ownSession, bun, "run", bareJSFile(b))
	site := "\thandle_path /rp/* {\n\t\treverse_proxy " + backend + "\n\t}"
	// The worker may use the machine's cores, as the unconfined backend does (see BenchmarkServing).
	s := startJS(b, bun, site, map[string]string{"RUNTIME_WORKER_CPU": strconv.Itoa(runtime.NumCPU())})
	writeJSWorker(b, s, "hello", "")
	writeJSWorker(b, s, "hellosock", "listen: socket\n")

	client, conns := newClient()
	defer client.CloseIdleConnections()
	reqs := map[string]*http.Request{}
	for name, path := range map[string]string{"js-worker": "/hello/", "js-socket-worker": "/hellosock/", "reverse-proxy": "/rp/"} {
		req, err := newRequest(s.URL+path, nil)
		if err != nil {
			b.Fatal(err)
		}
		reqs[name] = req
	}
	// All three answer the same bytes.
	for _, name := range []string{"js-worker", "js-socket-worker"} {
		if a, c := fetch(b, client, reqs[name]), fetch(b, client, reqs["reverse-proxy"]); a != c {
			b.Fatalf("%s answers %q, reverse-proxy answers %q", name, a, c)
		}
	}
	for _, req := range reqs {
		if err := load(client, req, conns, warmUp); err != nil {
			b.Fatalf("warming up: %v", err)
		}
	}
	names := []string{"js-worker", "reverse-proxy", "js-socket-worker"}
	for i := range *rounds {
		for j := range names {
			name := names[(i+j)%len(names)]
			b.Run(name, func(b *testing.B) { benchGet(b, client, reqs[name]) })
		}
	}
}

// idleJSWorkers is how many JavaScript workers BenchmarkJSIdleRSS serves, and jsTTL their ttl.
const (
	idleJSWorkers = 20
	jsTTL         = 2 * time.Second
)

// BenchmarkJSIdleRSS reads the resident memory of one runtime process with 20 TypeScript
// workers on Bun installed (ttl: 2s), idle, then again after each answered one request and
// their processes stopped at their ttl, as BenchmarkIdleRSS reads it: what serving JavaScript
// workers leaves behind in the runtime once they are gone.
func BenchmarkJSIdleRSS(b *testing.B) {
	bun := harness.BunBinary(b)
	// All 20 run at once: the default pool_size (16) would stop the least recently used.
	rt := startJS(b, bun, "", nil, "pool_size "+strconv.Itoa(idleJSWorkers))
	for i := range idleJSWorkers {
		writeJSWorker(b, rt, fmt.Sprintf("js%02d", i), fmt.Sprintf("ttl: %s\n", jsTTL))
	}
	client, _ := newClient()
	defer client.CloseIdleConnections()
	settle := func() {
		client.CloseIdleConnections()
		rt.Client.CloseIdleConnections()
		time.Sleep(idleSettle)
	}
	measure := func(name string) {
		for range *rounds {
			b.Run(name, func(b *testing.B) {
				mib := rssMiB(b, rt.PID())
				for range b.N {
				}
				b.ReportMetric(mib, "MiB")
			})
		}
	}
	// The runtime has answered its first request (the readiness probe) and listed the workers.
	harness.Eventually(b, "the last worker to be listed", 30*time.Second, func() bool {
		resp := rt.Get(rt.API+"/workers", harness.WithKey(rootKey))
		return resp.Status == 200 && bytes.Contains(resp.Body, fmt.Appendf(nil, "js%02d", idleJSWorkers-1))
	})
	settle()
	measure("idle")
	for i := range idleJSWorkers {
		req, err := newRequest(fmt.Sprintf("%s/js%02d/", rt.URL, i), nil)
		if err != nil {
			b.Fatal(err)
		}
		fetch(b, client, req)
	}
	if n := workerProcesses(b, rt, ""); n != idleJSWorkers {
		b.Fatalf("%d Bun processes run for the runtime after each worker answered, want %d", n, idleJSWorkers)
	}
	harness.Eventually(b, "the workers' processes to stop at their ttl", 30*time.Second+jsTTL, func() bool { return workerProcesses(b, rt, "") == 0 })
	settle()
	measure("after-ttl")
}

// workerProcesses counts the processes running worker name of s, or any of its workers for
// "": those whose command line names the worker's folder (a JavaScript worker's names its
// entrypoint there).
func workerProcesses(b *testing.B, s *harness.Server, name string) int {
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		b.Fatal(err)
	}
	folder := []byte(filepath.Join(s.DataDir, "apps", name) + string(filepath.Separator))
	n := 0
	for _, f := range cmdlines {
		if line, err := os.ReadFile(f); err == nil && bytes.Contains(line, folder) {
			n++
		}
	}
	return n
}
