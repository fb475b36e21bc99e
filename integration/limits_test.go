package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
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
// WebAssembly worker's CGI headers), a head within the limit passes, and four such heads of
// 256MiB at once leave the runtime's memory where it was.
func TestAnswerHeadersCapped(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	processWorker(t, s, "tcp", "1.0.0", "")
	processWorker(t, s, "sock", "1.0.0", "listen: socket\n")
	uploadOK(t, s, "workers", "app.tgz", wasmPackage(t, "wasm", "1.0.0", ""), rootKey)

	for _, base := range []string{"/tcp", "/sock", "/wasm"} {
		if resp := s.Get(base + "/headers?n=" + fmt.Sprint(512<<10)); resp.Status != 200 || body(resp) != "ok" {
			t.Errorf("%s: a head of 512KiB = %s, want 200 ok", base, resp)
		}
		code := "WORKER_UNAVAILABLE"
		if base == "/wasm" {
			code = "WORKER_FAILED"
		}
		if resp := s.Get(base + "/headers?n=" + fmt.Sprint(2<<20)); resp.Status != 502 || resp.ErrorCode() != code || !strings.Contains(body(resp), "worker_max_header_size") {
			t.Errorf("%s: a head of 2MiB = %s, want 502 %s naming worker_max_header_size", base, resp, code)
		}
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
