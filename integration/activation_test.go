package integration

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// failedVersion is an entry of a worker record's failedVersions.
type failedVersion struct {
	Version, Reason, At string
}

// workerArchive is the archive of worker name@version: its manifest, with extra lines, and
// files.
func workerArchive(t *testing.T, name, version, extra string, files ...harness.File) []byte {
	t.Helper()
	return harness.TarGz(t, pkg(fmt.Sprintf("name: %s\nversion: %s\n%s", name, version, extra), files...)...)
}

// testWorkerFile is the test worker's binary as the executable file server of an archive.
func testWorkerFile(t *testing.T) harness.File {
	t.Helper()
	server, err := os.ReadFile(harness.TestWorker(t))
	if err != nil {
		t.Fatal(err)
	}
	return harness.File{Name: "server", Body: string(server), Mode: 0o755}
}

// testWorkerArchive is the test worker as process worker name@version (entrypoint: server),
// with extra manifest lines and more files.
func testWorkerArchive(t *testing.T, name, version, extra string, files ...harness.File) []byte {
	t.Helper()
	return workerArchive(t, name, version, "entrypoint: server\n"+extra, slices.Concat(files, []harness.File{testWorkerFile(t)})...)
}

// servedVersion is the version folder that answered a worker request, from the test worker's
// echo of its working directory.
func servedVersion(resp *harness.Response) (string, error) {
	var e echoBody
	if resp.Status != 200 || resp.JSON(&e) != nil {
		return "", fmt.Errorf("worker answer = %s", resp)
	}
	return path.Base(e.Dir), nil
}

