package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestClusterPublish grows a single instance into a cluster: a runtime in local mode gets a
// worker and a plugin; stopped, its key store moved to the primary with keystore-migrate, it
// publishes them with caddy runtime cluster publish (a dry run first, which writes nothing;
// again afterwards, which publishes nothing more); then an instance started on empty folders
// converges and serves the worker and the plugin, and so does the published instance, on the
// trees it had (converged already, it installs nothing).
func TestClusterPublish(t *testing.T) {
	t.Parallel()
	primary, s3 := testkit.StartSqld(t), testkit.StartS3(t)
	bucket := s3.Bucket(t, "units")
	dir := t.TempDir()
	single := harness.Start(t, harness.Config{Dir: dir, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	site := uploadOK(t, single, "workers", "site.tgz", harness.TarGz(t, pkg("name: site\nversion: 1.0.0\nentrypoint: index.html\n",
		harness.File{Name: "index.html", Body: "<h1>published site</h1>"}, harness.File{Name: "assets/", Type: '5'},
		harness.File{Name: "assets/app.js", Body: "console.log(1)"})...), rootKey)
	uploadOK(t, single, "plugins", "hello.tgz", harness.TarGz(t, pkg("name: hello\nversion: 1.0.0\nbase: /hello\n"+respond("hello from the cluster"))...), rootKey)
	single.Stop()

	env := map[string]string{"RUNTIME_AUTH_DB_SYNC_URL": primary.URL, "RUNTIME_S3_SECRET_ACCESS_KEY": s3.SecretKey}
	out, err := harness.RunCommand(t, dir, env, "runtime", "keystore-migrate")
	if err != nil {
		t.Fatalf("keystore-migrate: %v\n%s", err, out)
	}
	app := storeRuntime(primary, s3, bucket)
	config := fmt.Sprintf("{\n\tadmin off\n\truntime {\n\t\t%s\n\t}\n}\n:0 {\n\truntime\n}\n", app)
	if err := os.WriteFile(filepath.Join(dir, "Caddyfile.cluster"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	publish := func(args ...string) string {
		t.Helper()
		out, err := harness.RunCommand(t, dir, env, append([]string{"runtime", "cluster", "publish", "--config", "Caddyfile.cluster", "--adapter", "caddyfile"}, args...)...)
		if err != nil {
			t.Fatalf("cluster publish %v: %v\n%s", args, err, out)
		}
		return out
	}
	objects := func() []os.DirEntry {
		entries, _ := os.ReadDir(filepath.Dir(s3.Object(bucket, "cluster-a/sha256/x")))
		return entries
	}

	out = publish("--dry-run")
	for _, want := range []string{"would publish plugin hello@1.0.0", "would publish worker site@1.0.0", "2 would publish, 0 already published, 0 conflicts, 0 failed"} {
		if !strings.Contains(out, want) {
			t.Fatalf("dry run printed:\n%s\nwant %q", out, want)
		}
	}
	if len(objects()) > 0 {
		t.Fatalf("the dry run stored %d objects", len(objects()))
	}
	out = publish()
	if !strings.Contains(out, "published worker site@1.0.0 (sha256 ") || !strings.Contains(out, "2 published, 0 already published, 0 conflicts, 0 failed") {
		t.Fatalf("publish printed:\n%s", out)
	}
	if len(objects()) != 2 {
		t.Fatalf("the store holds %d objects, want 2", len(objects()))
	}
	if out := publish("--json"); !strings.Contains(out, `"published": []`) || !strings.Contains(out, `"recorded": []`) || !strings.Contains(out, `"conflicts": []`) {
		t.Fatalf("publishing again printed:\n%s\nwant nothing published", out)
	}

	trees := map[string]os.FileInfo{}
	for _, tree := range []string{"apps/site/1.0.0", "plugins/hello"} {
		if trees[tree], err = os.Stat(filepath.Join(dir, "data", filepath.FromSlash(tree))); err != nil {
			t.Fatal(err)
		}
	}
	for name, d := range map[string]string{"a new instance on empty folders": "", "the published instance": dir} {
		s := harness.Start(t, harness.Config{App: app, Dir: d, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_S3_SECRET_ACCESS_KEY": s3.SecretKey}})
		testkit.EventuallyNil(t, 30*time.Second, func() error {
			if resp := s.Get("/site/"); resp.Status != 200 || !strings.Contains(string(resp.Body), "published site") {
				return fmt.Errorf("%s: GET /site/ = %s", name, resp)
			}
			if resp := s.Get("/hello/"); resp.Status != 200 || string(resp.Body) != "hello from the cluster" {
				return fmt.Errorf("%s: GET /hello/ = %s", name, resp)
			}
			return nil
		})
		if w := workers(t, s, rootKey)["site"]; len(w.Versions) != 1 || w.Versions[0] != site.Version || w.Source != "uploaded" {
			t.Fatalf("%s: workers = %+v", name, w)
		}
		if d == dir {
			for tree, before := range trees {
				if after, err := os.Stat(filepath.Join(dir, "data", filepath.FromSlash(tree))); err != nil || !os.SameFile(before, after) {
					t.Errorf("the published instance replaced its tree %s (%v)", tree, err)
				}
			}
		}
		s.Stop()
	}
}
