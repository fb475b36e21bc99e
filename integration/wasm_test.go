package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
)

// wasmEcho is what the test module answers at /.
type wasmEcho struct {
	Method, Script, Path, Query, Body string
	Env                               map[string]string
	Args                              []string
}

// wasmPackage is an archive of the test module as worker name@version with extra manifest
// lines, and a data file beside it.
func wasmPackage(t *testing.T, name, version, extra string) []byte {
	t.Helper()
	module, err := os.ReadFile(harness.TestWasm(t))
	if err != nil {
		t.Fatal(err)
	}
	return harness.TarGz(t, pkg(fmt.Sprintf("name: '%s'\nversion: %s\nruntime: wasm\nmodule: app.wasm\n%s", name, version, extra),
		harness.File{Name: "app.wasm", Body: string(module)}, harness.File{Name: "data.txt", Body: "the data"})...)
}

// TestWasmWorker serves a WebAssembly worker through the real binary: the CGI contract both
// ways, its limits, its file system, fresh instances, its logs, and the refusals at upload.
// Process workers are off: wasm_workers alone decides.
func TestWasmWorker(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey},
		App: "\t\tprocess_workers off\n\t\twasm_workers @team\n\t\twasm_memory 96MiB"})
	uploadOK(t, s, "workers", "app.tgz", wasmPackage(t, "@team/hello", "1.0.0", "timeout: 3s\nlimits:\n  memory: 64MiB\nenv:\n  GREETING: hi\n"), rootKey)

	t.Run("get", func(t *testing.T) {
		s := s.In(t)
		resp := s.Get("/@team/hello/a/b?x=1&status=203", harness.WithHeader("X-One", "1"), harness.WithHeader("X-Request-Id", "trace-9"),
			harness.WithKey(rootKey))
		var e wasmEcho
		if resp.Status != 203 || resp.JSON(&e) != nil {
			t.Fatalf("GET = %s", resp)
		}
		if resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("X-Wasm") != "yes" || len(resp.Header.Values("Set-Cookie")) != 2 ||
			len(resp.Header.Values("X-Request-Id")) != 1 || resp.Header.Get("X-Request-Id") != "trace-9" ||
			len(resp.Header.Values("X-Worker-Version")) != 1 || resp.Header.Get("X-Worker-Version") != "1.0.0" {
			t.Errorf("headers = %v", resp.Header)
		}
		for k, want := range map[string]string{
			"REQUEST_METHOD": "GET", "SCRIPT_NAME": "/@team/hello", "PATH_INFO": "/a/b", "QUERY_STRING": "x=1&status=203",
			"HTTP_X_ONE": "1", "HTTP_X_REQUEST_ID": "trace-9", "GREETING": "hi", "SERVER_PROTOCOL": "HTTP/1.1",
			"REQUEST_URI": "/@team/hello/a/b?x=1&status=203", "WORKER_NAME": "@team/hello", "WORKER_VERSION": "1.0.0",
		} {
			if e.Env[k] != want {
				t.Errorf("%s = %q, want %q", k, e.Env[k], want)
			}
		}
		for k, v := range e.Env {
			if strings.Contains(v, rootKey) || strings.HasPrefix(k, "RUNTIME_") || k == "HTTP_X_API_KEY" || k == "PATH" || k == "HOME" {
				t.Errorf("the module sees %s=%q", k, v)
			}
		}
		if len(e.Args) != 1 || e.Args[0] != "app.wasm" {
			t.Errorf("args = %q", e.Args)
		}
	})

	t.Run("session cookie", func(t *testing.T) {
		s := s.In(t)
		resp := s.Get("/@team/hello/?cookie=" + harness.PathEscape("runtime_api_key=planted; Path=/"))
		if resp.Status != 200 || len(resp.Header.Values("Set-Cookie")) != 2 || strings.Contains(strings.Join(resp.Header.Values("Set-Cookie"), " "), "runtime_api_key") {
			t.Errorf("a module setting the session cookie = %s %q", resp, resp.Header.Values("Set-Cookie"))
		}
	})

	t.Run("post", func(t *testing.T) {
		s := s.In(t)
		resp := s.Do("POST", "/@team/hello/items?status=201", harness.WithBody("application/json", []byte(`{"a":1}`)))
		var e wasmEcho
		if resp.Status != 201 || resp.JSON(&e) != nil {
			t.Fatalf("POST = %s", resp)
		}
		if e.Method != "POST" || e.Body != `{"a":1}` || e.Env["CONTENT_TYPE"] != "application/json" || e.Env["CONTENT_LENGTH"] != "7" {
			t.Errorf("echo = %+v", e)
		}
	})

	t.Run("time limit", func(t *testing.T) {
		s := s.In(t)
		start := time.Now()
		resp := s.Get("/@team/hello/loop")
		if resp.Status != 504 || resp.ErrorCode() != "WORKER_TIMEOUT" {
			t.Fatalf("a loop = %s, want 504 WORKER_TIMEOUT", resp)
		}
		if took := time.Since(start); took < 3*time.Second {
			t.Errorf("the loop was stopped after %s, before its timeout of 3s", took)
		}
		if resp := s.Get("/@team/hello/"); resp.Status != 200 {
			t.Errorf("after the loop: %s", resp)
		}
		if resp := s.Get(s.API + "/health"); resp.Status != 200 {
			t.Errorf("health after the loop: %s", resp)
		}
	})

	t.Run("memory limit", func(t *testing.T) {
		s := s.In(t)
		resp := s.Get("/@team/hello/alloc")
		if resp.Status != 502 || resp.ErrorCode() != "WORKER_FAILED" || !strings.Contains(string(resp.Body), "memory") ||
			!strings.Contains(string(resp.Body), fmt.Sprint(64<<20)) {
			t.Fatalf("allocating past 64MiB = %s", resp)
		}
		if resp := s.Get("/@team/hello/"); resp.Status != 200 {
			t.Errorf("after the allocation: %s", resp)
		}
	})

	t.Run("files", func(t *testing.T) {
		s := s.In(t)
		if resp := s.Get("/@team/hello/read?path=data.txt"); resp.Status != 200 || string(resp.Body) != "the data" {
			t.Fatalf("reading its own file = %s", resp)
		}
		state := filepath.Join(s.DataDir, "state", "api-keys.db")
		if _, err := os.Stat(state); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"../1.0.0/data.txt", "../../../state/api-keys.db", "/../../state/api-keys.db", state, "/etc/passwd", "/proc/self/environ"} {
			if resp := s.Get("/@team/hello/read?path=" + harness.PathEscape(path)); resp.Status != 404 || !strings.HasPrefix(string(resp.Body), "error:") {
				t.Errorf("reading %s = %s", path, resp)
			}
		}
	})

	t.Run("fresh instances", func(t *testing.T) {
		s := s.In(t)
		var wg sync.WaitGroup
		got := make([]string, 2)
		for i := range got {
			wg.Go(func() { got[i] = string(s.Get(fmt.Sprintf("/@team/hello/global?set=v%d&wait=500", i)).Body) })
		}
		wg.Wait()
		if got[0] != "|v0" || got[1] != "|v1" {
			t.Errorf("two requests at once read %q", got)
		}
	})

	t.Run("logs", func(t *testing.T) {
		s := s.In(t)
		if resp := s.Get("/@team/hello/stderr?text=hello-from-wasm"); resp.Status != 200 {
			t.Fatalf("stderr = %s", resp)
		}
		var logs struct {
			Lines []struct{ Version, Stream, Text string }
		}
		resp := s.Get(s.API+"/workers/@team/hello/logs?stream=stderr", harness.WithKey(rootKey))
		if resp.Status != 200 || resp.JSON(&logs) != nil {
			t.Fatalf("logs = %s", resp)
		}
		found := false
		for _, l := range logs.Lines {
			found = found || l.Text == "hello-from-wasm" && l.Version == "1.0.0" && l.Stream == "stderr"
		}
		if !found {
			t.Errorf("the line is not in the logs: %s", resp.Body)
		}
	})

	t.Run("versions", func(t *testing.T) {
		s := s.In(t)
		if w := workers(t, s, rootKey)["@team/hello"]; w.Kinds["1.0.0"] != "wasm" {
			t.Errorf("listed kinds = %v", w.Kinds)
		}
		if resp := s.Get("/@team/hello@1.0.0/"); resp.Status != 200 {
			t.Errorf("pinned = %s", resp)
		}
		if resp := s.Do("POST", s.API+"/workers/@team/hello/1.0.0/disable", harness.WithKey(rootKey)); resp.Status != 200 {
			t.Fatalf("disable = %s", resp)
		}
		if resp := s.Get("/@team/hello/"); resp.Status != 404 || resp.ErrorCode() != "WORKER_NOT_FOUND" {
			t.Errorf("disabled = %s", resp)
		}
		if resp := s.Do("POST", s.API+"/workers/@team/hello/1.0.0/enable", harness.WithKey(rootKey)); resp.Status != 200 {
			t.Fatalf("enable = %s", resp)
		}
		if resp := s.Get("/@team/hello/"); resp.Status != 200 {
			t.Errorf("enabled again = %s", resp)
		}
	})

	t.Run("outside wasm_workers, put in place by hand", func(t *testing.T) {
		s := s.In(t)
		dir := filepath.Join(s.DataDir, "apps", "by-hand", "1.0.0")
		writeFiles(t, dir, map[string]string{"manifest.yaml": "name: by-hand\nversion: 1.0.0\nruntime: wasm\nmodule: app.wasm\n",
			"app.wasm": string(harness.TinyWasm("Content-Type: text/plain\n\nhi", "wasi_snapshot_preview1", "fd_write"))})
		harness.Eventually(t, "the hand-placed worker to be found", 10*time.Second, func() bool {
			return s.Get("/by-hand/").Status != 404
		})
		if resp := s.Get("/by-hand/"); resp.Status != 403 || resp.ErrorCode() != "WASM_WORKERS_DISABLED" {
			t.Errorf("a wasm worker outside wasm_workers = %s", resp)
		}
	})

	t.Run("refused at upload", func(t *testing.T) {
		s := s.In(t)
		for _, tc := range []struct {
			name, module, manifest string
			status                 int
			code, mentions         string
		}{
			{"foreign import", string(harness.TinyWasm("x", "env", "open_socket")), "name: '@team/bad'\nversion: 1.0.0\nruntime: wasm\nmodule: app.wasm\n",
				400, "INVALID_MODULE", "env.open_socket"},
			{"not wasm", "#!/bin/sh\necho hi\n", "name: '@team/bad'\nversion: 1.0.0\nruntime: wasm\nmodule: app.wasm\n",
				400, "INVALID_MODULE", "not a WebAssembly module"},
			{"no module", "", "name: '@team/bad'\nversion: 1.0.0\nruntime: wasm\nmodule: gone.wasm\n", 400, "INVALID_MODULE", "gone.wasm"},
			{"outside wasm_workers", string(harness.TinyWasm("Content-Type: text/plain\n\nhi", "wasi_snapshot_preview1", "fd_write")),
				"name: free\nversion: 1.0.0\nruntime: wasm\nmodule: app.wasm\n", 403, "WASM_WORKERS_DISABLED", "wasm_workers"},
		} {
			files := pkg(tc.manifest)
			if tc.module != "" {
				files = append(files, harness.File{Name: "app.wasm", Body: tc.module})
			}
			resp := s.Upload(s.API+"/workers/upload", "bad.tgz", harness.TarGz(t, files...), harness.WithKey(rootKey))
			if resp.Status != tc.status || resp.ErrorCode() != tc.code || !strings.Contains(string(resp.Body), tc.mentions) {
				t.Errorf("%s: upload = %s, want %d %s naming %q", tc.name, resp, tc.status, tc.code, tc.mentions)
			}
		}
		if _, ok := workers(t, s, rootKey)["@team/bad"]; ok {
			t.Error("a refused module was installed")
		}
	})
}

