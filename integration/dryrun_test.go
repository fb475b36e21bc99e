package integration

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

type dryRun struct {
	Success, DryRun bool
	Data            struct {
		Worker, Plugin installed
		Replaces       bool
		Plan           struct {
			Load   []struct{ Name, Version string }
			Failed []struct{ Name, Error string }
		}
	}
}

// contents reads every file under dir with its bytes, and every folder, to prove a dry run
// changed nothing.
func contents(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		var body []byte
		if d.Type().IsRegular() {
			if body, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		out[p] = info.Mode().String() + " " + string(body)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func dryRunOK(t *testing.T, s *harness.Server, surface string, data []byte, key string) dryRun {
	t.Helper()
	resp := s.Upload(s.API+"/"+surface+"/upload?dryRun=1", "a.tgz", data, harness.WithKey(key))
	var out dryRun
	if resp.Status != 200 || resp.JSON(&out) != nil || !out.Success || !out.DryRun {
		t.Fatalf("dry run = %s", resp)
	}
	return out
}

// TestDryRunUpload checks that a dry run answers what the upload would do and writes
// nothing: a new worker, the same version again, a namespace refusal, and plugins whose load
// plan the upload would change.
func TestDryRunUpload(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	apps, pluginDir := filepath.Join(s.DataDir, "apps"), filepath.Join(s.DataDir, "plugins")
	uploadOK(t, s, "workers", "other.tgz", harness.TarGz(t, pkg("name: other\nversion: 1.0.0\n")...), rootKey)
	app := harness.TarGz(t, pkg("name: app\nversion: 1.2.0\n", harness.File{Name: "index.html", Body: "<p>hi"}, harness.File{Name: "js/a.js", Body: "a"})...)

	before := contents(t, s.DataDir)
	dry := dryRunOK(t, s, "workers", app, rootKey)
	if after := contents(t, s.DataDir); !reflect.DeepEqual(before, after) {
		t.Fatalf("a dry run changed the data folder:\nbefore %v\nafter  %v", before, after)
	}
	if _, ok := workers(t, s, rootKey)["app"]; ok {
		t.Fatal("a dry run installed the worker")
	}
	real := uploadOK(t, s, "workers", "a.tgz", app, rootKey)
	if dry.Data.Worker != real || dry.Data.Replaces || real.Files != 3 {
		t.Fatalf("dry run said %+v (replaces %v), the upload did %+v", dry.Data.Worker, dry.Data.Replaces, real)
	}
	before = contents(t, s.DataDir)
	if again := dryRunOK(t, s, "workers", app, rootKey); !again.Data.Replaces || again.Data.Worker != real {
		t.Fatalf("a dry run of an installed version = %+v", again.Data)
	}
	if after := contents(t, s.DataDir); !reflect.DeepEqual(before, after) {
		t.Fatal("a dry run of an installed version changed the data folder")
	}

	// Namespaces and permissions are checked as for the upload.
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "editor", "namespaces": []string{"@team"}}).Secret
	viewer := s.CreateKey(rootKey, map[string]any{"name": "viewer", "role": "viewer"}).Secret
	for _, tt := range []struct {
		key    string
		status int
		code   string
	}{{team, 403, "NAMESPACE_DENIED"}, {viewer, 403, "PERMISSION_DENIED"}} {
		for _, path := range []string{"/workers/upload?dryRun=1", "/workers/upload"} {
			if resp := s.Upload(s.API+path, "a.tgz", app, harness.WithKey(tt.key)); resp.Status != tt.status || resp.ErrorCode() != tt.code {
				t.Errorf("%s = %s, want %d %s", path, resp, tt.status, tt.code)
			}
		}
	}
	if resp := s.Upload(s.API+"/workers/upload?dryRun=yes", "a.tgz", app, harness.WithKey(rootKey)); resp.Status != 400 || resp.ErrorCode() != "BAD_REQUEST" {
		t.Errorf("dryRun=yes = %s", resp)
	}
	// A misspelt flag is refused, not taken for a real upload.
	other := harness.TarGz(t, pkg("name: typo\nversion: 1.0.0\n")...)
	for _, query := range []string{"dryrun=1", "DRYRUN=true", "dryRun=1&force=1", "dry-run=1"} {
		resp := s.Upload(s.API+"/workers/upload?"+query, "a.tgz", other, harness.WithKey(rootKey))
		if resp.Status != 400 || resp.ErrorCode() != "BAD_REQUEST" || !strings.Contains(string(resp.Body), "dryRun") {
			t.Errorf("upload?%s = %s, want 400 BAD_REQUEST naming dryRun", query, resp)
		}
	}
	if _, ok := workers(t, s, rootKey)["typo"]; ok {
		t.Fatal("an upload with a misspelt dryRun installed the worker")
	}

	// A plugin: the plan the next reload would make, with the plugin in it.
	uploadOK(t, s, "plugins", "base.tgz", harness.TarGz(t, pkg("name: base\nversion: 1.0.0\n")...), rootKey)
	needy := harness.TarGz(t, pkg("name: needy\nversion: 0.1.0\ndependencies: [missing]\n")...)
	user := harness.TarGz(t, pkg("name: user\nversion: 2.0.0\ndependencies: [base]\n")...)
	before = contents(t, pluginDir)
	d := dryRunOK(t, s, "plugins", needy, rootKey)
	if d.Data.Plugin.Name != "needy" || d.Data.Plugin.Version != "0.1.0" || d.Data.Replaces ||
		len(d.Data.Plan.Failed) != 1 || d.Data.Plan.Failed[0].Name != "needy" || d.Data.Plan.Failed[0].Error != "requires missing, which is missing" ||
		len(d.Data.Plan.Load) != 1 || d.Data.Plan.Load[0].Name != "base" {
		t.Fatalf("dry run of a plugin with a missing dependency = %+v", d.Data)
	}
	d = dryRunOK(t, s, "plugins", user, rootKey)
	if len(d.Data.Plan.Failed) != 0 || len(d.Data.Plan.Load) != 2 || d.Data.Plan.Load[0].Name != "base" || d.Data.Plan.Load[1] != (struct{ Name, Version string }{"user", "2.0.0"}) {
		t.Fatalf("dry run of a plugin with its dependency = %+v", d.Data)
	}
	if after := contents(t, pluginDir); !reflect.DeepEqual(before, after) {
		t.Fatal("a plugin dry run changed the plugin folder")
	}
	// The real upload and reload agree with the dry run.
	uploadOK(t, s, "plugins", "needy.tgz", needy, rootKey)
	r := reload(t, s)
	if len(r.Failed) != 1 || r.Failed[0].Name != "needy" || r.Failed[0].Error != "requires missing, which is missing" {
		t.Fatalf("reload after the upload = %+v", r)
	}
	for _, dir := range []string{apps, pluginDir} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".runtime-tmp-") {
				t.Errorf("%s holds %s", dir, e.Name())
			}
		}
	}
}
