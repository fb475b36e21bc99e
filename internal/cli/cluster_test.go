package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
)

// fakeCluster stands for the API of one instance of a cluster: an upload answers the change
// number change, and GET cluster answers the nth read with script(n).
type fakeCluster struct {
	URL    string
	change int64
	script func(n int) (api.Cluster, *envelope.Error)
	mu     sync.Mutex
	reads  int
}

func newFakeCluster(t *testing.T, change int64, script func(n int) (api.Cluster, *envelope.Error)) *fakeCluster {
	f := &fakeCluster{change: change, script: script}
	mux := fakeAPI(api.InstalledUnit{Name: "app", Version: "1.0.0", Change: f.change})
	mux.HandleFunc("GET /api/cluster", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		n := f.reads
		f.reads++
		f.mu.Unlock()
		c, err := f.script(n)
		if err != nil {
			envelope.Write(w, err)
			return
		}
		envelope.WriteJSON(w, 200, c)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// fakeAPI serves the discovery document and a worker upload that installs unit, for a test
// to add the routes it fakes.
func fakeAPI(unit api.InstalledUnit) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/runtime", func(w http.ResponseWriter, r *http.Request) {
		envelope.WriteJSON(w, 200, api.Discovery{API: "/api", Version: "v1.2.3"})
	})
	mux.HandleFunc("POST /api/workers/upload", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		var body api.WorkerUploaded
		body.Success, body.Data.Worker = true, unit
		envelope.WriteJSON(w, 200, body)
	})
	return mux
}

// three instances: a up to date, b at 5 until its third read, c gone long ago at 3.
func three(bApplied func(n int) int64) func(n int) (api.Cluster, *envelope.Error) {
	return func(n int) (api.Cluster, *envelope.Error) {
		return api.Cluster{Change: 7, Instances: []api.ClusterInstance{
			{ID: "a1", Address: "10.0.0.1:443", Version: "v1.2.3", AppliedChange: 7, LastSeen: "2026-11-27T05:00:00Z", Health: "ok", Self: true},
			{ID: "b2", Address: "10.0.0.2:443", Version: "v1.2.3", AppliedChange: bApplied(n), LastSeen: "2026-11-27T05:00:00Z", Health: "degraded"},
			{ID: "c3", Address: "10.0.0.3:443", Version: "v1.2.2", AppliedChange: 3, LastSeen: "2026-11-26T05:00:00Z", Health: "gone"},
		}}, nil
	}
}

func TestDeployWaitCluster(t *testing.T) {
	t.Parallel()
	catchesUp := func(n int) int64 {
		if n < 2 {
			return 5
		}
		return 7
	}
	f := newFakeCluster(t, 7, three(catchesUp))
	u := newUser(t, "RUNTIME_URL="+f.URL, "RUNTIME_API_KEY="+rootKey)
	r := u.run("deploy", site(t, "app", "1.0.0"), "--wait")
	if r.code != 0 || !strings.Contains(r.out, "Deployed app 1.0.0\n") || !strings.Contains(r.out, "Served by all 2 live instances (change 7)\n") {
		t.Fatalf("deploy --wait: exit %d, %q %q", r.code, r.out, r.errOut)
	}
	if r.errOut != "waiting for change 7: 1 of 2 instances have applied it\n" {
		t.Errorf("deploy --wait's progress = %q", r.errOut)
	}

	f = newFakeCluster(t, 7, three(catchesUp))
	u = newUser(t, "RUNTIME_URL="+f.URL, "RUNTIME_API_KEY="+rootKey)
	out := u.json("deploy", site(t, "app", "1.0.0"), "--wait").(map[string]any)
	wait, _ := out["wait"].(map[string]any)
	var ids []any
	instances, _ := wait["instances"].([]any)
	for _, in := range instances {
		ids = append(ids, in.(map[string]any)["id"])
	}
	if wait["change"] != 7.0 || !reflect.DeepEqual(ids, []any{"a1", "b2"}) {
		t.Errorf("deploy --wait --json: wait = %v, want change 7 and the live instances a1, b2", wait)
	}
	if up := out["upload"].(map[string]any)["data"].(map[string]any)["worker"].(map[string]any); up["change"] != 7.0 {
		t.Errorf("deploy --wait --json: upload = %v", up)
	}
}