// TestWasmCompileCache restarts the runtime: its first request compiles nothing, the module
// comes from the compilation cache in state_dir, as the metric tells. The modules kept compiled
// at the stop are loaded again before the restarted runtime reports ready; one never requested
// is not.
func TestWasmCompileCache(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, Runtime: "\t\twasm_cache_size 512MiB"})
	uploadOK(t, s, "workers", "app.tgz", wasmPackage(t, "cached", "1.0.0", ""), rootKey)
	uploadOK(t, s, "workers", "idle.tgz", wasmPackage(t, "idle", "1.0.0", ""), rootKey)
	var wg sync.WaitGroup
	for range 4 { // first requests at once share one compilation
		wg.Go(func() {
			if resp := s.Get("/cached/"); resp.Status != 200 {
				t.Errorf("first request = %s", resp)
			}
		})
	}
	wg.Wait()
	const compiled, cached = `runtime_wasm_modules_ready_total{source="compiled"}`, `runtime_wasm_modules_ready_total{source="cache"}`
	if m := scrape(t, s); m[compiled] != 1 || m[cached] != 0 {
		t.Fatalf("after the first requests: compiled %v, cache %v; want 1 and 0", m[compiled], m[cached])
	}
	s.Stop()
	// Beside the module compiled above, the cache gets one no start used for 40 days and a
	// file a stopped compilation left half written: the next start prunes both.
	cacheFiles, err := filepath.Glob(filepath.Join(s.DataDir, "state", "wasm-cache", "*", "*"))
	if err != nil || len(cacheFiles) != 1 {
		t.Fatalf("the disk cache holds %v (%v), want the one module compiled", cacheFiles, err)
	}
	long := time.Now().Add(-40 * 24 * time.Hour)
	stale := []string{filepath.Join(filepath.Dir(cacheFiles[0]), strings.Repeat("ab", 32)), cacheFiles[0] + ".123.tmp"}
	for _, path := range stale {
		if err := os.WriteFile(path, []byte("compiled long ago"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, long, long); err != nil {
			t.Fatal(err)
		}
	}
	again, err := s.Relaunch(t)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, "the start to prune the disk cache", 10*time.Second, func() bool {
		left, _ := filepath.Glob(filepath.Join(filepath.Dir(cacheFiles[0]), "*"))
		return slices.Equal(left, cacheFiles)
	})
	if !strings.Contains(again.Logs(), "removed compiled WebAssembly modules") {
		t.Errorf("the pruning was not logged:\n%s", again.Logs())
	}
	if m := scrape(t, again); m[compiled] != 0 || m[cached] != 1 {
		t.Fatalf("ready after the restart: compiled %v, cache %v; want the module requested before the stop loaded from the cache, and no other", m[compiled], m[cached])
	}
	if resp := again.Get("/cached/"); resp.Status != 200 {
		t.Fatalf("after the restart = %s", resp)
	}
	if m := scrape(t, again); m[compiled] != 0 || m[cached] != 1 {
		t.Fatalf("after the restart: compiled %v, cache %v; want 0 and 1", m[compiled], m[cached])
	}
	var e wasmEcho
	if err := json.Unmarshal(again.Get("/cached/x").Body, &e); err != nil || e.Path != "/x" {
		t.Errorf("answer after the restart: %+v %v", e, err)
	}
}

