package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// cluster reads GET cluster with the root key.
func cluster(t *testing.T, s *harness.Server) api.Cluster {
	t.Helper()
	resp := s.Get(s.API+"/cluster", harness.WithKey(rootKey))
	var c api.Cluster
	if resp.Status != 200 || resp.JSON(&c) != nil {
		t.Fatalf("GET cluster = %s", resp)
	}
	return c
}

// only checks that c lists one instance, s itself, and returns it.
func only(t *testing.T, s *harness.Server, c api.Cluster) api.ClusterInstance {
	t.Helper()
	if len(c.Instances) != 1 || c.Change != 0 {
		t.Fatalf("GET cluster = %+v, want one instance at change 0", c)
	}
	in := c.Instances[0]
	if _, err := time.Parse(time.RFC3339, in.LastSeen); err != nil {
		t.Errorf("lastSeen %q: %v", in.LastSeen, err)
	}
	if !in.Self || in.AppliedChange != 0 || in.Version != s.Version || in.Address != fmt.Sprintf("127.0.0.1:%d", s.Port) {
		t.Errorf("the instance = %+v, want itself at 127.0.0.1:%d, version %s, applied 0", in, s.Port, s.Version)
	}
	return in
}

// TestClusterSingleInstance reads GET cluster of a runtime without a package store: exactly
// one instance, itself, healthy, with the id it keeps in state_dir: the same after a restart
// on that folder, another for another folder.
func TestClusterSingleInstance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := harness.Config{Dir: dir, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}}
	s := harness.Start(t, cfg)
	first := only(t, s, cluster(t, s))
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(first.ID) || first.Health != "ok" {
		t.Errorf("the instance = %+v, want a generated id and health ok", first)
	}
	if b, err := os.ReadFile(filepath.Join(s.DataDir, "state", "instance-id")); err != nil || strings.TrimSpace(string(b)) != first.ID {
		t.Errorf("state_dir's instance-id = %q, %v; want %s", b, err, first.ID)
	}
	viewer := s.CreateKey(rootKey, map[string]any{"name": "watcher", "role": "viewer"})
	if resp := s.Get(s.API+"/cluster", harness.WithKey(viewer.Secret)); resp.Status != 200 {
		t.Errorf("GET cluster as a viewer = %s", resp)
	}
	custom := s.CreateKey(rootKey, map[string]any{"name": "keys-only", "role": "custom", "permissions": []string{"keys:read"}})
	if resp := s.Get(s.API+"/cluster", harness.WithKey(custom.Secret)); resp.Status != 403 || resp.ErrorCode() != "PERMISSION_DENIED" {
		t.Errorf("GET cluster without workers:read = %s", resp)
	}
	s.Stop()

	again := harness.Start(t, cfg)
	if in := only(t, again, cluster(t, again)); in.ID != first.ID {
		t.Errorf("after a restart on the same state_dir the id is %s, was %s", in.ID, first.ID)
	}
	other := startWithRoot(t)
	if in := only(t, other, cluster(t, other)); in.ID == first.ID {
		t.Errorf("another state_dir has the same id %s", in.ID)
	}
}

// TestClusterSingleInstanceDegraded stops the primary of a sync-mode key store: the instance
// goes on listing itself, degraded, and ok again once the primary is back.
func TestClusterSingleInstanceDegraded(t *testing.T) {
	t.Parallel()
	primary := testkit.StartSqld(t)
	s := startSync(t, primary, "")
	if in := only(t, s, cluster(t, s)); in.Health != "ok" {
		t.Fatalf("with the primary up the instance is %s", in.Health)
	}
	health := func(want string) func() error {
		return func() error {
			if in := only(t, s, cluster(t, s)); in.Health != want {
				return fmt.Errorf("the instance is %s, want %s", in.Health, want)
			}
			return nil
		}
	}
	primary.Stop()
	testkit.EventuallyNil(t, 10*time.Second, health("degraded"))
	primary.Restart(t)
	testkit.EventuallyNil(t, 10*time.Second, health("ok"))
}
