package integration

import (
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWorkerCannotExhaustDescriptors is the descriptor flood: a worker of the host's network
// opens as many connections to the runtime's own port as it can and holds them. The runtime
// runs with a low descriptor limit here (2048, which the flood could fill) and
// worker_max_files at its default: the API and another tenant's worker, started after the
// flood, must keep answering.
func TestWorkerCannotExhaustDescriptors(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("worker_max_files is an rlimit of the Linux launcher")
	}
	t.Parallel()
	s := startWithRoot(t)
	var lim unix.Rlimit
	if err := unix.Prlimit(s.PID(), unix.RLIMIT_NOFILE, nil, &lim); err != nil {
		t.Fatal(err)
	}
	// Go raises the soft limit at start to one below the hard one (so that a later prlimit to
	// the hard one can be told apart).
	if lim.Cur+1 < lim.Max {
		t.Errorf("the runtime's descriptor limit is %d of %d: it should raise its soft limit to the hard one", lim.Cur, lim.Max)
	}
	const limit = 2048
	if err := unix.Prlimit(s.PID(), unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit}, nil); err != nil {
		t.Fatal(err)
	}
	processWorker(t, s, "@team/hog", "1.0.0", "timeout: 2m\n")
	processWorker(t, s, "@other/app", "1.0.0", "")

	var flood struct {
		Held  int    `json:"held"`
		Error string `json:"error"`
	}
	resp := s.Get("/@team/hog/hold?n=20000&addr=127.0.0.1:" + strconv.Itoa(s.Port))
	if resp.Status != 200 || resp.JSON(&flood) != nil {
		t.Fatalf("the flood's answer: %s", resp)
	}
	t.Logf("the worker holds %d connections to the runtime (stopped by: %s)", flood.Held, flood.Error)
	if flood.Held < 100 {
		t.Fatalf("the worker opened only %d connections: the flood did not run (%s)", flood.Held, flood.Error)
	}

	// Each request on a new connection, which the runtime must accept, with a bound.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, c := range []struct {
		what, path string
		key        bool
	}{
		{"the health check", s.API + "/health", false},
		{"an authenticated API request", s.API + "/admin/session", true},
		{"another tenant's worker, started after the flood", "/@other/app/", false},
	} {
		req, _ := http.NewRequest("GET", s.URL+c.path, nil)
		if c.key {
			req.Header.Set("X-API-Key", rootKey)
		}
		r, err := client.Do(req)
		if err != nil {
			t.Errorf("%s did not answer while a worker holds its connections: %v", c.what, err)
			continue
		}
		r.Body.Close()
		if r.StatusCode != 200 {
			t.Errorf("%s answered %d while a worker holds its connections", c.what, r.StatusCode)
		}
	}
}
