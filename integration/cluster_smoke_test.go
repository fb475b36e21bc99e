package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestClusterSmoke runs two runtimes sharing one sqld and one S3-compatible server: an upload
// to A is served by B at once on a request for it, a disable on B stops A serving it within
// an interval, and file manager writes to an uploaded unit answer CLUSTER_READ_ONLY while
// reads work; GET cluster on A lists both at the upload's change.
func TestClusterSmoke(t *testing.T) {
	t.Parallel()
	primary, s3 := testkit.StartSqld(t), testkit.StartS3(t)
	bucket := s3.Bucket(t, "smoke")
	env := map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_PACKAGE_STORE": "s3", "RUNTIME_S3_ENDPOINT": s3.Endpoint,
		"RUNTIME_S3_BUCKET": bucket, "RUNTIME_S3_REGION": s3.Region, "RUNTIME_S3_ACCESS_KEY_ID": s3.AccessKey,
		"RUNTIME_S3_SECRET_ACCESS_KEY": s3.SecretKey, "RUNTIME_S3_PATH_STYLE": "true"}
	a := harness.Start(t, harness.Config{App: syncRuntime(primary, ""), Env: env})
	b := harness.Start(t, harness.Config{App: syncRuntime(primary, ""), Env: env})
	root := harness.WithKey(rootKey)

	app := harness.TarGz(t, pkg("name: app\nversion: 1.0.0\nentrypoint: index.html\n", harness.File{Name: "index.html", Body: "<p>app</p>"})...)
	resp := a.Upload(a.API+"/workers/upload", "app.tgz", app, root)
	var up struct {
		Data struct {
			Worker struct {
				Change int64 `json:"change"`
			} `json:"worker"`
		} `json:"data"`
	}
	if resp.Status != 200 || resp.JSON(&up) != nil || up.Data.Worker.Change == 0 {
		t.Fatalf("upload to A = %s", resp)
	}
	if resp := b.Get("/app/"); resp.Status != 200 {
		t.Fatalf("the upload on B, at once = %s", resp)
	}
	testkit.EventuallyNil(t, 5*time.Second, func() error {
		var c api.Cluster
		if resp := a.Get(a.API+"/cluster", root); resp.Status != 200 || resp.JSON(&c) != nil {
			return fmt.Errorf("GET cluster on A = %s", resp)
		} else if len(c.Instances) != 2 || c.Instances[0].AppliedChange < up.Data.Worker.Change || c.Instances[1].AppliedChange < up.Data.Worker.Change {
			return fmt.Errorf("GET cluster on A = %s, want both instances at change %d", resp, up.Data.Worker.Change)
		}
		return nil
	})

	if resp := b.Do("POST", b.API+"/workers/_/app/1.0.0/disable", root); resp.Status != 200 {
		t.Fatalf("disable on B = %s", resp)
	}
	if resp := b.Get("/app/"); resp.Status != 404 {
		t.Fatalf("B after its own disable = %s", resp)
	}
	waitStatus(t, a, "/app/", 404, 5*time.Second)

	if resp := a.Do("POST", a.API+"/workers/files/mkdir", root, harness.WithJSON(map[string]string{"path": "apps/app/1.0.0/x"})); resp.Status != 409 || resp.ErrorCode() != "CLUSTER_READ_ONLY" {
		t.Errorf("file manager write on A = %s", resp)
	}
	if resp := a.Get(a.API+"/workers/files/download?path=apps/app/1.0.0/index.html", root); resp.Status != 200 {
		t.Errorf("file manager read on A = %s", resp)
	}
}
