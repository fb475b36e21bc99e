package bench

import (
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
// own file_server on the same file, and a process worker with Caddy's reverse_proxy straight
// to another instance of the same program; the pairs alternate round by round.
func BenchmarkServing(b *testing.B) {
	backend := startBackend(b)
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

	client, conns := newClient()
	defer client.CloseIdleConnections()
	reqs := map[string]*http.Request{}
	for name, path := range map[string]string{
		"static-worker": "/site/", "file-server": "/fs/", "process-worker": "/proc/sleep?d=0", "reverse-proxy": "/rp/sleep?d=0",
		"pinned-worker": "/site@^1.0.0/", "inject-base": "/spa/",
	} {
		req, err := newRequest(s.URL+path, nil)
		if err != nil {
			b.Fatal(err)
		}
		reqs[name] = req
	}
	// Both sides of each pair answer the same bytes.
	for _, pair := range [][2]string{{"static-worker", "file-server"}, {"process-worker", "reverse-proxy"}} {
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
	names := []string{"static-worker", "file-server", "process-worker", "reverse-proxy", "pinned-worker", "inject-base"}
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
// process each time (disabling and enabling the version stops it; that is not timed).
func BenchmarkColdStart(b *testing.B) {
	s := harness.Start(b, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, Global: accessLog})
	writeProcessWorker(b, s, "cold", "")
	client, _ := newClient()
	defer client.CloseIdleConnections()
	toggle := func(verb string) {
		if resp := s.Do("POST", s.API+"/workers/_/cold/1.0.0/"+verb, harness.WithKey(rootKey)); resp.Status != 200 {
			b.Fatalf("%s: %s", verb, resp)
		}
	}
	var total time.Duration
	for range b.N {
		b.StopTimer()
		toggle("disable")
		toggle("enable")
		req, _ := http.NewRequest("GET", s.URL+"/cold/sleep?d=0", nil)
		b.StartTimer()
		start := time.Now()
		resp, err := client.Do(req) // returns at the first byte of the answer
		total += time.Since(start)
		b.StopTimer()
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("cold request: %v %v", err, resp)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/start")
}

// startBackend runs the test worker on a free port for reverse_proxy, until the benchmark ends.
func startBackend(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(harness.TestWorker(b))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOST=127.0.0.1", "PORT=" + strconv.Itoa(port)}
	ownSession(cmd)
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
