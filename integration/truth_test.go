package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// crashAtStart is a process worker that exits at every start, before it listens: its check
// fails, and each request that starts it crashes it.
const crashAtStart = "name: app\nversion: 1.0.0\ncommand: [/bin/sh, -c, 'echo missing DATABASE_URL >&2; exit 2']\n"

// TestStateCrashLooping: a first version whose process crashes at every start is never shown
// as healthy. The upload says it failed its check and nothing healthier exists, so it is served,
// failing; the record has no activeVersion (served still names it) and says failing; once
// requests have crashed it again and again it says crash-looping. deploy says the same.
func TestStateCrashLooping(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	resp := s.Upload(s.API+"/workers/upload", "app.tgz", harness.TarGz(t, pkg(crashAtStart)...), harness.WithKey(rootKey))
	for _, want := range []string{"app 1.0.0 failed its check and nothing healthier exists: it is served, failing", "exited before listening on PORT",
		"stderr: missing DATABASE_URL"} {
		if resp.Status != 422 || resp.ErrorCode() != "HEALTHCHECK_FAILED" || !strings.Contains(string(resp.Body), want) {
			t.Errorf("upload of a version that crashes at start = %s; want 422 HEALTHCHECK_FAILED saying %q", resp, want)
		}
	}
	if strings.Contains(string(resp.Body), "serves it as before") || strings.Contains(string(resp.Body), "not activated") {
		t.Errorf("the upload's answer flatters the failed version: %s", resp)
	}
	rec := workers(t, s, rootKey)["app"]
	if rec.State != "failing" || rec.ActiveVersion != "" || rec.Served != "1.0.0" || len(rec.FailedVersions) != 1 {
		t.Errorf("after the failed check: %+v; want state failing, no activeVersion, served 1.0.0, one failed version", rec)
	}

	// Requests start it, and it crashes each time: crash-looping.
	harness.Eventually(t, "app to be crash-looping", 60*time.Second, func() bool {
		s.Get("/app/")
		return workers(t, s, rootKey)["app"].State == "crash-looping"
	})
	if rec := workers(t, s, rootKey)["app"]; rec.ActiveVersion != "" || rec.Served != "1.0.0" {
		t.Errorf("crash-looping: %+v; want no activeVersion, served 1.0.0", rec)
	}

	// deploy of the same folder says what really happens, and workers list shows the state.
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(crashAtStart), 0o644))
	c := newCLI(t)
	c.env = []string{"RUNTIME_URL=" + s.URL, "RUNTIME_API_KEY=" + rootKey}
	out, errOut, code := c.runTop("deploy", dir)
	if code != 1 || out != "" || !strings.Contains(errOut, "1.0.0 failed its check and nothing healthier exists: it is served, failing") ||
		strings.Contains(errOut, "so it is not served") {
		t.Errorf("deploy of a version that crashes at start: exit %d, %q %q; want 1 saying it is served, failing", code, out, errOut)
	}
	if out := c.ok("workers", "list"); !strings.Contains(out, "1.0.0    failing ") && !strings.Contains(out, "1.0.0    crash-looping ") {
		t.Errorf("workers list printed %q; want app 1.0.0 failing or crash-looping", out)
	}
}

