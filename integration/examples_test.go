package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// TestExamples packages the example workers as examples/README.md says, uploads them and
// checks how they are served.
func TestExamples(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	work := t.TempDir()
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	static := filepath.Join(work, "static-app.tgz")
	run("..", "tar", "-czf", static, "-C", "examples/static-app", ".")
	run("../examples/hello-process", "go", "build", "-o", filepath.Join(work, "hello"), ".")
	manifest, err := os.ReadFile("../examples/hello-process/manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "manifest.yaml"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	proc := filepath.Join(work, "hello-process.tgz")
	run(work, "tar", "-czf", proc, "manifest.yaml", "hello")

	for _, archive := range []string{static, proc} {
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

	// The example plugins: upload, reload, and see their routes, menu and hook.
	for _, name := range []string{"hello-plugin", "header-plugin"} {
		archive := filepath.Join(work, name+".tgz")
		run("..", "tar", "-czf", archive, "-C", "examples/"+name, ".")
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