// TestWasmSecrets: a WebAssembly worker's secrets arrive as environment variables, the next
// request after a change has the new value, and standard error never shows one.
func TestWasmSecrets(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_SECRETS_KEY": newSecretsKey(t)}})
	uploadOK(t, s, "workers", "app.tgz", wasmPackage(t, "sealed", "1.0.0", "env:\n  TOKEN: from-the-manifest\n"), rootKey)
	token := func() string {
		t.Helper()
		var e wasmEcho
		if resp := s.Get("/sealed/"); resp.Status != 200 || resp.JSON(&e) != nil {
			t.Fatalf("GET = %s", resp)
		}
		return e.Env["TOKEN"]
	}
	if got := token(); got != "from-the-manifest" {
		t.Fatalf("TOKEN before any secret = %q", got)
	}
	setSecret(t, s, rootKey, "sealed", "TOKEN", "first-s3cret-value")
	if got := token(); got != "first-s3cret-value" {
		t.Fatalf("TOKEN after setting the secret = %q", got)
	}
	setSecret(t, s, rootKey, "sealed", "TOKEN", "second-s3cret-value")
	if got := token(); got != "second-s3cret-value" {
		t.Fatalf("TOKEN after changing the secret = %q", got)
	}
	if resp := s.Get("/sealed/stderr?text=leaking+second-s3cret-value+here"); resp.Status != 200 {
		t.Fatalf("stderr = %s", resp)
	}
	logs := s.Get(s.API+"/workers/_/sealed/logs", harness.WithKey(rootKey))
	if logs.Status != 200 || !strings.Contains(string(logs.Body), "leaking [secret TOKEN] here") {
		t.Errorf("logs = %s, want the line with the secret replaced by its name", logs)
	}
	if strings.Contains(s.Logs(), "s3cret-value") || strings.Contains(string(logs.Body), "s3cret-value") {
		t.Error("a secret's value is in the logs")
	}
}

