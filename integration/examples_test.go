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
}
