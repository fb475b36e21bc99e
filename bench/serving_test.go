package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// BenchmarkServing compares, on one runtime process, a static worker's index file with Caddy's
// own file_server on the same file, and a process worker, on a port and on the unix socket it
// is handed (listen: socket), with Caddy's reverse_proxy straight to another instance of the
// same program over TCP; the pairs alternate round by round.
func BenchmarkServing(b *testing.B) {
	backend := startBackend(b, ownSession)
	site := `	handle_path /fs/* {
		root * ./data/apps/site/1.0.0
		file_server
	}
	handle_path /rp/* {
		reverse_proxy ` + backend + `
	}`
	// The sandboxed worker may use the machine's cores, as the unconfined reverse_proxy backend
	// does, so the ratio measures the runtime's proxying and not the default CPU cap (1 core).
	s := harness.Start(b, harness.Config{Global: accessLog, Site: site,
		Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_WORKER_CPU": strconv.Itoa(runtime.NumCPU())}})
	page := "<!doctype html><html><head><title>bench</title></head><body>" + strings.Repeat("<p>static content</p>", 100) + "</body></html>"
	writeWorker(b, s, "site", "name: site\nversion: 1.0.0\nentrypoint: index.html\n", map[string]string{"index.html": page})
	writeWorker(b, s, "spa", "name: spa\nversion: 1.0.0\nentrypoint: index.html\ninjectBase: true\n", map[string]string{"index.html": page})
	writeProcessWorker(b, s, "proc", "")
	writeProcessWorker(b, s, "sock", "listen: socket\n")

	client, conns := newClient()
	defer client.CloseIdleConnections()
	reqs := map[string]*http.Request{}
	for name, path := range map[string]string{
		"static-worker": "/site/", "file-server": "/fs/", "process-worker": "/proc/sleep?d=0", "reverse-proxy": "/rp/sleep?d=0",
		"socket-worker": "/sock/sleep?d=0",
		"pinned-worker": "/site@^1.0.0/", "inject-base": "/spa/",
	} {
		req, err := newRequest(s.URL+path, nil)
		if err != nil {
			b.Fatal(err)
		}
		reqs[name] = req
	}
	// Both sides of each pair answer the same bytes.
	for _, pair := range [][2]string{{"static-worker", "file-server"}, {"process-worker", "reverse-proxy"}, {"socket-worker", "reverse-proxy"}} {
		a, c := fetch(b, client, reqs[pair[0]]), fetch(b, client, reqs[pair[1]])
		if a != c {
			b.Fatalf("%s answers %q, %s answers %q", pair[0], a, pair[1], c)
		}
	}
	if a, c := fetch(b, client, reqs["pinned-worker"]), fetch(b, client, reqs["static-worker"]); a != c {
		b.Fatalf("the pinned version answers %q, the unpinned %q", a, c)
	}
	if got := fetch(b, client, reqs["inject-base"]); !strings.Contains(got, `<base href="/spa/">`) {
		b.Fatalf("the inject_base page answers %q", got)
	}
	for _, req := range reqs {
		if err := load(client, req, conns, warmUp); err != nil {
			b.Fatalf("warming up: %v", err)
		}
	}
	names := []string{"static-worker", "file-server", "process-worker", "reverse-proxy", "socket-worker", "pinned-worker", "inject-base"}
	for i := range *rounds {
		for j := range names {
			name := names[(i+j)%len(names)]
			b.Run(name, func(b *testing.B) { benchGet(b, client, reqs[name]) })
		}
	}
}

// BenchmarkManyWorkers compares 64 connections spread over 50 static workers, each request to
// the next worker, with the same connections all on one of them: serving many workers at once
// must cost about what serving one does.
func BenchmarkManyWorkers(b *testing.B) {
	s := harness.Start(b, harness.Config{Global: accessLog, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	const workers, conns = 50, 64
	var many []*http.Request
	for i := range workers {
		name := fmt.Sprintf("w%02d", i)
		writeWorker(b, s, name, "name: "+name+"\nversion: 1.0.0\nentrypoint: index.html\n",
			map[string]string{"index.html": "<!doctype html><title>bench</title><p>" + strings.Repeat("static content ", 100)})
		req, err := newRequest(s.URL+"/"+name+"/", nil)
		if err != nil {
			b.Fatal(err)
		}
		many = append(many, req)
	}
	client := clientWith(conns)
	defer client.CloseIdleConnections()
	for _, req := range many {
		fetch(b, client, req)
	}
	sets := map[string][]*http.Request{"one-worker": many[:1], "fifty-workers": many}
	for _, set := range sets {
		if err := loadEach(client, set, conns, warmUp); err != nil {
			b.Fatalf("warming up: %v", err)
		}
	}
	names := []string{"one-worker", "fifty-workers"}
	for i := range *rounds {
		for j := range names {
			name := names[(i+j)%len(names)]
			b.Run(name, func(b *testing.B) { benchGetEach(b, client, sets[name], conns) })
		}
	}
}

// BenchmarkColdStart times the first byte of a process worker's first request, starting the
// process each time, against a bare start of the same program: started as a plain child of
// the benchmark on a free port, timed from its start until the first byte of the same
// request, dialled again every 100 µs until it listens. The workers have ttl: 0, so each
// request starts a process, as BenchmarkJSColdStart's do (freshStart): disabling and enabling
// the version, as this benchmark did before, left it the process that enabling's check starts,
// and timed a warm request (the port row, 1.7 ms against a bare start of 16 ms). The worker
// that takes its listener as descriptor 3 (listen: socket, in a network of its own when the
// benchmark runs as root) and the one polled on its port alternate with the bare start,
// request by request (coldStarts).
func BenchmarkColdStart(b *testing.B) {
	s := harness.Start(b, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, Global: accessLog})
	writeProcessWorker(b, s, "coldport", "ttl: 0\n")
	// Every layer: as root, the worker handed its listener also gets a network of its own.
	iso := s
	if os.Geteuid() == 0 {
		iso = harness.Start(b, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, Global: accessLog,
			App: "worker_network isolated"})
	}
	writeProcessWorker(b, iso, "cold", "ttl: 0\nlisten: socket\n")
	client, _ := newClient()
	defer client.CloseIdleConnections()
	bin := harness.TestWorker(b)
	sock, bare := coldStarts(b, b.N,
		func() time.Duration { return freshStart(b, iso, client, "cold") }, "port",
		func() time.Duration { return freshStart(b, s, client, "coldport") },
		func() time.Duration { return bareStart(b, bin) })
	b.ReportMetric(float64(percentile(sock, 0.5))/float64(2*percentile(bare, 0.5)+5*time.Millisecond), "p50/budget")
	b.ReportMetric(float64(percentile(sock, 0.9))/float64(3*percentile(bare, 0.9)), "p90/budget")
}

// coldStarts times rounds of three starts, the worker the benchmark is about, another way to
// run it (named other: its median is reported as other-p50-ms) and the bare program, each kind
// taking each place of the round in turn, and reports what the cold-start benchmarks share:
// each kind's median (p50-ms the worker's, bare-p50-ms) and the worker's and the bare
// program's 90th percentile. Each start begins startSettle after the one before ended, untimed:
// a worker's start has the sandbox ready the next spare launcher once it answered, which would
// otherwise share the CPU with whatever start came next (the kinds follow one another unevenly
// in the rotation, so that start is more often one kind's than another's).
func coldStarts(b *testing.B, rounds int, worker func() time.Duration, other string, alt, bare func() time.Duration) (workers, bares []time.Duration) {
	var alts []time.Duration
	kinds := []struct {
		start func() time.Duration
		took  *[]time.Duration
	}{{worker, &workers}, {bare, &bares}, {alt, &alts}}
	for i := range rounds {
		for j := range kinds {
			k := kinds[(i+j)%len(kinds)]
			b.StopTimer()
			time.Sleep(startSettle)
			*k.took = append(*k.took, k.start())
		}
	}
	b.ReportMetric(ms(percentile(workers, 0.5)), "p50-ms")
	b.ReportMetric(ms(percentile(workers, 0.9)), "p90-ms")
	b.ReportMetric(ms(percentile(alts, 0.5)), other+"-p50-ms")
	b.ReportMetric(ms(percentile(bares, 0.5)), "bare-p50-ms")
	b.ReportMetric(ms(percentile(bares, 0.9)), "bare-p90-ms")
	return workers, bares
}

// startSettle is the pause before each start coldStarts times: longer than the sandbox takes
// to ready a spare launcher after a worker answered (a launcher's own start, tens of
// milliseconds), so that each start finds the machine as idle as a first one does.
const startSettle = 250 * time.Millisecond

// bareStart times the program (argv) started plainly on a free port (HOST and PORT) until the
// first byte of the same request, dialled again every 100 µs until it listens.
func bareStart(b *testing.B, argv ...string) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = programEnv(l.Addr().(*net.TCPAddr).Port)
	ownSession(cmd)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			for {
				conn, err := net.Dial("tcp", addr)
				if err == nil || ctx.Err() != nil {
					return conn, err
				}
				pause(100 * time.Microsecond)
			}
		}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/sleep?d=0", nil)
	b.StartTimer()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	resp, err := client.Do(req)
	took := time.Since(start)
	b.StopTimer()
	cmd.Process.Kill()
	cmd.Wait()
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("bare request: %v %v", err, resp)
	}
	resp.Body.Close()
	return took
}