// TestWasmEviction keeps one compiled module in memory (wasm_compiled_memory at its least): a
// module dropped for another is read back from the compilation cache when next requested, not
// compiled again, and a kept one is neither.
func TestWasmEviction(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: "\t\twasm_compiled_memory 1"})
	for _, name := range []string{"a", "b"} {
		module := harness.TinyWasm("Content-Type: text/plain\n\n"+name, "wasi_snapshot_preview1", "fd_write")
		uploadOK(t, s, "workers", name+".tgz", harness.TarGz(t, pkg("name: "+name+"\nversion: 1.0.0\nruntime: wasm\nmodule: app.wasm\n",
			harness.File{Name: "app.wasm", Body: string(module)})...), rootKey)
	}
	const compiled, cached = `runtime_wasm_modules_ready_total{source="compiled"}`, `runtime_wasm_modules_ready_total{source="cache"}`
	for i, step := range []struct {
		path             string
		compiled, cached float64
	}{
		{"/a/", 1, 0}, // compiled
		{"/a/", 1, 0}, // kept
		{"/b/", 2, 0}, // compiled; a dropped
		{"/a/", 2, 1}, // from the cache; b dropped
		{"/a/", 2, 1}, // kept
	} {
		if resp := s.Get(step.path); resp.Status != 200 || string(resp.Body) != step.path[1:2] {
			t.Fatalf("step %d: GET %s = %s", i, step.path, resp)
		}
		if m := scrape(t, s); m[compiled] != step.compiled || m[cached] != step.cached {
			t.Fatalf("step %d, after GET %s: compiled %v, cache %v; want %v and %v", i, step.path, m[compiled], m[cached], step.compiled, step.cached)
		}
	}
}

