package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// rss is the resident memory of process pid in bytes, from /proc/pid/statm.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		t.Skipf("no /proc here to measure memory: %v", err)
	}
	fields := strings.Fields(string(b))
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		t.Fatalf("statm %q: %v", b, err)
	}
	return pages * int64(os.Getpagesize())
}

// concurrently sends n GET requests to path at once and returns their answers.
func concurrently(t *testing.T, s *harness.Server, n int, path string) []*harness.Response {
	t.Helper()
	out := make([]*harness.Response, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i], errs[i] = s.Send("GET", path) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	return out
}

// TestAnswerHeadersCapped: a worker answering a head of header lines without end is answered
// 502 naming worker_max_header_size past 1MiB on every path to it (a process worker on a
// TCP port through the shared proxy, one on its socket through the direct proxy, and a
// WebAssembly worker's CGI headers), a head within the limit passes (for a process worker
// within its header caps too, see TestHeaderCaps), a health check answering such a head fails
// naming the setting, and four such heads of 256MiB at once leave the runtime's memory where
// it was.
func TestAnswerHeadersCapped(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	processWorker(t, s, "tcp", "1.0.0", "")
	processWorker(t, s, "sock", "1.0.0", "listen: socket\n")
	uploadOK(t, s, "workers", "app.tgz", wasmPackage(t, "wasm", "1.0.0", ""), rootKey)

	for _, base := range []string{"/tcp", "/sock", "/wasm"} {
		within := 512 << 10
		if base != "/wasm" {
			within = 6000 // 91 lines: within the caps of 100 lines and 64 KiB
		}
		if resp := s.Get(base + "/headers?n=" + fmt.Sprint(within)); resp.Status != 200 || body(resp) != "ok" {
			t.Errorf("%s: a head of %d bytes = %s, want 200 ok", base, within, resp)
		}
		code := "WORKER_UNAVAILABLE"
		if base == "/wasm" {
			code = "WORKER_FAILED"
		}
		if resp := s.Get(base + "/headers?n=" + fmt.Sprint(2<<20)); resp.Status != 502 || resp.ErrorCode() != code || !strings.Contains(body(resp), "worker_max_header_size") {
			t.Errorf("%s: a head of 2MiB = %s, want 502 %s naming worker_max_header_size", base, resp, code)
		}
	}

	// A health check's answer is read within the limit too.
	resp := s.Upload(s.API+"/workers/upload", "hc.tgz", testWorkerArchive(t, "hc", "1.0.0", "healthcheck: { path: '/headers?n=2097152', timeout: 2s }\n"),
		harness.WithKey(rootKey))
	if resp.Status != 422 || resp.ErrorCode() != "HEALTHCHECK_FAILED" || !strings.Contains(body(resp), "worker_max_header_size") {
		t.Errorf("a health check answering a head of 2MiB = %s, want 422 HEALTHCHECK_FAILED naming worker_max_header_size", resp)
	}

	before := rss(t, s.PID())
	for _, base := range []string{"/sock", "/tcp"} {
		for _, resp := range concurrently(t, s, 4, base+"/headers?n="+fmt.Sprint(256<<20)) {
			if resp.Status != 502 || !strings.Contains(body(resp), "worker_max_header_size") {
				t.Errorf("%s: a head of 256MiB = %s, want 502 naming worker_max_header_size", base, resp)
			}
		}
	}
	if grown := rss(t, s.PID()) - before; grown > 128<<20 {
		t.Errorf("four heads of 256MiB at once grew the runtime by %d MiB", grown>>20)
	}
}