// TestStateFailingHealthcheck: a first version that runs but fails its healthcheck is served,
// failing (no activeVersion) even while its process answers; a version that passes then serves
// and is active; with every version disabled the worker is disabled.
func TestStateFailingHealthcheck(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	sick := "healthcheck: { path: '/read?path=/no/such/file', timeout: 2s }\n"
	resp := s.Upload(s.API+"/workers/upload", "app.tgz", testWorkerArchive(t, "app", "1.0.0", sick), harness.WithKey(rootKey))
	if resp.Status != 422 || !strings.Contains(string(resp.Body), "app 1.0.0 failed its check and nothing healthier exists: it is served, failing") {
		t.Errorf("upload of a version failing its healthcheck = %s; want 422 saying it is served, failing", resp)
	}
	if v, err := servedVersion(s.Get("/app/")); err != nil || v != "1.0.0" {
		t.Errorf("/app/ = %s, %v; want 1.0.0, served all the same", v, err)
	}
	if rec := workers(t, s, rootKey)["app"]; rec.State != "failing" || rec.ActiveVersion != "" || rec.Served != "1.0.0" {
		t.Errorf("with its process running: %+v; want state failing, no activeVersion, served 1.0.0", rec)
	}

	uploadOK(t, s, "workers", "app.tgz", testWorkerArchive(t, "app", "2.0.0", "healthcheck: { path: /healthz, timeout: 20s }\n"), rootKey)
	if rec := workers(t, s, rootKey)["app"]; rec.State != "serving" || rec.ActiveVersion != "2.0.0" || rec.Served != "2.0.0" {
		t.Errorf("after a healthy upload: %+v; want serving 2.0.0", rec)
	}
	for _, v := range []string{"1.0.0", "2.0.0"} {
		if r := s.Do("POST", s.API+"/workers/_/app/"+v+"/disable", harness.WithKey(rootKey)); r.Status != 200 {
			t.Fatalf("disable %s = %s", v, r)
		}
	}
	if rec := workers(t, s, rootKey)["app"]; rec.State != "disabled" || rec.ActiveVersion != "" || rec.Served != "" {
		t.Errorf("with every version disabled: %+v; want disabled", rec)
	}
}

// TestManifestWarnings: a manifest key the runtime does not read is not refused, nor ignored
// without a word: the upload's answer (dry run too) warns of it with what was meant, and
// deploy prints the warning.
func TestManifestWarnings(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	manifest := "name: site\nversion: 1.0.0\nentrypiont: index.html\nlimits: { timeout: 2s }\n"
	archive := harness.TarGz(t, pkg(manifest, harness.File{Name: "index.html", Body: "<p>hi</p>"})...)
	want := []string{"entrypiont is not a manifest key (did you mean entrypoint?); the runtime ignores it",
		"limits.timeout is not a manifest key (did you mean timeout?); the runtime ignores it"}
	warnings := func(path string, archive []byte) []string {
		resp := s.Upload(s.API+path, "site.tgz", archive, harness.WithKey(rootKey))
		var body struct {
			Data struct{ Worker struct{ Warnings []string } }
		}
		if resp.Status != 200 || resp.JSON(&body) != nil {
			t.Fatalf("POST %s = %s", path, resp)
		}
		return body.Data.Worker.Warnings
	}
	for _, path := range []string{"/workers/upload?dryRun=1", "/workers/upload"} {
		if got := warnings(path, archive); !slices.Equal(got, want) {
			t.Errorf("POST %s warns %q; want %q", path, got, want)
		}
	}
	clean := harness.TarGz(t, pkg("name: site\nversion: 1.0.1\nentrypoint: index.html\n", harness.File{Name: "index.html", Body: "<p>hi</p>"})...)
	if got := warnings("/workers/upload", clean); len(got) != 0 {
		t.Errorf("a manifest of known keys warns %q", got)
	}

	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(strings.Replace(manifest, "1.0.0", "1.1.0", 1)), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<p>hi</p>"), 0o644))
	c := newCLI(t)
	c.env = []string{"RUNTIME_URL=" + s.URL, "RUNTIME_API_KEY=" + rootKey}
	out, errOut, code := c.runTop("deploy", dir)
	if code != 0 || !strings.Contains(out, "Deployed site 1.1.0") ||
		!strings.Contains(errOut, "warning: "+want[0]+"\n") || !strings.Contains(errOut, "warning: "+want[1]+"\n") {
		t.Errorf("deploy of a manifest with unknown keys: exit %d, %q %q; want it deployed with both warnings", code, out, errOut)
	}
}