// startBackend runs the test worker on a free port for reverse_proxy, until the benchmark ends,
// started as place arranges (ownSession, as a process worker, or likeRuntime).
func startBackend(b *testing.B, place func(*exec.Cmd)) string {
	return startProgram(b, place, harness.TestWorker(b))
}

// startProgram runs a program (argv) serving on a free port (HOST and PORT), until the
// benchmark ends, started as place arranges; it returns the address once it listens.
func startProgram(b *testing.B, place func(*exec.Cmd), argv ...string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = programEnv(port)
	place(cmd)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	harness.Eventually(b, "the backend to listen", 10*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr
}

// programEnv is the environment of a program the benchmark starts itself on port: what the
// runtime gives a process worker of its own (HOST, PORT, and NO_COLOR, which it sets for
// JavaScript workers), PATH besides.
func programEnv(port int) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOST=127.0.0.1", "PORT=" + strconv.Itoa(port), "NO_COLOR=1"}
}

// writeWorker writes a worker version on disk.
func writeWorker(b *testing.B, s *harness.Server, name, manifest string, files map[string]string) {
	dir := filepath.Join(s.DataDir, "apps", name, "1.0.0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	all := map[string]string{"manifest.yaml": manifest}
	for f, content := range files {
		all[f] = content
	}
	for f, content := range all {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// writeProcessWorker installs the test worker as a process worker, with extra manifest lines.
// The binary goes inside the version folder: besides the system's folders, the only place the
// sandbox runs programs from.
func writeProcessWorker(b *testing.B, s *harness.Server, name, extra string) {
	bin, err := os.ReadFile(harness.TestWorker(b))
	if err != nil {
		b.Fatal(err)
	}
	writeWorker(b, s, name, fmt.Sprintf("name: %s\nversion: 1.0.0\nentrypoint: server\n%s", name, extra), map[string]string{"server": string(bin)})
	if err := os.Chmod(filepath.Join(s.DataDir, "apps", name, "1.0.0", "server"), 0o755); err != nil {
		b.Fatal(err)
	}
}

// fetch answers the body of one request.
func fetch(b *testing.B, client *http.Client, req *http.Request) string {
	resp, err := client.Do(req.Clone(req.Context()))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		b.Fatalf("GET %s = %d %s", req.URL.Path, resp.StatusCode, body)
	}
	return string(body)
}
