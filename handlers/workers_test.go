package handlers

import (
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/packages"
)

// TestListWorkersServedAndKinds checks the version each worker serves (the highest enabled;
// none when all are disabled), its state, and each version's kind.
func TestListWorkersServedAndKinds(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"apps/app/1.0.0/manifest.yaml":   "name: app\nversion: 1.0.0\nentrypoint: index.html\n",
		"apps/app/1.2.0/manifest.yaml":   "name: app\nversion: 1.2.0\ncommand: [./server]\n",
		"apps/app/2.0.0/manifest.yaml":   "name: app\nversion: 2.0.0\nenabled: false\n",
		"apps/off/1.0.0/manifest.yaml":   "name: off\nversion: 1.0.0\nenabled: false\n",
		"apps/files/latest/package.json": `{"name": "files"}`,
		"apps/files/1.0.0/package.json":  `{"name": "files", "version": "1.0.0"}`,
	})
	a, v := testAPI(t, Options{RootKey: fileTestRoot,
		Workers: packages.NewCatalog(packages.WorkerLayout, []string{filepath.Join(dir, "apps")}, packages.DefaultLimits)})
	req := httptest.NewRequest("GET", "/api/workers", nil)
	req.Header.Set(APIKeyHeader, fileTestRoot)
	var list []api.WorkerRecord
	if err := json.NewDecoder(serve(t, a, v, req).Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	got := map[string]api.WorkerRecord{}
	for _, w := range list {
		got[w.Name] = w
	}
	for _, tt := range []struct {
		name, served, state string
		kinds               map[string]string
	}{
		// app's process version was never checked here and has no process: not started.
		{"app", "1.2.0", "not-started", map[string]string{"1.0.0": "spa", "1.2.0": "process", "2.0.0": "static"}},
		{"off", "", "disabled", map[string]string{"1.0.0": "static"}},
		{"files", "latest", "serving", map[string]string{"1.0.0": "static", "latest": "static"}},
	} {
		w := got[tt.name]
		if w.Served != tt.served || w.State != tt.state {
			t.Errorf("%s serves %q, state %q; want %q, %q", tt.name, w.Served, w.State, tt.served, tt.state)
		}
		for version, kind := range tt.kinds {
			if w.Kinds[version] != kind {
				t.Errorf("%s %s is %q, want %q", tt.name, version, w.Kinds[version], kind)
			}
		}
	}
}

// TestWorkerStatesDocumented: the state enum of the worker record (the OpenAPI document and
// the cpanel's types come from it) names exactly the states workers.StateOf gives.
func TestWorkerStatesDocumented(t *testing.T) {
	f, _ := reflect.TypeFor[api.WorkerRecord]().FieldByName("State")
	var want []string
	for _, s := range workers.WorkerStates {
		want = append(want, string(s))
	}
	if got := strings.Split(f.Tag.Get("enum"), ","); !slices.Equal(got, want) {
		t.Errorf("WorkerRecord.State's enum is %v, want %v", got, want)
	}
}