// TestWasmReservedNames is the attack of a visitor overriding a WebAssembly worker's secret:
// a secret or a manifest env named like a CGI variable (HTTP_*, REMOTE_ADDR, …) would be
// replaced by the visitor's header line or by the request. The secrets API refuses such
// names (400 INVALID_SECRET_NAME), and so does the upload for env (400 INVALID_MANIFEST), for
// a process worker too; the instance's CGI variables are the runtime's.
func TestWasmReservedNames(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_SECRETS_KEY": newSecretsKey(t)}})
	uploadOK(t, s, "workers", "app.tgz", wasmPackage(t, "sealed", "1.0.0", ""), rootKey)
	for _, name := range []string{"HTTP_X_TOKEN", "HTTP_AUTHORIZATION", "REMOTE_ADDR", "SERVER_NAME", "PATH_INFO", "CONTENT_TYPE", "REMOTE_USER", "AUTH_TYPE"} {
		resp := s.Do("PUT", secretsPath(s, "sealed", name), harness.WithKey(rootKey), harness.WithOrigin(""), harness.WithJSON(api.SecretValue{Value: "s3cret-value"}))
		if resp.Status != 400 || resp.ErrorCode() != "INVALID_SECRET_NAME" || !strings.Contains(string(resp.Body), name+" is set by the runtime") {
			t.Errorf("secret %s = %s, want 400 INVALID_SECRET_NAME naming it", name, resp)
		}
		for _, archive := range [][]byte{wasmPackage(t, "spoofed", "1.0.0", "env: {"+name+": x}\n"), testWorkerArchive(t, "spoofed", "1.0.0", "env: {"+name+": x}\n")} {
			resp := s.Upload(s.API+"/workers/upload", "app.tgz", archive, harness.WithKey(rootKey))
			if resp.Status != 400 || resp.ErrorCode() != "INVALID_MANIFEST" || !strings.Contains(string(resp.Body), "env "+name+" is set by the runtime") {
				t.Errorf("upload with env %s = %s, want 400 INVALID_MANIFEST naming it", name, resp)
			}
		}
	}
	setSecret(t, s, rootKey, "sealed", "X_TOKEN", "s3cret-value")
	var e wasmEcho
	if resp := s.Get("/sealed/", harness.WithHeader("X-Token", "visitor"), harness.WithHeader("X-Real-Ip", "6.6.6.6")); resp.Status != 200 || resp.JSON(&e) != nil {
		t.Fatalf("GET = %s", resp)
	}
	if e.Env["X_TOKEN"] != "s3cret-value" || e.Env["HTTP_X_TOKEN"] != "visitor" || e.Env["HTTP_X_REAL_IP"] != "127.0.0.1" || e.Env["REMOTE_ADDR"] != "127.0.0.1" {
		t.Errorf("X_TOKEN %q, HTTP_X_TOKEN %q, HTTP_X_REAL_IP %q, REMOTE_ADDR %q", e.Env["X_TOKEN"], e.Env["HTTP_X_TOKEN"], e.Env["HTTP_X_REAL_IP"], e.Env["REMOTE_ADDR"])
	}
}
