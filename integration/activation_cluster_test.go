package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// TestClusterHealthGate: in a cluster each instance checks a new version for itself. A version
// that fails its check is answered 422 by the instance that took the upload, and another
// instance, installing it from the desired state, checks it on its own, records it failed and
// goes on serving the version before to a load that runs throughout; a version that passes is
// activated by each instance once its own check has passed.
func TestClusterHealthGate(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0)
	g := c.Start(t, "A", "B")
	a, b := g[0], g[1]
	healthy := "healthcheck: { path: /healthz, timeout: 20s }\n"
	uploadOK(t, a, "workers", "app.tgz", testWorkerArchive(t, "app", "1.0.0", healthy), rootKey)
	record := func(s *harness.Server) workerRecord { return workers(t, s, rootKey)["app"] }
	harness.Eventually(t, "B to activate 1.0.0 itself", converge, func() bool { return record(b).ActiveVersion == "1.0.0" })

	load := harness.Hammer(t, 2, func(int, int) error {
		v, err := servedVersion(b.Get("/app/"))
		if err == nil && v != "1.0.0" {
			err = fmt.Errorf("B served /app/ from %s", v)
		}
		return err
	})
	sick := "healthcheck: { path: '/read?path=/no/such/file', timeout: 2s }\n"
	if resp := a.Upload(a.API+"/workers/upload", "app.tgz", testWorkerArchive(t, "app", "2.0.0", sick), harness.WithKey(rootKey)); resp.Status != 422 || resp.ErrorCode() != "HEALTHCHECK_FAILED" {
		t.Errorf("upload of a failing version to A = %s; want 422 HEALTHCHECK_FAILED", resp)
	}
	harness.Eventually(t, "B to check 2.0.0 and record it failed", converge+10*time.Second, func() bool {
		rec := record(b)
		return slices.Contains(rec.Versions, "2.0.0") && len(rec.FailedVersions) == 1 && rec.FailedVersions[0].Version == "2.0.0"
	})
	if err := load.Stop(10); err != nil {
		t.Error(err)
	}
	// The line comes through a pipe, a moment after the record changed.
	harness.Eventually(t, "B to log its own failed check of 2.0.0", converge, func() bool {
		return logged(b, "worker version failed its check: installed but not activated; the version served before goes on serving", "2.0.0")
	})
	if rec := record(b); rec.ActiveVersion != "1.0.0" {
		t.Errorf("B after 2.0.0 failed: %+v", rec)
	}

	uploadOK(t, a, "workers", "app.tgz", testWorkerArchive(t, "app", "3.0.0", healthy), rootKey)
	g.Each(t, converge, func(s *harness.Server) error {
		if v, err := servedVersion(s.Get("/app/")); err != nil || v != "3.0.0" {
			return fmt.Errorf("/app/ = %s, %v; want 3.0.0", v, err)
		}
		return nil
	})
	harness.Eventually(t, "B to log its own check of 3.0.0", converge, func() bool {
		return logged(b, "worker version activated: it passed its check and is served", "3.0.0")
	})
}

// logged reports whether s logged msg about version.
func logged(s *harness.Server, msg, version string) bool {
	for _, e := range s.LogEntries(msg) {
		if e["version"] == version {
			return true
		}
	}
	return false
}
