package bench

import (
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// tinyModule is the tiny WebAssembly worker: a few hundred bytes emitted by the test kit, one
// fd_write of a whole CGI answer.
var tinyModule = harness.TinyWasm("Content-Type: text/plain\n\nHello, world\n", "wasi_snapshot_preview1", "fd_write")

// helloModule is the Go hello-world built for wasip1 (about 2 MB).
func helloModule(b *testing.B) []byte {
	module, err := os.ReadFile(harness.HelloWasm(b))
	if err != nil {
		b.Fatal(err)
	}
	return module
}

// unique returns module with a custom section of random bytes appended: the same code, and
// another module to the compilation cache, which is keyed by the module's bytes.
func unique(module []byte) []byte {
	tag := make([]byte, 16)
	rand.Read(tag)
	name := "bench"
	body := append([]byte{byte(len(name))}, name...)
	body = append(body, tag...)
	return append(append(append([]byte{}, module...), 0x00, byte(len(body))), body...)
}

// uploadWasm uploads module as worker name@version.
func uploadWasm(b *testing.B, s *harness.Server, name, version string, module []byte) {
	archive := harness.TarGz(b, harness.File{Name: "manifest.yaml", Body: fmt.Sprintf("name: %s\nversion: %s\nruntime: wasm\nmodule: app.wasm\n", name, version)},
		harness.File{Name: "app.wasm", Body: string(module)})
	if resp := s.Upload(s.API+"/workers/upload", name+".tgz", archive, harness.WithKey(rootKey)); resp.Status != 200 {
		b.Fatalf("upload %s@%s = %s", name, version, resp)
	}
}

// timeGet times one GET of url to its whole answer, which must be Hello, world.
func timeGet(b *testing.B, client *http.Client, url string) time.Duration {
	start := time.Now()
	resp, err := client.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != 200 || string(body) != "Hello, world\n" {
		b.Fatalf("GET %s = %d %q", url, resp.StatusCode, body)
	}
	return took
}

// BenchmarkWasm measures WebAssembly workers on one runtime: the first request after an upload
// (the compilation included; each round uploads a module the cache has not seen), the warm
// request's p50 from one connection, and warm throughput of the Go hello-world against the same
// program as a process worker.
func BenchmarkWasm(b *testing.B) {
	s := harness.Start(b, harness.Config{Global: accessLog,
		Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_WORKER_CPU": strconv.Itoa(runtime.NumCPU())}})
	hello := helloModule(b)
	uploadWasm(b, s, "tiny", "1.0.0", tinyModule)
	uploadWasm(b, s, "hello", "1.0.0", hello)
	bin, err := os.ReadFile(harness.Hello(b))
	if err != nil {
		b.Fatal(err)
	}
	writeWorker(b, s, "proc", "name: proc\nversion: 1.0.0\nentrypoint: server\n", map[string]string{"server": string(bin)})
	if err := os.Chmod(filepath.Join(s.DataDir, "apps", "proc", "1.0.0", "server"), 0o755); err != nil {
		b.Fatal(err)
	}
	client, conns := newClient()
	defer client.CloseIdleConnections()
	reqs := map[string]*http.Request{}
	for name, path := range map[string]string{"go-throughput": "/hello/", "process-throughput": "/proc/"} {
		req, err := newRequest(s.URL+path, nil)
		if err != nil {
			b.Fatal(err)
		}
		if got := fetch(b, client, req); got != "Hello, world\n" {
			b.Fatalf("%s answers %q", name, got)
		}
		if err := load(client, req, conns, warmUp); err != nil {
			b.Fatalf("warming up: %v", err)
		}
		reqs[name] = req
	}
	// A compilation may take long on a busy machine: the first requests wait for it.
	patient := &http.Client{Timeout: 10 * time.Minute}
	first := func(name string, module []byte) func(b *testing.B) {
		return func(b *testing.B) {
			var total time.Duration
			for i := range b.N {
				b.StopTimer()
				version := fmt.Sprintf("2.%d.%d", time.Now().UnixNano(), i)
				uploadWasm(b, s, name+"-first", version, unique(module))
				b.StartTimer()
				total += timeGet(b, patient, s.URL+"/"+name+"-first@"+version+"/")
				b.StopTimer()
				// Removed again, so versions do not pile up round after round.
				if resp := s.Do("DELETE", s.API+"/workers/_/"+name+"-first/"+version, harness.WithKey(rootKey)); resp.Status != 200 {
					b.Fatalf("removing %s-first@%s = %s", name, version, resp)
				}
				b.StartTimer()
			}
			b.ReportMetric(ms(total)/float64(b.N), "ms/first")
		}
	}
	warm := func(path string) func(b *testing.B) {
		return func(b *testing.B) {
			took := make([]time.Duration, 0, b.N)
			for range b.N {
				took = append(took, timeGet(b, client, s.URL+path))
			}
			b.ReportMetric(ms(percentile(took, 0.5)), "p50-ms")
		}
	}
	for range *rounds {
		b.Run("tiny-first", first("tiny", tinyModule))
		b.Run("go-first", first("hello", hello))
		b.Run("tiny-warm", warm("/tiny/"))
		b.Run("go-warm", warm("/hello/"))
		b.Run("go-throughput", func(b *testing.B) { benchGet(b, client, reqs["go-throughput"]) })
		b.Run("process-throughput", func(b *testing.B) { benchGet(b, client, reqs["process-throughput"]) })
	}
}

// BenchmarkWasmRestart times the first request to the Go hello-world after the runtime
// restarted: its compiled module is read back from the cache in state_dir.
func BenchmarkWasmRestart(b *testing.B) {
	s := harness.Start(b, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	uploadWasm(b, s, "hello", "1.0.0", helloModule(b))
	client, _ := newClient()
	defer client.CloseIdleConnections()
	timeGet(b, client, s.URL+"/hello/") // compiled, and written to the cache
	var total time.Duration
	for range b.N {
		b.StopTimer()
		s.Stop()
		var err error
		if s, err = s.Relaunch(b); err != nil {
			b.Fatal(err)
		}
		if err := s.WaitReady(30 * time.Second); err != nil {
			b.Fatal(err)
		}
		client.CloseIdleConnections()
		b.StartTimer()
		total += timeGet(b, client, s.URL+"/hello/")
	}
	b.ReportMetric(ms(total)/float64(b.N), "ms/first")
}

// idleWasmWorkers is how many tiny WebAssembly workers BenchmarkWasmIdleRSS installs.
const idleWasmWorkers = 1000

// BenchmarkWasmIdleRSS reads the resident memory of a runtime with 1 000 tiny WebAssembly
// workers installed, against plain Caddy, as BenchmarkIdleRSS does; then again after each
// worker answered one request (so each was compiled, and is kept within wasm_compiled_memory).
func BenchmarkWasmIdleRSS(b *testing.B) {
	rt := harness.Start(b, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	for i := range idleWasmWorkers {
		name := fmt.Sprintf("w%04d", i)
		writeWorker(b, rt, name, "name: "+name+"\nversion: 1.0.0\nruntime: wasm\nmodule: app.wasm\n",
			map[string]string{"app.wasm": string(unique(tinyModule))}) // each its own module
	}
	client, _ := newClient()
	defer client.CloseIdleConnections()
	last := fmt.Sprintf("%s/w%04d/", rt.URL, idleWasmWorkers-1)
	harness.Eventually(b, "the last worker to be listed", 30*time.Second, func() bool {
		return rt.Get(rt.API+"/workers", harness.WithKey(rootKey)).Status == 200 && strings.Contains(string(rt.Get(rt.API+"/workers", harness.WithKey(rootKey)).Body), fmt.Sprintf("w%04d", idleWasmWorkers-1))
	})
	plain := startPlainCaddy(b)
	settle := func() {
		client.CloseIdleConnections()
		rt.Client.CloseIdleConnections()
		plain.Client.CloseIdleConnections()
		time.Sleep(idleSettle)
	}
	measure := func(names ...string) {
		for range *rounds {
			for _, s := range []struct {
				name string
				pid  int
			}{{names[0], rt.PID()}, {names[1], plain.PID()}} {
				b.Run(s.name, func(b *testing.B) {
					mib := rssMiB(b, s.pid)
					for range b.N {
					}
					b.ReportMetric(mib, "MiB")
				})
			}
		}
	}
	settle()
	measure("installed", "caddy")
	for i := range idleWasmWorkers {
		timeGet(b, client, fmt.Sprintf("%s/w%04d/", rt.URL, i))
	}
	timeGet(b, client, last)
	settle()
	measure("served", "caddy-again")
}