// TestWasmInstancesBounded: with wasm_concurrency 2 a worker runs two instances at once and
// the requests past them wait, then get 503 WORKER_UNAVAILABLE naming the setting, as those
// past the waiting line get at once; with the instances running holding wasm_memory_budget
// another worker's request waits and gets 503 naming that one; the memory the instances took
// goes back to the system once they end.
func TestWasmInstancesBounded(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey},
		App: "\t\twasm_concurrency 2\n\t\twasm_memory 64MiB\n\t\twasm_memory_budget 128MiB"})
	uploadOK(t, s, "workers", "a.tgz", wasmPackage(t, "a", "1.0.0", "timeout: 6s\n"), rootKey)
	uploadOK(t, s, "workers", "b.tgz", wasmPackage(t, "b", "1.0.0", "timeout: 1s\n"), rootKey)
	for _, base := range []string{"/a/", "/b/"} { // compiled before the clock matters
		if resp := s.Get(base); resp.Status != 200 {
			t.Fatalf("GET %s = %s", base, resp)
		}
	}
	before := rss(t, s.PID())

	// Two run, eight wait (four times wasm_concurrency), the rest are refused at once; of
	// those waiting, some get the room the first ones give back, the others wait 6s.
	answers := concurrently(t, s, 14, "/a/hold?mb=24&wait=2000")
	counts := map[int]int{}
	for _, resp := range answers {
		counts[resp.Status]++
		if resp.Status != 200 && (resp.Status != 503 || resp.ErrorCode() != "WORKER_UNAVAILABLE" || !strings.Contains(body(resp), "wasm_concurrency")) {
			t.Errorf("a request past wasm_concurrency = %s, want 200 or 503 WORKER_UNAVAILABLE naming wasm_concurrency", resp)
		}
	}
	if counts[200] < 2 || counts[503] < 4 {
		t.Errorf("14 requests at once to a worker of wasm_concurrency 2: %v, want at least 2 answered and 4 refused", counts)
	}

	comeBack := func(what string, base int64) {
		harness.Eventually(t, what, 10*time.Second, func() bool { return rss(t, s.PID())-base < 48<<20 })
	}
	comeBack("the memory of the first instances to come back", before)

	// Two instances of a reserve the whole budget: b waits its timeout of 1s, then is refused.
	idle := rss(t, s.PID())
	done := make(chan []*harness.Response)
	go func() { done <- concurrently(t, s, 2, "/a/hold?mb=24&wait=4000") }()
	harness.Eventually(t, "a's two instances to run", 10*time.Second, func() bool {
		return rss(t, s.PID())-idle > 40<<20
	})
	if resp := s.Get("/b/"); resp.Status != 503 || resp.ErrorCode() != "WORKER_UNAVAILABLE" || !strings.Contains(body(resp), "wasm_memory_budget") || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a request while the instances running hold wasm_memory_budget = %s, want 503 WORKER_UNAVAILABLE naming it, with Retry-After", resp)
	}
	for _, resp := range <-done {
		if resp.Status != 200 {
			t.Errorf("an instance within the budget = %s", resp)
		}
	}
	if resp := s.Get("/b/"); resp.Status != 200 {
		t.Errorf("b once the budget is free = %s", resp)
	}
	// The instances ended: their memory is the system's again.
	comeBack("the runtime's memory to come back", before)
}

// TestWasmModuleSize: a small archive holding a module larger than wasm_max_module_size (a
// module of many tiny functions) is refused at upload naming the setting, and one within it
// is installed and compiled; once its worker is deleted, the memory its compilation took is
// the system's again.
func TestWasmModuleSize(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey},
		App: "\t\twasm_max_module_size 1MiB"})
	archive := func(functions int) []byte {
		return harness.TarGz(t, pkg("name: big\nversion: 1.0.0\nruntime: wasm\nmodule: app.wasm\n",
			harness.File{Name: "app.wasm", Body: string(testkit.ManyFunctionsWasm(functions))})...)
	}
	large := archive(400_000) // 1.6 MB of module in an archive of a few KB
	resp := s.Upload(s.API+"/workers/upload", "big.tgz", large, harness.WithKey(rootKey))
	if resp.Status != 400 || resp.ErrorCode() != "INVALID_MODULE" || !strings.Contains(body(resp), "wasm_max_module_size") {
		t.Fatalf("uploading a module of 1.6 MB (archive of %d bytes) = %s, want 400 INVALID_MODULE naming wasm_max_module_size", len(large), resp)
	}
	before := rss(t, s.PID())
	uploadOK(t, s, "workers", "big.tgz", archive(250_000), rootKey)
	// It writes no CGI answer, but it compiled and ran.
	if resp := s.Get("/big/"); resp.Status != 502 || resp.ErrorCode() != "WORKER_FAILED" {
		t.Errorf("a module of 1 MB = %s, want it run (502 WORKER_FAILED: it writes nothing)", resp)
	}
	compiled := rss(t, s.PID())
	// Deleted, its compiled module goes, and the memory it took with it.
	if resp := s.Do("DELETE", s.API+"/workers/_/big", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("DELETE big = %s", resp)
	}
	harness.Eventually(t, "the compiled module's memory to come back", 10*time.Second, func() bool {
		return rss(t, s.PID())-before < 24<<20
	})
	t.Logf("memory: %d MiB before, %d MiB compiled, %d MiB deleted", before>>20, compiled>>20, rss(t, s.PID())>>20)
}
