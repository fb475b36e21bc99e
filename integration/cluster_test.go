package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// The cluster tests (issue 24): runtime instances sharing one sqld primary (key_store sync,
// which also holds the desired state) and one versitygw bucket (package_store s3), each with
// its own folders. Each test owns its cluster, so the tests run side by side; within a test,
// subtests that disturb nothing share the instances.

// converge bounds the waits for a change to reach every instance: one pull interval (1 s)
// and an install, with room for a busy machine. The benchmarks measure the real delay.
const converge = 15 * time.Second

// startCluster starts a cluster's primary and store; every instance takes the root key.
func startCluster(t *testing.T, interval time.Duration) *harness.Cluster {
	t.Helper()
	return harness.StartCluster(t, harness.ClusterOptions{Interval: interval, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
}

// siteArchive is a static worker whose index page says body.
func siteArchive(t *testing.T, name, version, body string) []byte {
	t.Helper()
	return harness.TarGz(t, pkg(fmt.Sprintf("name: '%s'\nversion: %s\nentrypoint: index.html\n", name, version),
		harness.File{Name: "index.html", Body: body})...)
}

// answer sends GET path and checks the status and, for a 200, the body; it never fails the
// test, so conditions polled on several instances can use it.
func answer(s *harness.Server, path string, status int, body string) error {
	resp, err := s.Send("GET", path)
	if err != nil {
		return err
	}
	if resp.Status != status || status == 200 && string(resp.Body) != body {
		return fmt.Errorf("GET %s = %s, want %d %q", path, resp, status, body)
	}
	return nil
}

// serving is the condition that GET path answers 200 with body.
func serving(path, body string) func(*harness.Server) error {
	return func(s *harness.Server) error { return answer(s, path, 200, body) }
}

// notServing is the condition that GET path answers 404.
func notServing(path string) func(*harness.Server) error {
	return func(s *harness.Server) error { return answer(s, path, 404, "") }
}

// listed is the condition that GET workers (as the root key, which triggers no pull) lists
// name with version installed, enabled or not; with version "" that name is not listed.
func listed(name, version string, enabled bool) func(*harness.Server) error {
	return func(s *harness.Server) error {
		resp, err := s.Send("GET", s.API+"/workers", harness.WithKey(rootKey))
		if err != nil {
			return err
		}
		var list []workerRecord
		if resp.Status != 200 || resp.JSON(&list) != nil {
			return fmt.Errorf("GET workers = %s", resp)
		}
		i := slices.IndexFunc(list, func(w workerRecord) bool { return w.Name == name })
		switch {
		case version == "" && i < 0:
			return nil
		case version == "":
			return fmt.Errorf("lists %s: %+v", name, list[i])
		case i < 0:
			return fmt.Errorf("does not list %s", name)
		case !slices.Contains(list[i].Versions, version):
			return fmt.Errorf("lists %s without %s: %v", name, version, list[i].Versions)
		case slices.Contains(list[i].DisabledVersions, version) == enabled:
			return fmt.Errorf("lists %s@%s with disabled versions %v, want enabled %v", name, version, list[i].DisabledVersions, enabled)
		}
		return nil
	}
}

// readyStatus is the status of the readiness probe.
func readyStatus(s *harness.Server) (int, error) {
	resp, err := s.Send("GET", s.API+"/health/ready")
	if err != nil {
		return 0, err
	}
	return resp.Status, nil
}

// served describes what an instance serves of its uploaded workers: each listed with its
// versions and disabled ones, and the answer to its unpinned and every pinned path.
func served(s *harness.Server) (string, error) {
	resp, err := s.Send("GET", s.API+"/workers", harness.WithKey(rootKey))
	if err != nil {
		return "", err
	}
	var list []workerRecord
	if resp.Status != 200 || resp.JSON(&list) != nil {
		return "", fmt.Errorf("GET workers = %s", resp)
	}
	var out strings.Builder
	for _, w := range list {
		if w.Source != "uploaded" {
			continue
		}
		fmt.Fprintf(&out, "%s versions %v disabled %v\n", w.Name, w.Versions, w.DisabledVersions)
		paths := []string{"/" + w.Name + "/"}
		for _, v := range w.Versions {
			paths = append(paths, "/"+w.Name+"@"+v+"/")
		}
		for _, p := range paths {
			resp, err := s.Send("GET", p)
			if err != nil {
				return "", err
			}
			if resp.Status == 200 {
				fmt.Fprintf(&out, "  %s: %s\n", p, resp)
			} else { // an error's body may name the request
				fmt.Fprintf(&out, "  %s: %d\n", p, resp.Status)
			}
		}
	}
	return out.String(), nil
}

// instanceID is the id an instance keeps in its state folder.
func instanceID(t *testing.T, s *harness.Server) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.DataDir, "state", "instance-id"))
	if err != nil {
		t.Fatalf("%s's instance id: %v", s.Name(), err)
	}
	return strings.TrimSpace(string(b))
}