func TestDeployWaitTimeout(t *testing.T) {
	t.Parallel()
	never := newFakeCluster(t, 7, three(func(int) int64 { return 5 }))
	refused := newFakeCluster(t, 7, func(int) (api.Cluster, *envelope.Error) {
		return api.Cluster{}, envelope.Errorf(403, "PERMISSION_DENIED", "this key lacks permission workers:read")
	})
	allGone := newFakeCluster(t, 7, func(int) (api.Cluster, *envelope.Error) {
		return api.Cluster{Change: 7, Instances: []api.ClusterInstance{{ID: "c3", Address: "10.0.0.3:443", AppliedChange: 3, Health: "gone"}}}, nil
	})
	starting := newFakeCluster(t, 7, func(int) (api.Cluster, *envelope.Error) {
		return api.Cluster{}, envelope.Errorf(503, envelope.CodeNotReady, "the runtime is starting")
	})
	u := newUser(t, "RUNTIME_API_KEY="+rootKey)
	u.checkExits([]exits{
		// Timeouts of a few seconds: a GET to the fake cluster must fit in one on a loaded machine.
		{"unreadable", []string{"deploy", site(t, "app", "1.0.0"), "--url", starting.URL, "--wait", "--wait-timeout", "3s"}, 1,
			"uploaded, but whether every instance applied change 7 could not be read within 3s: NOT_READY: the runtime is starting"},
		{"no live instance", []string{"deploy", site(t, "app", "1.0.0"), "--url", allGone.URL, "--wait", "--wait-timeout", "3s"}, 1, "GET cluster listed no live instance within 3s to apply change 7"},
		{"bad timeout", []string{"deploy", site(t, "app", "1.0.0"), "--url", never.URL, "--wait", "--wait-timeout", "0s"}, 1, "--wait-timeout must be positive"},
		{"refused", []string{"deploy", site(t, "app", "1.0.0"), "--url", refused.URL, "--wait"}, 1, "uploaded, but its convergence cannot be read: PERMISSION_DENIED"},
	})
	r := u.run("deploy", site(t, "app", "1.0.0"), "--url", never.URL, "--wait", "--wait-timeout", "3s")
	if r.code != 1 || r.out != "" {
		t.Fatalf("deploy --wait with a laggard: exit %d, out %q, want 1 and nothing", r.code, r.out)
	}
	if want := "error: uploaded, but after 3s 1 instance(s) have not applied change 7: b2 (10.0.0.2:443, at change 5, degraded)"; !strings.Contains(r.errOut, want) {
		t.Errorf("deploy --wait with a laggard says %q, want %q", r.errOut, want)
	}
	if strings.Contains(r.errOut, "a1") || strings.Contains(r.errOut, "c3") {
		t.Errorf("deploy --wait names an instance that applied the change or is gone: %q", r.errOut)
	}
}

// TestDeployWaitSingleInstance waits for nothing on a runtime without a package store (whose
// GET cluster would answer 503 here: it is never read).
func TestDeployWaitSingleInstance(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, nil)
	u := ciUser(t, rt)
	r := u.run("deploy", site(t, "app", "1.0.0"), "--wait")
	if r.code != 0 || !strings.Contains(r.out, "Served by this instance") || r.errOut != "" {
		t.Fatalf("deploy --wait on one instance: exit %d, %q %q", r.code, r.out, r.errOut)
	}
	out := u.json("deploy", site(t, "app", "1.1.0"), "--wait").(map[string]any)
	if !reflect.DeepEqual(out["wait"], map[string]any{"change": 0.0, "instances": []any{}}) {
		t.Errorf("deploy --wait --json on one instance: wait = %v", out["wait"])
	}
	if out := u.json("deploy", site(t, "app", "1.2.0")).(map[string]any); out["wait"] != nil {
		t.Errorf("deploy without --wait: wait = %v", out["wait"])
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	f := newFakeCluster(t, 7, three(func(int) int64 { return 5 }))
	u := newUser(t, "RUNTIME_URL="+f.URL, "RUNTIME_API_KEY="+rootKey)
	want := "ID             ADDRESS       VERSION  APPLIED  LAST SEEN             HEALTH\n" +
		"a1 (answered)  10.0.0.1:443  v1.2.3   7/7      2026-11-27T05:00:00Z  ok\n" +
		"b2             10.0.0.2:443  v1.2.3   5/7      2026-11-27T05:00:00Z  degraded\n" +
		"c3             10.0.0.3:443  v1.2.2   3/7      2026-11-26T05:00:00Z  gone\n"
	if out := u.ok("cluster"); out != want {
		t.Errorf("cluster printed\n%s\nwant\n%s", out, want)
	}
	c, _ := three(func(int) int64 { return 5 })(0)
	var wantJSON any
	b, _ := json.Marshal(c)
	_ = json.Unmarshal(b, &wantJSON)
	if got := u.json("cluster"); !reflect.DeepEqual(got, wantJSON) {
		t.Errorf("cluster --json = %v, want the API's %v", got, wantJSON)
	}
	u.checkExits([]exits{
		{"argument", []string{"cluster", "x"}, 1, "unknown command"},
		{"unreachable", []string{"cluster", "--url", "http://127.0.0.1:1"}, 3, "cannot reach"},
	})
}