// TestHealthGatedActivation: a version whose health check never answers 2xx is installed but
// not activated, and the version served before goes on serving every request of a load that
// runs throughout (none fails, none reaches the new version); one that passes is served only
// once it has passed; a disabled active version falls back to the newest version that did not
// fail; enabling a version checks it again; the active and failed versions survive a restart.
func TestHealthGatedActivation(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	key := harness.WithKey(rootKey)
	healthy := "healthcheck: { path: /healthz, timeout: 20s }\n"
	// The healthcheck is checked at upload, with what to write instead.
	for _, tt := range []struct{ manifest, says string }{
		{"healthcheck: { path: healthz }\n", `healthcheck.path \"healthz\" must be a path on the worker starting with /, e.g. /healthz`},
		{"healthcheck: { path: /h, timeout: 1h }\n", "healthcheck.timeout 1h0m0s is longer than 10m0s"},
		{"healthcheck: /healthz\n", "healthcheck must be a mapping such as { path: /healthz, timeout: 30s }"},
	} {
		resp := s.Upload(s.API+"/workers/upload", "app.tgz", testWorkerArchive(t, "app", "0.1.0", tt.manifest), key)
		if resp.Status != 400 || resp.ErrorCode() != "INVALID_MANIFEST" || !strings.Contains(string(resp.Body), tt.says) {
			t.Errorf("upload with %q = %s; want 400 INVALID_MANIFEST saying %q", tt.manifest, resp, tt.says)
		}
	}
	site := harness.TarGz(t, pkg("name: site\nversion: 1.0.0\nentrypoint: index.html\nhealthcheck: { path: /healthz }\n",
		harness.File{Name: "index.html", Body: "<p>hi</p>"})...)
	if resp := s.Upload(s.API+"/workers/upload", "site.tgz", site, key); resp.Status != 400 || !strings.Contains(string(resp.Body), "only process workers") {
		t.Errorf("upload of a static worker with a healthcheck = %s; want 400", resp)
	}
	uploadOK(t, s, "workers", "app.tgz", testWorkerArchive(t, "app", "1.0.0", healthy), rootKey)
	if got := workers(t, s, rootKey)["app"]; got.ActiveVersion != "1.0.0" || got.Served != "1.0.0" || len(got.FailedVersions) != 0 {
		t.Fatalf("after the first upload: %+v", got)
	}

	// A load on /app/ throughout: every answer from a version allowed at that moment.
	var allowed atomic.Value
	allowed.Store([]string{"1.0.0"})
	load := harness.Hammer(t, 4, func(int, int) error {
		want := allowed.Load().([]string)
		v, err := servedVersion(s.Get("/app/"))
		if err == nil && !slices.Contains(want, v) {
			err = fmt.Errorf("/app/ answered from %s, want one of %v", v, want)
		}
		return err
	})

	sick := "healthcheck: { path: '/read?path=/no/such/file', timeout: 2s }\n"
	resp := s.Upload(s.API+"/workers/upload", "app.tgz", testWorkerArchive(t, "app", "2.0.0", sick), key)
	for _, want := range []string{
		"app 2.0.0 is installed but not activated: its health check GET /read?path=/no/such/file did not answer 2xx within 2s",
		"answered 403 Forbidden", "1.0.0 goes on serving app", "Its last output lines:", "stdout: testworker listening on",
	} {
		if resp.Status != 422 || resp.ErrorCode() != "HEALTHCHECK_FAILED" || !strings.Contains(string(resp.Body), want) {
			t.Errorf("upload of a failing version = %s; want 422 HEALTHCHECK_FAILED saying %q", resp, want)
		}
	}
	rec := workers(t, s, rootKey)["app"]
	if rec.ActiveVersion != "1.0.0" || !slices.Contains(rec.Versions, "2.0.0") || slices.Contains(rec.DisabledVersions, "2.0.0") ||
		len(rec.FailedVersions) != 1 || rec.FailedVersions[0].Version != "2.0.0" || !strings.Contains(rec.FailedVersions[0].Reason, "403 Forbidden") {
		t.Errorf("after the failed check: %+v", rec)
	}
	// Pinned, the failed version is reached.
	if v, err := servedVersion(s.Get("/app@2.0.0/")); err != nil || v != "2.0.0" {
		t.Errorf("/app@2.0.0/ = %s, %v", v, err)
	}

	// A version that passes, slow to start: it is served once the check passed, not before.
	slow := healthy + "env: { START_DELAY: 2s }\n"
	began := time.Now()
	allowed.Store([]string{"1.0.0", "3.0.0"})
	var early atomic.Int64
	probe := harness.Hammer(t, 1, func(int, int) error {
		sent := time.Now()
		v, err := servedVersion(s.Get("/app/"))
		if err == nil && v == "3.0.0" && sent.Before(began.Add(1500*time.Millisecond)) {
			early.Add(1) // sent while 3.0.0 had not even listened yet
		}
		return err
	})
	uploadOK(t, s, "workers", "app.tgz", testWorkerArchive(t, "app", "3.0.0", slow), rootKey)
	allowed.Store([]string{"3.0.0"})
	if err := probe.Stop(1); err != nil {
		t.Error(err)
	}
	if n := early.Load(); n > 0 {
		t.Errorf("%d requests reached 3.0.0 before its check could have passed", n)
	}
	if rec := workers(t, s, rootKey)["app"]; rec.ActiveVersion != "3.0.0" || len(rec.FailedVersions) != 1 {
		t.Errorf("after the passing upload: %+v", rec)
	}
	if err := load.Stop(20); err != nil {
		t.Error(err)
	}

	// Disabling the active version serves the newest that did not fail (not 2.0.0).
	toggle := func(version, verb string) *harness.Response {
		return s.Do("POST", s.API+"/workers/_/app/"+version+"/"+verb, key)
	}
	if r := toggle("3.0.0", "disable"); r.Status != 200 {
		t.Fatalf("disable 3.0.0 = %s", r)
	}
	if v, err := servedVersion(s.Get("/app/")); err != nil || v != "1.0.0" {
		t.Errorf("with 3.0.0 disabled /app/ = %s, %v; want 1.0.0 (2.0.0 failed)", v, err)
	}
	// Enabling checks again: 2.0.0 still fails, 3.0.0 passes and is served again.
	if r := toggle("2.0.0", "enable"); r.Status != 422 || r.ErrorCode() != "HEALTHCHECK_FAILED" {
		t.Errorf("enable 2.0.0 = %s; want 422 HEALTHCHECK_FAILED", r)
	}
	if r := toggle("3.0.0", "enable"); r.Status != 200 {
		t.Errorf("enable 3.0.0 = %s", r)
	}
	if v, err := servedVersion(s.Get("/app/")); err != nil || v != "3.0.0" {
		t.Errorf("with 3.0.0 enabled again /app/ = %s, %v", v, err)
	}
	// Enabling an enabled version checks it again and activates it, older or not.
	if r := toggle("1.0.0", "enable"); r.Status != 200 {
		t.Errorf("enable 1.0.0 = %s", r)
	}
	if v, err := servedVersion(s.Get("/app/")); err != nil || v != "1.0.0" {
		t.Errorf("after enabling 1.0.0 again /app/ = %s, %v", v, err)
	}

	// A restart keeps what this instance activated and what failed.
	s.Stop()
	again, err := s.Relaunch(t)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	rec = workers(t, again, rootKey)["app"]
	if rec.ActiveVersion != "1.0.0" || len(rec.FailedVersions) != 1 || rec.FailedVersions[0].Version != "2.0.0" {
		t.Errorf("after a restart: %+v; want 1.0.0 active and 2.0.0 failed", rec)
	}
	if v, err := servedVersion(again.Get("/app/")); err != nil || v != "1.0.0" {
		t.Errorf("after a restart /app/ = %s, %v; want 1.0.0", v, err)
	}
}