// toggle posts enable or disable of a worker version and answers the change it created.
func toggle(t *testing.T, s *harness.Server, name, version, verb string) int64 {
	t.Helper()
	resp := s.Do("POST", s.API+"/workers/_/"+name+"/"+version+"/"+verb, harness.WithKey(rootKey), harness.WithOrigin(""))
	var out struct{ Data struct{ Change int64 } }
	if resp.Status != 200 || resp.JSON(&out) != nil {
		t.Fatalf("%s %s@%s on %s = %s", verb, name, version, s.Name(), resp)
	}
	if out.Data.Change == 0 {
		t.Errorf("%s %s@%s on %s answered no change number: %s", verb, name, version, s.Name(), resp)
	}
	return out.Data.Change
}

// TestClusterServing runs three instances on one primary and one store: what is uploaded,
// disabled, enabled, deleted or reloaded on one of them reaches the others; the file manager
// refuses writes to uploaded units; one archive is one object; deploy --wait waits for all.
func TestClusterServing(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0)
	all := c.Start(t, "A", "B", "C")

	t.Run("upload reaches every instance", func(t *testing.T) {
		t.Parallel()
		g := all.In(t)
		a := g[0]
		start := time.Now()
		up := uploadOK(t, a, "workers", "hello.tgz", siteArchive(t, "hello", "1.0.0", "hello v1"), rootKey)
		answered := time.Since(start)
		if up.Change == 0 {
			t.Errorf("the upload's answer has no change number: %+v", up)
		}
		if err := answer(a, "/hello/", 200, "hello v1"); err != nil {
			t.Fatalf("the instance that took the upload, at once: %v", err)
		}
		// Polled through the listing, so no request for the worker makes an instance pull
		// early: this is the interval's doing.
		g.Each(t, converge, listed("hello", "1.0.0", true))
		t.Logf("every instance listed it %v after the upload's answer (the upload took %v; interval %v)", time.Since(start)-answered, answered, c.Interval)
		g.Each(t, converge, serving("/hello/", "hello v1"))
		g.Each(t, converge, serving("/hello@1.0.0/", "hello v1"))
	})

	t.Run("disable and enable on one reach the others", func(t *testing.T) {
		t.Parallel()
		g := all.In(t)
		a, b, cc := g[0], g[1], g[2]
		uploadOK(t, a, "workers", "flip.tgz", siteArchive(t, "flip", "1.0.0", "flip"), rootKey)
		g.Each(t, converge, serving("/flip/", "flip"))

		toggle(t, b, "flip", "1.0.0", "disable")
		if err := answer(b, "/flip/", 404, ""); err != nil {
			t.Fatalf("B, at once after its disable: %v", err)
		}
		harness.Group{a, cc}.Each(t, converge, notServing("/flip/"))
		g.Each(t, converge, listed("flip", "1.0.0", false))

		toggle(t, cc, "flip", "1.0.0", "enable")
		g.Each(t, converge, serving("/flip/", "flip"))
		g.Each(t, converge, listed("flip", "1.0.0", true))
	})

	t.Run("delete on one reaches the others", func(t *testing.T) {
		t.Parallel()
		g := all.In(t)
		a, cc := g[0], g[2]
		uploadOK(t, a, "workers", "gone1.tgz", siteArchive(t, "gone", "1.0.0", "gone v1"), rootKey)
		uploadOK(t, a, "workers", "gone2.tgz", siteArchive(t, "gone", "2.0.0", "gone v2"), rootKey)
		g.Each(t, converge, serving("/gone@1.0.0/", "gone v1"))
		g.Each(t, converge, serving("/gone@2.0.0/", "gone v2"))

		if resp := cc.Do("DELETE", cc.API+"/workers/_/gone/2.0.0", harness.WithKey(rootKey), harness.WithOrigin("")); resp.Status != 200 {
			t.Fatalf("deleting gone@2.0.0 on C = %s", resp)
		}
		g.Each(t, converge, notServing("/gone@2.0.0/"))
		g.Each(t, converge, serving("/gone/", "gone v1"))
		if resp := cc.Do("DELETE", cc.API+"/workers/_/gone", harness.WithKey(rootKey), harness.WithOrigin("")); resp.Status != 200 {
			t.Fatalf("deleting gone on C = %s", resp)
		}
		g.Each(t, converge, listed("gone", "", false))
		g.Each(t, converge, notServing("/gone@1.0.0/"))
		for _, s := range g {
			if _, err := os.Stat(filepath.Join(s.DataDir, "apps", "gone", "1.0.0")); !os.IsNotExist(err) {
				t.Errorf("%s still has the deleted tree: %v", s.Name(), err)
			}
		}
	})

	t.Run("plugin upload and reload on one are live on all", func(t *testing.T) {
		t.Parallel()
		g := all.In(t)
		a, b, cc := g[0], g[1], g[2]
		archive := harness.TarGz(t, harness.File{Name: "manifest.yaml", Body: "name: shared-plugin\nversion: 1.0.0\nbase: /shared-plugin\n" + respond("from C")})
		uploadOK(t, cc, "plugins", "shared-plugin.tgz", archive, rootKey)
		resp := cc.Do("POST", cc.API+"/plugins/reload", harness.WithKey(rootKey), harness.WithOrigin(""))
		if resp.Status != 200 {
			t.Fatalf("reload on C = %s", resp)
		}
		if err := answer(cc, "/shared-plugin/", 200, "from C"); err != nil {
			t.Fatalf("C, after its reload: %v", err)
		}
		harness.Group{a, b}.Each(t, converge, serving("/shared-plugin/", "from C"))

		// Disabling the plugin is a row change too: its routes go everywhere.
		if resp := a.Do("POST", a.API+"/plugins/shared-plugin/disable", harness.WithKey(rootKey), harness.WithOrigin("")); resp.Status != 200 {
			t.Fatalf("disabling the plugin on A = %s", resp)
		}
		g.Each(t, converge, notServing("/shared-plugin/"))
	})

	t.Run("file manager writes to uploaded units are refused", func(t *testing.T) {
		t.Parallel()
		g := all.In(t)
		a, b := g[0], g[1]
		uploadOK(t, a, "workers", "fm.tgz", siteArchive(t, "fm", "1.0.0", "fm"), rootKey)
		uploadOK(t, a, "plugins", "fm-plugin.tgz", harness.TarGz(t, harness.File{Name: "manifest.yaml", Body: "name: fm-plugin\nversion: 1.0.0\n"}), rootKey)
		g.Each(t, converge, listed("fm", "1.0.0", true))
		g.Each(t, converge, func(s *harness.Server) error {
			if _, err := os.Stat(filepath.Join(s.DataDir, "plugins", "fm-plugin", "manifest.yaml")); err != nil {
				return err
			}
			return nil
		})
		before := testkit.Tree(t, filepath.Join(b.DataDir, "apps", "fm"))
		writes := []struct {
			name, method, surface, route string
			opt                          harness.Option
		}{
			{"mkdir", "POST", "workers", "mkdir", harness.WithJSON(map[string]string{"path": "apps/fm/1.0.0/new"})},
			{"rename", "POST", "workers", "rename", harness.WithJSON(map[string]string{"path": "apps/fm/1.0.0/index.html", "newName": "other.html"})},
			{"delete", "DELETE", "workers", "delete", harness.WithJSON(map[string]string{"path": "apps/fm/1.0.0/index.html"})},
			{"upload", "POST", "workers", "upload", uploadForm(t, "apps/fm/1.0.0", [3]string{"added.txt", "", "x"})},
			{"plugin mkdir", "POST", "plugins", "mkdir", harness.WithJSON(map[string]string{"path": "plugins/fm-plugin/new"})},
		}
		for _, w := range writes {
			for _, s := range []*harness.Server{a, b} {
				resp := s.Do(w.method, s.API+"/"+w.surface+"/files/"+w.route, harness.WithKey(rootKey), harness.WithOrigin(""), w.opt)
				if resp.Status != 409 || resp.ErrorCode() != "CLUSTER_READ_ONLY" || !strings.Contains(strings.ToLower(string(resp.Body)), "deploy") {
					t.Errorf("file manager %s on %s = %s, want 409 CLUSTER_READ_ONLY saying to deploy a new version", w.name, s.Name(), resp)
				}
			}
		}
		if after := testkit.Tree(t, filepath.Join(b.DataDir, "apps", "fm")); !maps.Equal(before, after) {
			t.Errorf("refused writes changed B's tree: %v, was %v", after, before)
		}
		for _, s := range []*harness.Server{a, b} {
			resp := s.Get(s.API+"/workers/files/list?path=apps/fm/1.0.0", harness.WithKey(rootKey))
			if resp.Status != 200 || !strings.Contains(string(resp.Body), "index.html") {
				t.Errorf("file manager list on %s = %s", s.Name(), resp)
			}
		}
		if err := answer(b, "/fm/", 200, "fm"); err != nil {
			t.Error(err)
		}
	})

	t.Run("two uploads of one archive store one object", func(t *testing.T) {
		t.Parallel()
		g := all.In(t)
		a, b := g[0], g[1]
		data := siteArchive(t, "twice", "1.0.0", "twice")
		first := uploadOK(t, a, "workers", "twice.tgz", data, rootKey)
		obj := c.Object(first.SHA256)
		stored, err := os.ReadFile(obj)
		if err != nil || !bytes.Equal(stored, data) {
			t.Fatalf("the object %s after the first upload: %v; it holds the archive exactly: %v", obj, err, bytes.Equal(stored, data))
		}
		info1, _ := os.Stat(obj)
		second := uploadOK(t, b, "workers", "twice.tgz", data, rootKey)
		if second.SHA256 != first.SHA256 {
			t.Fatalf("the same archive's sha256 = %s, then %s", first.SHA256, second.SHA256)
		}
		info2, err := os.Stat(obj)
		if err != nil || !os.SameFile(info1, info2) || !info1.ModTime().Equal(info2.ModTime()) {
			t.Errorf("the second upload wrote the object again (%v): %v then %v", err, info1, info2)
		}
		same := 0
		for _, p := range c.Objects(t) {
			if b, err := os.ReadFile(p); err == nil && bytes.Equal(b, data) {
				same++
			}
		}
		if same != 1 {
			t.Errorf("the store holds the archive %d times, want once", same)
		}
		g.Each(t, converge, serving("/twice/", "twice"))
	})

	t.Run("a dry run writes nothing anywhere", func(t *testing.T) {
		t.Parallel()
		g := all.In(t)
		a := g[0]
		dry := dryRunOK(t, a, "workers", siteArchive(t, "dry", "1.0.0", "dry"), rootKey)
		if dry.Data.Worker.SHA256 == "" || dry.Data.Worker.Change != 0 {
			t.Errorf("the dry run's answer: %+v", dry.Data.Worker)
		}
		if _, err := os.Stat(c.Object(dry.Data.Worker.SHA256)); !os.IsNotExist(err) {
			t.Errorf("a dry run put its archive in the store: %v", err)
		}
		// A real upload after it: once every instance has that one, a row of the dry run
		// would have reached them too.
		uploadOK(t, a, "workers", "after-dry.tgz", siteArchive(t, "after-dry", "1.0.0", "after"), rootKey)
		g.Each(t, converge, listed("after-dry", "1.0.0", true))
		for _, s := range g {
			if err := listed("dry", "", false)(s); err != nil {
				t.Errorf("%s after a dry run: %v", s.Name(), err)
			}
		}
	})

	t.Run("deploy --wait reports every instance", func(t *testing.T) {
		t.Parallel()
		g := all.In(t)
		a := g[0]
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"manifest.yaml": "name: waited\nversion: 1.0.0\nentrypoint: index.html\n", "index.html": "waited"})
		out, errOut, code := newCLI(t).run("deploy", dir, "--wait", "--json", "--url", a.URL, "--key", rootKey)
		var report struct {
			Upload struct{ Data struct{ Worker installed } }
			Wait   struct {
				Change    int64
				Instances []api.ClusterInstance
			}
		}
		if code != 0 || json.Unmarshal([]byte(out), &report) != nil {
			t.Fatalf("deploy --wait --json exited %d:\n%s%s", code, out, errOut)
		}
		change := report.Upload.Data.Worker.Change
		if change == 0 || report.Wait.Change != change || len(report.Wait.Instances) != len(g) {
			t.Errorf("deploy --wait --json reports change %d, %d instances, for an upload of change %d:\n%s", report.Wait.Change, len(report.Wait.Instances), change, out)
		}
		for _, s := range g {
			id := instanceID(t, s)
			i := slices.IndexFunc(report.Wait.Instances, func(in api.ClusterInstance) bool { return in.ID == id })
			if i < 0 || report.Wait.Instances[i].AppliedChange < change {
				t.Errorf("deploy --wait does not report %s (%s) at change %d:\n%s", s.Name(), id, change, out)
			}
			// Waited for: listed (which makes no instance pull) and served, at once.
			if err := listed("waited", "1.0.0", true)(s); err != nil {
				t.Errorf("%s after deploy --wait: %v", s.Name(), err)
			}
			if err := answer(s, "/waited/", 200, "waited"); err != nil {
				t.Errorf("%s after deploy --wait: %v", s.Name(), err)
			}
		}
		// GET cluster on another instance lists the three at the change too, once it has
		// pulled their heartbeats.
		testkit.EventuallyNil(t, converge, func() error {
			resp, err := g[2].Send("GET", g[2].API+"/cluster", harness.WithKey(rootKey))
			if err != nil {
				return err
			}
			var cl api.Cluster
			if resp.Status != 200 || resp.JSON(&cl) != nil || len(cl.Instances) != 3 || cl.Change < change {
				return fmt.Errorf("GET cluster on C = %s", resp)
			}
			for _, s := range g {
				id := instanceID(t, s)
				i := slices.IndexFunc(cl.Instances, func(in api.ClusterInstance) bool { return in.ID == id })
				if i < 0 || cl.Instances[i].Health != "ok" || cl.Instances[i].AppliedChange < change {
					return fmt.Errorf("GET cluster on C: %s (%s) not at change %d: %s", s.Name(), id, change, resp)
				}
			}
			return nil
		})
	})
}

