package handlers

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/caddy-runtime/runtime/internal/cluster"
	"github.com/caddy-runtime/runtime/internal/packagestore"
	"github.com/caddy-runtime/runtime/internal/testkit"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// TestClusterUploadDiskFull: in cluster mode, an upload to an instance whose worker folder
// has no room for it answers 507 INSUFFICIENT_STORAGE saying so, and publishes nothing: no
// row, no object in the package store, no temporary folder left; with room again, it works.
func TestClusterUploadDiskFull(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting a size-limited tmpfs needs root")
	}
	ctx := context.Background()
	primary, s3 := testkit.StartSqld(t), testkit.StartS3(t)
	bucket := s3.Bucket(t, "runtime")
	store, err := packagestore.New(ctx, packagestore.Options{Endpoint: s3.Endpoint, Bucket: bucket, Region: s3.Region,
		AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	apps := filepath.Join(dir, "apps")
	for _, d := range []string{apps, filepath.Join(dir, "plugins")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("tmpfs", apps, "tmpfs", 0, fmt.Sprintf("size=%d", 6<<20)); err != nil {
		t.Skipf("cannot mount a tmpfs on %s: %v", apps, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(apps, unix.MNT_DETACH) })
	filler := filepath.Join(apps, "filler")
	if err := os.WriteFile(filler, make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	keys, err := keystore.OpenSync(ctx, filepath.Join(dir, "keys.db"), keystore.SyncOptions{URL: primary.URL, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close() })
	workers := packages.NewCatalog(packages.WorkerLayout, []string{apps}, packages.DefaultLimits)
	plugins := packages.NewCatalog(packages.PluginLayout, []string{filepath.Join(dir, "plugins")}, packages.DefaultLimits)
	for _, c := range []*packages.Catalog{workers, plugins} {
		c.SetRetireDelay(0)
		t.Cleanup(c.Close)
	}
	cl, err := cluster.New(cluster.Options{Keys: keys, Store: store, Workers: workers, Plugins: plugins, ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	a, v := testAPI(t, Options{RootKey: fileTestRoot, Workers: workers, Plugins: plugins, Cluster: cl, PluginHost: &localHost{},
		Keys: func() (*keystore.Store, error) { return keys, nil }})
	data := make([]byte, 2<<20)
	_, _ = rand.Read(data)
	archive := testkit.TarGz(t, testkit.File{Name: "manifest.yaml", Body: "name: app\nversion: 1.0.0\n"},
		testkit.File{Name: "data.bin", Body: string(data)})
	upload := func() *http.Response {
		body, ct := multipartBody(t, [3]string{"file", "app.tgz", string(archive)})
		req := httptest.NewRequest("POST", "/api/workers/upload", body)
		req.Header.Set("Content-Type", ct)
		req.Header.Set(APIKeyHeader, fileTestRoot)
		return serve(t, a, v, req)
	}

	resp := upload()
	var e struct {
		Error struct{ Code, Message string }
	}
	if resp.StatusCode != http.StatusInsufficientStorage || json.NewDecoder(resp.Body).Decode(&e) != nil ||
		e.Error.Code != packages.CodeNoSpace || !strings.Contains(e.Error.Message, "disk space") {
		t.Fatalf("upload on a full disk = %d %+v", resp.StatusCode, e)
	}
	if rows, err := keys.Units.Versions(ctx); err != nil || len(rows) != 0 {
		t.Fatalf("rows after the refused upload: %+v, %v", rows, err)
	}
	for o, err := range store.List(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		t.Fatalf("the store holds %x after the refused upload", o.Sum)
	}
	if entries, _ := os.ReadDir(apps); len(entries) != 1 {
		t.Fatalf("the worker folder holds %v, want the filler alone", entries)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if resp := upload(); resp.StatusCode != http.StatusOK {
		t.Fatalf("upload with room = %d", resp.StatusCode)
	}
	if rows, err := keys.Units.Versions(ctx); err != nil || len(rows) != 1 {
		t.Fatalf("rows after the upload: %+v, %v", rows, err)
	}
}
