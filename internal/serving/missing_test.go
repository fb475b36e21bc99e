package serving

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/caddy-runtime/runtime/packages"
)

// TestMissing: a request for a worker this instance does not serve asks Missing, and is
// resolved again when Missing says the worker may be here now; a served worker asks nothing.
func TestMissing(t *testing.T) {
	dir := t.TempDir()
	c := packages.NewCatalog(packages.WorkerLayout, []string{dir}, packages.DefaultLimits)
	t.Cleanup(c.Close)
	install := func(name string) {
		t.Helper()
		v := filepath.Join(dir, name, "1.0.0")
		if err := os.MkdirAll(v, 0o755); err != nil {
			t.Fatal(err)
		}
		for file, body := range map[string]string{"manifest.yaml": "name: " + name + "\nversion: 1.0.0\n", "index.html": name} {
			if err := os.WriteFile(filepath.Join(v, file), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		c.Forget()
	}
	var asked []string
	s := New(Options{Workers: c, Missing: func(_ context.Context, name string) bool {
		asked = append(asked, name)
		if name == "late" {
			install(name) // as a pass that brought it would
			return true
		}
		return false
	}})
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		if answer := s.Serve(rec, httptest.NewRequest("GET", path, nil)); answer != nil {
			return answer.Status, answer.Code
		}
		return rec.Code, rec.Body.String()
	}
	if status, body := get("/late/index.html"); status != 200 || body != "late" {
		t.Errorf("a worker Missing brought = %d %q", status, body)
	}
	if status, code := get("/nobody/"); status != 404 || code != CodeWorkerNotFound {
		t.Errorf("a worker nobody uploaded = %d %s", status, code)
	}
	if status, _ := get("/late/index.html"); status != 200 {
		t.Errorf("the worker once here = %d", status)
	}
	if want := []string{"late", "nobody"}; !slices.Equal(asked, want) {
		t.Errorf("Missing was asked about %v, want %v", asked, want)
	}
}
