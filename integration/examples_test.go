package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// TestExamples packages the example workers as examples/README.md says, uploads them and
// checks how they are served.
func TestExamples(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	work := t.TempDir()
	static := filepath.Join(work, "static-app.tgz")
	runIn(t, "..", "tar", "-czf", static, "-C", "examples/static-app", ".")
	for _, archive := range []string{static, helloProcess(t, work), helloWasm(t, work)} {
		data, err := os.ReadFile(archive)
		if err != nil {
			t.Fatal(err)
		}
		uploadOK(t, s, "workers", filepath.Base(archive), data, rootKey)
	}
	page := s.Get("/hello-static/some/client/route")
	if page.Status != 200 || !strings.Contains(body(page), `<head><base href="/hello-static/">`) || !strings.Contains(body(page), "Hello from a static worker") {
		t.Fatalf("static example = %s", page)
	}
	if css := s.Get("/hello-static/assets/style.css"); css.Status != 200 || !strings.HasPrefix(css.Header.Get("Content-Type"), "text/css") {
		t.Fatalf("static example asset = %s", css)
	}
	checkHelloProcess(t, s)
	checkHelloWasm(t, s)
	// The TypeScript app, in the engine the server found on PATH (after the process example,
	// whose start is counted): its two routes and its fetch.
	tsApp := filepath.Join(work, "ts-app.tgz")
	runIn(t, "..", "tar", "-czf", tsApp, "-C", "examples/ts-app", ".")
	ts, err := os.ReadFile(tsApp)
	if err != nil {
		t.Fatal(err)
	}
	uploadOK(t, s, "workers", "ts-app.tgz", ts, rootKey)
	for path, want := range map[string]string{"/ts-app/hello/you": "Hello, you, from TypeScript\n", "/ts-app/api/status": `{"ok":true,"started":"`,
		"/ts-app/index.ts": "No route for /index.ts"} {
		if resp := s.Get(path); !strings.HasPrefix(body(resp), want) {
			t.Errorf("ts-app %s = %s, want it to start %q", path, resp, want)
		}
	}

	// The example plugins: upload, reload, and see their routes, menu and hook.
	for _, name := range []string{"hello-plugin", "header-plugin"} {
		archive := filepath.Join(work, name+".tgz")
		runIn(t, "..", "tar", "-czf", archive, "-C", "examples/"+name, ".")
		data, err := os.ReadFile(archive)
		if err != nil {
			t.Fatal(err)
		}
		uploadOK(t, s, "plugins", name+".tgz", data, rootKey)
	}
	if out := reload(t, s); len(out.Plugins) != 2 || len(out.Failed) != 0 {
		t.Fatalf("reloading the example plugins = %+v", out)
	}
	greeting := s.Get("/hello-plugin/api/greeting")
	if greeting.Status != 200 || body(greeting) != `{"greeting":"Hello from a plugin"}` || greeting.Header.Get("X-Powered-By") != "the runtime" {
		t.Fatalf("plugin route = %s (X-Powered-By %q)", greeting, greeting.Header.Get("X-Powered-By"))
	}
	if page := s.Get("/hello-plugin/"); page.Status != 200 || !strings.Contains(body(page), "served by Caddy's file_server") {
		t.Fatalf("plugin page = %s", page)
	}
	if page := s.Get("/hello-static/", harness.WithKey(rootKey)); page.Header.Get("X-Powered-By") != "" {
		t.Fatal("a request with a header key went through the hook")
	}
	l := loaded(t, s, rootKey)
	if len(l) != 2 || l[1].Name != "hello-plugin" || len(l[1].Menus) != 1 || l[1].Menus[0].Path != "/hello-plugin/" {
		t.Fatalf("loaded example plugins = %+v", l)
	}
}

// TestExamplesIsolatedNetwork: the process example serves on the socket it is handed when
// workers run in a network of their own.
func TestExamplesIsolatedNetwork(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("worker_network isolated needs root")
	}
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: "worker_network isolated"})
	data, err := os.ReadFile(helloProcess(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	uploadOK(t, s, "workers", "hello-process.tgz", data, rootKey)
	checkHelloProcess(t, s)
}

// runIn runs a command in dir, with cgo off as examples/README.md builds.
func runIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
}