// TestCLIFirstHourTraps: a mistyped command is answered with what was meant, not the list of
// every command; a saved key that was revoked says to log in again; rollout set names a
// version that does not exist; backup into a missing folder prints an error: line.
func TestCLIFirstHourTraps(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	c := newCLI(t)
	for _, tt := range []struct {
		args []string
		says string
	}{
		{[]string{"deplyo"}, `error: runtime has no command "deplyo"; did you mean deploy?` + "\n"},
		{[]string{"workers", "lsit"}, `error: runtime workers has no command "lsit"; did you mean list?` + "\n"},
	} {
		out, errOut, code := c.runTop(tt.args...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, tt.says) || strings.Contains(errOut, "file-server") || strings.Contains(errOut, "Available Commands") {
			t.Errorf("runtime %v: exit %d, %q %q; want 1 and only %q with the help command", tt.args, code, out, errOut, tt.says)
		}
	}

	// A profile whose key is revoked afterwards.
	admin := s.CreateKey(rootKey, map[string]any{"name": "laptop", "role": "admin"})
	c.ok("login", "--url", s.URL, "--key", admin.Secret, "--profile", "local")
	c.ok("workers", "list")
	if r := s.Do("DELETE", s.API+"/keys/"+jsonNumber(admin.ID), harness.WithKey(rootKey), harness.WithOrigin("")); r.Status != 200 {
		t.Fatalf("revoking the key = %s", r)
	}
	_, errOut, code := c.runTop("workers", "list")
	if code != 4 || !strings.Contains(errOut, "AUTH_REQUIRED") ||
		!strings.Contains(errOut, `the key saved in profile "local" was not accepted (revoked or expired?): run runtime login --url `+s.URL+" --profile local") {
		t.Errorf("workers list with a revoked saved key: exit %d, %q; want 4 saying to log in again", code, errOut)
	}

	// rollout set of a version that is not installed.
	c.env = []string{"RUNTIME_URL=" + s.URL, "RUNTIME_API_KEY=" + rootKey}
	uploadOK(t, s, "workers", "app.tgz", harness.TarGz(t, pkg("name: app\nversion: 1.0.0\n", harness.File{Name: "index.html", Body: "hi"})...), rootKey)
	_, errOut, code = c.runTop("rollout", "set", "app", "9.9.9=50")
	if code != 1 || !strings.Contains(errOut, "error: app has no version 9.9.9 (installed: 1.0.0)") {
		t.Errorf("rollout set app 9.9.9=50: exit %d, %q; want 1 naming 9.9.9", code, errOut)
	}
	r := s.Do("PUT", s.API+"/workers/_/app/traffic", harness.WithKey(rootKey), harness.WithOrigin(""),
		harness.WithJSON(map[string]any{"split": []map[string]any{{"version": "9.9.9", "percent": 50}, {"version": "1.0.0", "percent": 50}}}))
	if r.Status != 404 || !strings.Contains(string(r.Body), `worker \"app\" has no version \"9.9.9\"; its versions are 1.0.0`) {
		t.Errorf("PUT traffic with 9.9.9 = %s; want 404 naming it and the installed versions", r)
	}

	// backup into a folder that does not exist.
	out, err := harness.RunCommand(t, s.Dir, nil, "backup", filepath.Join("no", "such", "folder", "keys.db"))
	if err == nil || !strings.HasPrefix(out, "error: ") || strings.Contains(out, `"level"`) {
		t.Errorf("backup into a missing folder: %v, %q; want an error: line, not a log line", err, out)
	}
}

// TestPathStyleOn: the settings table writes path_style on, and the Caddyfile takes it (and
// off, and the other boolean words).
func TestPathStyleOn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for word, want := range map[string]string{"on": `"path_style":true`, "off": `"path_style":false`, "yes": `"path_style":true`} {
		caddyfile := "{\n\truntime {\n\t\tpackage_store s3 {\n\t\t\tbucket units\n\t\t\tpath_style " + word + "\n\t\t}\n\t}\n}\n:8080 {\n\truntime\n}\n"
		must(t, os.WriteFile(filepath.Join(dir, "Caddyfile"), []byte(caddyfile), 0o644))
		out, err := harness.RunCommand(t, dir, nil, "adapt", "--config", "Caddyfile", "--adapter", "caddyfile")
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("adapt with path_style %s: %v, %s; want %s", word, err, out, want)
		}
	}
}