// TestClusterOnRequest runs two instances that pull once an hour: a request for a worker
// another instance took makes this one fetch it at once.
func TestClusterOnRequest(t *testing.T) {
	t.Parallel()
	c := startCluster(t, time.Hour)
	all := c.Start(t, "A", "B")
	a, b := all[0], all[1]
	uploadOK(t, a, "workers", "asked.tgz", siteArchive(t, "asked", "1.0.0", "asked"), rootKey)
	if err := listed("asked", "", false)(b); err != nil {
		t.Fatalf("B, pulling hourly, before any request: %v", err)
	}
	start := time.Now()
	testkit.EventuallyNil(t, converge, func() error { return answer(b, "/asked/", 200, "asked") })
	t.Logf("B served it %v after the first request (interval %v)", time.Since(start), c.Interval)
}

// TestClusterRestartAndJoin stops an instance while the desired state changes and starts it
// again, and adds an instance with empty folders: each says it is not ready while it
// converges (its downloads held at a gate), and once ready serves exactly what the others do.
func TestClusterRestartAndJoin(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0)
	gate := harness.NewGate(t, c.Store.Endpoint)
	gated := func(name string) harness.Config {
		cfg := c.Config(name)
		cfg.App = c.App(gate.URL)
		return cfg
	}
	started := harness.StartAll(t, c.Config("A"), gated("C"))
	a, cc := started[0], started[1]
	uploadOK(t, a, "workers", "app1.tgz", siteArchive(t, "app", "1.0.0", "app v1"), rootKey)
	uploadOK(t, a, "workers", "keep.tgz", siteArchive(t, "keep", "1.0.0", "keep"), rootKey)
	started.Each(t, converge, serving("/app/", "app v1"))
	started.Each(t, converge, serving("/keep/", "keep"))

	stopped := instanceID(t, cc)
	cc.Stop()
	// Not seen for three intervals: GET cluster shows it gone.
	testkit.EventuallyNil(t, converge, func() error {
		resp, err := a.Send("GET", a.API+"/cluster", harness.WithKey(rootKey))
		if err != nil {
			return err
		}
		var cl api.Cluster
		if resp.Status != 200 || resp.JSON(&cl) != nil {
			return fmt.Errorf("GET cluster on A = %s", resp)
		}
		for _, in := range cl.Instances {
			if in.ID == stopped && in.Health == "gone" {
				return nil
			}
		}
		return fmt.Errorf("GET cluster on A does not show the stopped C (%s) gone: %s", stopped, resp)
	})
	uploadOK(t, a, "workers", "app2.tgz", siteArchive(t, "app", "2.0.0", "app v2"), rootKey)
	toggle(t, a, "app", "1.0.0", "disable")
	want, err := served(a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(want, "/app/: 200 app v2\n") || !strings.Contains(want, "/app@1.0.0/: 404\n") {
		t.Fatalf("A serves:\n%s", want)
	}

	joins := func(t *testing.T, s *harness.Server) {
		t.Helper()
		if err := s.WaitLive(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		// The instance must download app@2.0.0; until it has, it is not ready.
		testkit.EventuallyNil(t, converge, func() error {
			if gate.Waiting() > 0 {
				return nil
			}
			if status, err := readyStatus(s); err == nil && status == 200 {
				now, _ := served(s)
				t.Fatalf("%s said ready before it downloaded app@2.0.0; it serves:\n%s", s.Name(), now)
			}
			return fmt.Errorf("%s has not asked the store for app@2.0.0", s.Name())
		})
		if status, err := readyStatus(s); err != nil || status != 503 {
			t.Fatalf("%s's ready while its download is held = %d %v, want 503", s.Name(), status, err)
		}
		gate.Release()
		testkit.EventuallyNil(t, converge, func() error {
			if status, err := readyStatus(s); err != nil || status != 200 {
				return fmt.Errorf("%s's ready = %d %v", s.Name(), status, err)
			}
			return nil
		})
		// Ready: it serves what A serves now, not eventually.
		got, err := served(s)
		if err != nil || got != want {
			t.Fatalf("%s, once ready, serves (%v):\n%s\nA serves:\n%s", s.Name(), err, got, want)
		}
	}

	t.Run("restarted instance converges before it is ready", func(t *testing.T) {
		gate.Hold()
		again, err := cc.Relaunch(t)
		if err != nil {
			t.Fatal(err)
		}
		joins(t, again)
	})

	t.Run("fresh instance converges before it is ready", func(t *testing.T) {
		gate.Hold()
		d, err := harness.Launch(t, gated("D"))
		if err != nil {
			t.Fatal(err)
		}
		joins(t, d)
	})
}

// uploads is the condition that an upload of a worker archive to s, as the root key,
// installs it; polling it is safe, since a refused upload writes nothing.
func uploads(s *harness.Server, filename string, data []byte) func() error {
	return func() error {
		resp, err := s.Send("POST", s.API+"/workers/upload", harness.WithKey(rootKey), harness.WithOrigin(""),
			harness.WithMultipart(nil, harness.FormFile{Field: "file", Filename: filename, Data: data}))
		if err != nil || resp.Status != 200 {
			return fmt.Errorf("uploading %s to %s = %v %v", filename, s.Name(), resp, err)
		}
		return nil
	}
}

// TestClusterStoreFailures stops the primary under two instances (uploads answer 503, serving
// goes on), then the S3 server (serving and other writes go on, uploads answer 503 until it
// is back), then alters an archive in the store (the
// instance that has to download it refuses it, keeps serving the old tree, and says so in
// the audit trail and a metric).
func TestClusterStoreFailures(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0)
	all := c.Start(t, "A", "B")
	a, b := all[0], all[1]
	uploadOK(t, a, "workers", "site1.tgz", siteArchive(t, "site", "1.0.0", "site v1"), rootKey)
	all.Each(t, converge, serving("/site/", "site v1"))

	// The primary down: writes answer 503, serving goes on from the local trees.
	c.Primary.Stop()
	early := siteArchive(t, "early", "1.0.0", "early")
	if resp := a.Upload(a.API+"/workers/upload", "early.tgz", early, harness.WithKey(rootKey)); resp.Status != 503 {
		t.Errorf("an upload while the primary is down = %s, want 503", resp)
	}
	if err := answer(a, "/early/", 404, ""); err != nil {
		t.Errorf("the upload refused while the primary is down: %v", err)
	}
	for _, s := range all {
		if err := answer(s, "/site/", 200, "site v1"); err != nil {
			t.Errorf("%s while the primary is down: %v", s.Name(), err)
		}
	}
	c.Primary.Restart(t)
	testkit.EventuallyNil(t, converge, uploads(a, "early.tgz", early))
	all.Each(t, converge, serving("/early/", "early"))

	c.Store.Stop()
	late := siteArchive(t, "late", "1.0.0", "late")
	resp := a.Upload(a.API+"/workers/upload", "late.tgz", late, harness.WithKey(rootKey))
	if resp.Status != 503 || resp.ErrorCode() != "PACKAGE_STORE_UNAVAILABLE" {
		t.Fatalf("an upload while the store is down = %s, want 503 PACKAGE_STORE_UNAVAILABLE", resp)
	}
	if err := listed("late", "", false)(a); err != nil {
		t.Errorf("the refused upload on A: %v", err)
	}
	for _, s := range all {
		if err := answer(s, "/site/", 200, "site v1"); err != nil {
			t.Errorf("%s while the store is down: %v", s.Name(), err)
		}
		if status, err := readyStatus(s); err != nil || status != 200 {
			t.Errorf("%s's ready while the store is down = %d %v", s.Name(), status, err)
		}
	}
	// Other writes go on: a disable is a row on the primary.
	toggle(t, a, "site", "1.0.0", "disable")
	all.Each(t, converge, notServing("/site/"))
	toggle(t, b, "site", "1.0.0", "enable")
	all.Each(t, converge, serving("/site/", "site v1"))

	c.Store.Restart(t)
	testkit.EventuallyNil(t, converge, uploads(a, "late.tgz", late))
	all.Each(t, converge, serving("/late/", "late"))

	// An archive altered in the store: B, stopped while it was uploaded, must download it.
	b.Stop()
	up := uploadOK(t, a, "workers", "site2.tgz", siteArchive(t, "site", "2.0.0", "site v2"), rootKey)
	obj := c.Object(up.SHA256)
	data, err := os.ReadFile(obj)
	if err != nil {
		t.Fatalf("the uploaded archive in the store: %v", err)
	}
	data[len(data)/2] ^= 0xff // same size, other bytes
	if err := os.WriteFile(obj, data, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err = b.Relaunch(t)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WaitReady(30 * time.Second); err != nil {
		t.Fatalf("B with an altered archive in the store: %v", err)
	}
	testkit.EventuallyNil(t, converge, func() error {
		resp, err := b.Send("GET", b.API+"/audit?target="+"site@2.0.0", harness.WithKey(rootKey))
		if err != nil {
			return err
		}
		var page struct {
			Entries []struct{ Action, Target, Outcome string }
		}
		if resp.Status != 200 || resp.JSON(&page) != nil {
			return fmt.Errorf("GET audit = %s", resp)
		}
		for _, e := range page.Entries {
			if e.Outcome == "failed" {
				return nil
			}
		}
		return fmt.Errorf("no failed entry for site@2.0.0 in the audit trail: %s", resp)
	})
	var failures float64
	for series, v := range scrape(t, b) {
		if strings.HasPrefix(series, "runtime_reconcile_failures_total") {
			failures += v
		}
	}
	if failures < 1 {
		t.Errorf("runtime_reconcile_failures_total on B = %v, want at least 1", failures)
	}
	if err := answer(b, "/site/", 200, "site v1"); err != nil {
		t.Errorf("B's old tree: %v", err)
	}
	if err := answer(b, "/site@2.0.0/", 404, ""); err != nil {
		t.Errorf("B's refused version: %v", err)
	}
	if err := listed("site", "2.0.0", true)(b); err == nil {
		t.Error("B installed the altered archive")
	}
	if err := answer(a, "/site/", 200, "site v2"); err != nil {
		t.Errorf("A, which installed its own upload: %v", err)
	}
}