// helloProcess builds and packages the process example in work as examples/README.md says,
// and returns the archive's path.
func helloProcess(t *testing.T, work string) string {
	t.Helper()
	runIn(t, "../examples/hello-process", "go", "build", "-o", filepath.Join(work, "hello"), ".")
	manifest, err := os.ReadFile("../examples/hello-process/manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "manifest.yaml"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(work, "hello-process.tgz")
	runIn(t, work, "tar", "-czf", archive, "manifest.yaml", "hello")
	return archive
}

// helloWasm builds and packages the WebAssembly example in work as examples/README.md says,
// and returns the archive's path.
func helloWasm(t *testing.T, work string) string {
	t.Helper()
	dir := filepath.Join(work, "hello-wasm")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "app.wasm"), ".")
	cmd.Dir = "../examples/hello-wasm"
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the wasm example: %v\n%s", err, out)
	}
	for _, name := range []string{"manifest.yaml", "greeting.txt"} {
		b, err := os.ReadFile(filepath.Join("../examples/hello-wasm", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	archive := filepath.Join(work, "hello-wasm.tgz")
	runIn(t, dir, "tar", "-czf", archive, "manifest.yaml", "app.wasm", "greeting.txt")
	return archive
}

// checkHelloWasm checks the uploaded WebAssembly example's answers and its log line.
func checkHelloWasm(t *testing.T, s *harness.Server) {
	t.Helper()
	var hello map[string]string
	resp := s.Get("/hello-wasm/anything?x=1", harness.WithHeader("X-Request-Id", "ex-2"))
	if resp.Status != 200 || resp.JSON(&hello) != nil {
		t.Fatalf("wasm example = %s", resp)
	}
	if hello["message"] != "Hello from a WebAssembly worker" || hello["path"] != "/anything" || hello["base"] != "/hello-wasm" ||
		hello["query"] != "x=1" || hello["requestId"] != "ex-2" {
		t.Fatalf("wasm example answered %v", hello)
	}
	if resp := s.Get("/hello-wasm@1.0.0/anything"); resp.Status != 200 {
		t.Fatalf("wasm example, pinned = %s", resp)
	}
	if resp := s.Do("POST", "/hello-wasm/echo", harness.WithBody("text/plain", []byte("ping"))); resp.Status != 201 || body(resp) != "{\"echo\":\"ping\"}\n" {
		t.Fatalf("wasm example echo = %s", resp)
	}
	if resp := s.Get("/hello-wasm/file?name=greeting.txt"); resp.Status != 200 || !strings.Contains(body(resp), "Hello from a file") {
		t.Fatalf("wasm example file = %s", resp)
	}
	if resp := s.Get("/hello-wasm/file?name=../../../state/api-keys.db"); resp.Status != 404 {
		t.Fatalf("wasm example reading outside its folder = %s", resp)
	}
	harness.Eventually(t, "the wasm example's log line", 5*time.Second, func() bool { return s.LogCount("hello: GET /anything", 1) >= 1 })
}

// checkHelloProcess checks the uploaded process example's answer and that its start was logged.
func checkHelloProcess(t *testing.T, s *harness.Server) {
	t.Helper()
	var hello map[string]string
	resp := s.Get("/hello-process/anything", harness.WithHeader("X-Request-Id", "ex-1"))
	if resp.Status != 200 || resp.JSON(&hello) != nil {
		t.Fatalf("process example = %s", resp)
	}
	if hello["message"] != "Hello from a process worker" || hello["path"] != "/anything" || hello["base"] != "/hello-process" || hello["requestId"] != "ex-1" {
		t.Fatalf("process example answered %v", hello)
	}
	if s.LogCount("worker started", 1) != 1 {
		t.Fatal("the process example's start was not logged")
	}
}
