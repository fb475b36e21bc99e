package caddymodule

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/internal/packagestore"
	"github.com/caddy-runtime/runtime/internal/pluginhost"
	"github.com/caddy-runtime/runtime/internal/testkit"
	"github.com/caddy-runtime/runtime/keystore"
)

// TestStateCluster: a state with a package store and key_store sync starts this instance's
// part of the cluster: it is not ready before the first pass and is after it, a plugin reload
// asked through it reaches the state's plugin hosts, GET cluster lists this instance under
// the id kept in state_dir with its address, and the state is released with its loop
// stopped. A state without a package store has no cluster, and answers GET cluster alone.
func TestStateCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary, s3 := testkit.StartSqld(t), testkit.StartS3(t)
	store, err := packagestore.New(ctx, packagestore.Options{Endpoint: s3.Endpoint, Bucket: s3.Bucket(t, "runtime"),
		Region: s3.Region, AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	settings := config.Settings{StateDir: filepath.Join(dir, "state"), ScratchDir: filepath.Join(dir, "scratch"),
		WorkerDirs: []string{filepath.Join(dir, "apps")}, PluginDirs: []string{filepath.Join(dir, "plugins")},
		KeyStore: "sync", Sync: config.SyncSettings{URL: primary.URL, Interval: 50 * time.Millisecond}}

	local := newState(settings, nil, caddy.Log())
	if shared, instances, missing := local.handlerCluster(); shared != nil || instances == nil || missing != nil {
		t.Fatal("a state without a package store has a cluster, or no single-instance answer")
	}

	s := newState(settings, store, caddy.Log())
	var reloads atomic.Int32
	s.pluginReloads.Subscribe(func(pluginhost.Reload) { reloads.Add(1) })
	if err := s.readiness(); err != errStarting {
		t.Fatalf("readiness before start = %v", err)
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	addr := "runtime-a:8080"
	s.address.Store(&addr)
	testkit.Eventually(t, "ready after the first pass", 10*time.Second, func() bool { return s.readiness() == nil })
	shared, instances, missing := s.handlerCluster()
	if shared == nil || instances == nil || missing == nil {
		t.Fatal("a state with a package store has no cluster")
	}
	before := reloads.Load()
	if change, err := shared.ReloadPlugins(ctx, keystore.Root()); err != nil || change == 0 || reloads.Load() <= before {
		t.Fatalf("reload = %d, %v; reloads %d → %d", change, err, before, reloads.Load())
	}
	id, err := os.ReadFile(filepath.Join(settings.StateDir, keystore.InstanceIDFile))
	if err != nil {
		t.Fatal(err)
	}
	got, err := instances(ctx)
	if err != nil || len(got.Instances) != 1 || got.Instances[0].ID != strings.TrimSpace(string(id)) || !got.Instances[0].Self ||
		got.Instances[0].Address != addr {
		t.Fatalf("instances = %+v, %v", got, err)
	}
	if err := s.Destruct(); err != nil {
		t.Fatal(err)
	}
	if left := ownGoroutines("cluster.(*Cluster).Run"); len(left) > 0 {
		t.Fatalf("the cluster's loop outlived the state:\n%s", strings.Join(left, "\n\n"))
	}
}
