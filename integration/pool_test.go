package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

type poolProcess struct {
	Worker, Version, State, StartedAt, LastRequest, RetryAt string
	PID, Requests, InFlight, Restarts, Crashes              int
	MemoryBytes                                             int64
}

func pool(t *testing.T, s *harness.Server, key string) []poolProcess {
	t.Helper()
	var out []poolProcess
	if resp := s.Get(s.API+"/workers/pool", harness.WithKey(key)); resp.Status != 200 || resp.JSON(&out) != nil {
		t.Fatalf("GET workers/pool = %s", resp)
	}
	return out
}

// TestPoolStatusAndRestart lists the process pool per namespace and restarts a worker under
// load: no request fails, and the next requests go to a new process.
func TestPoolStatusAndRestart(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	processWorker(t, s, "@team/echo", "1.0.0", "")
	processWorker(t, s, "other", "1.0.0", "")
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "editor", "namespaces": []string{"@team"}}).Secret
	viewer := s.CreateKey(rootKey, map[string]any{"name": "viewer", "role": "viewer"}).Secret

	if got := pool(t, s, rootKey); len(got) != 0 {
		t.Fatalf("pool before any request = %+v", got)
	}
	first := echoOf(t, s.Get("/@team/echo/"))
	echoOf(t, s.Get("/other/"))
	all := pool(t, s, rootKey)
	if len(all) != 2 || all[0].Worker != "@team/echo" || all[1].Worker != "other" {
		t.Fatalf("pool = %+v", all)
	}
	p := all[0]
	if p.Version != "1.0.0" || p.State != "running" || p.PID <= 0 || p.Requests != 1 || p.Restarts != 0 || p.MemoryBytes <= 0 ||
		p.StartedAt == "" || p.LastRequest == "" {
		t.Fatalf("the echo process = %+v", p)
	}
	if got := pool(t, s, team); len(got) != 1 || got[0].Worker != "@team/echo" {
		t.Fatalf("the team key sees %+v", got)
	}

	// Restart: permission, namespace, unknown worker.
	for _, tt := range []struct {
		path, key string
		status    int
		code      string
	}{
		{"/workers/_/other/restart", viewer, 403, "PERMISSION_DENIED"},
		{"/workers/_/other/restart", team, 403, "NAMESPACE_DENIED"},
		{"/workers/_/nope/restart", rootKey, 404, "WORKER_NOT_FOUND"},
	} {
		if resp := s.Do("POST", s.API+tt.path, harness.WithKey(tt.key), harness.WithOrigin("")); resp.Status != tt.status || resp.ErrorCode() != tt.code {
			t.Errorf("POST %s = %s, want %d %s", tt.path, resp, tt.status, tt.code)
		}
	}

	// Restarts under 8 clients, some of them in the middle of slow requests.
	load := harness.Hammer(t, 8, func(i, n int) error {
		path := "/@team/echo/"
		if i%2 == 1 {
			path = "/@team/echo/sleep?d=50ms"
		}
		resp, err := s.Send("GET", path)
		if err != nil {
			return err
		}
		if resp.Status != 200 {
			return fmt.Errorf("GET %s = %s", path, resp)
		}
		return nil
	})
	// Each restart comes after some requests went through.
	progress := func() {
		from := load.Sent()
		harness.Eventually(t, "requests between restarts", 10*time.Second, func() bool { return load.Sent() >= from+20 })
	}
	for range 3 {
		progress()
		var body struct {
			Success bool
			Data    struct {
				Name      string
				Restarted []string
			}
		}
		resp := s.Do("POST", s.API+"/workers/@team/echo/restart", harness.WithKey(team), harness.WithOrigin(""))
		if resp.Status != 200 || resp.JSON(&body) != nil || body.Data.Name != "@team/echo" || len(body.Data.Restarted) != 1 || body.Data.Restarted[0] != "1.0.0" {
			t.Fatalf("restart = %s", resp)
		}
	}
	progress()
	if err := load.Stop(80); err != nil {
		t.Fatal(err)
	}
	after := echoOf(t, s.Get("/@team/echo/"))
	if after.PID == first.PID {
		t.Fatal("the worker kept its process through restarts")
	}
	harness.EventuallyNil(t, 10*time.Second, func() error {
		got := pool(t, s, team)
		if len(got) != 1 || got[0].State != "running" || got[0].Restarts != 3 {
			return fmt.Errorf("pool after the restarts = %+v", got)
		}
		if harness.Alive(first.PID) {
			return fmt.Errorf("the first process %d is still alive", first.PID)
		}
		return nil
	})
}
