package bench

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// rootKey is the runtime's root key during the benchmarks; it only creates the API key.
const rootKey = "bench-root-key-0123456789abcdefghijklmnop"

// parallelism is the number of client goroutines per GOMAXPROCS, each on its own keep-alive
// connection, so the server always has requests waiting.
const parallelism = 4

// accessLog sends the runtime's log, one line per request, to a file in the server's
// folder rather than to the harness, which would keep every line in this process's memory.
const accessLog = `	log access {
		output file access.log {
			roll_disabled
		}
		format json
		include http.handlers.runtime
	}`

// warmUp is how long each request is sent before the measurements.
const warmUp = 2 * time.Second

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}

// BenchmarkAPI compares authenticated requests with a public one on one runtime process:
// GET /api/admin/session with an API key in X-API-Key, and with a cpanel session cookie,
// against GET /api/health. The product target is that each authenticated request reaches at
// least 80% of the public one's req/s.
func BenchmarkAPI(b *testing.B) {
	s := harness.Start(b, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, Global: accessLog})
	key := s.CreateKey(rootKey, map[string]any{"name": "bench", "role": "viewer"})

	// One validated request each, outside the timed loops: both endpoints answer as documented.
	health, session := s.API+"/health", s.API+"/admin/session"
	if resp := s.Get(health); resp.Status != http.StatusOK {
		b.Fatalf("GET %s = %s", health, resp)
	}
	if resp := s.Get(session, harness.WithKey(key.Secret)); resp.Status != http.StatusOK {
		b.Fatalf("GET %s = %s", session, resp)
	}
	login := s.Do("POST", session, harness.WithOrigin(""), harness.WithJSON(map[string]string{"key": key.Secret}))
	cookies := (&http.Response{Header: login.Header}).Cookies()
	if login.Status != http.StatusOK || len(cookies) != 1 {
		b.Fatalf("POST %s = %s", session, login)
	}
	cookie := cookies[0].Name + "=" + cookies[0].Value
	if resp := s.Get(session, harness.WithHeader("Cookie", cookie)); resp.Status != http.StatusOK {
		b.Fatalf("GET %s with the session cookie = %s", session, resp)
	}

	client, conns := newClient()
	defer client.CloseIdleConnections()

	publicReq, err := newRequest(s.URL+health, nil)
	if err != nil {
		b.Fatal(err)
	}
	authReq, err := newRequest(s.URL+session, http.Header{"X-API-Key": {key.Secret}})
	if err != nil {
		b.Fatal(err)
	}
	cookieReq, err := newRequest(s.URL+session, http.Header{"Cookie": {cookie}})
	if err != nil {
		b.Fatal(err)
	}
	// Warm the requests up (connections, heap, the key and session caches), so that the first
	// sub-benchmark does not pay for a cold process.
	for _, req := range []*http.Request{publicReq, authReq, cookieReq} {
		if err := load(client, req, conns, warmUp); err != nil {
			b.Fatalf("warming up: %v", err)
		}
	}

	// The requests alternate round by round, so a slow spell of the shared machine falls on
	// all rather than on whichever ran last, and their order turns each round, so none always
	// runs first; the report pairs them up by round.
	names := []string{"public-health", "auth-session", "cookie-session"}
	reqs := map[string]*http.Request{"public-health": publicReq, "auth-session": authReq, "cookie-session": cookieReq}
	for i := range *rounds {
		for j := range names {
			name := names[(i+j)%len(names)]
			b.Run(name, func(b *testing.B) { benchGet(b, client, reqs[name]) })
		}
	}
}

// rounds is how many times each request is measured, alternating; run with -count=1.
var rounds = flag.Int("rounds", 5, "rounds of each compared pair of benchmarks")

// newClient returns a keep-alive client with a connection for each load goroutine.
func newClient() (*http.Client, int) {
	conns := parallelism * runtime.GOMAXPROCS(0)
	return clientWith(conns), conns
}

// clientWith returns a keep-alive client keeping up to conns connections.
func clientWith(conns int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}
}

// newRequest returns a GET request for url with header.
func newRequest(url string, header http.Header) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	maps.Copy(req.Header, header)
	return req, nil
}

// benchGet sends b.N copies of req from parallel goroutines, failing the benchmark on the
// first transport error or status other than 200, and reports req/s.
func benchGet(b *testing.B, client *http.Client, req *http.Request) {
	benchGetEach(b, client, []*http.Request{req}, parallelism*runtime.GOMAXPROCS(0))
}

// benchGetEach sends b.N requests from conns goroutines, each going through reqs in turn from
// its own starting point, and reports req/s.
func benchGetEach(b *testing.B, client *http.Client, reqs []*http.Request, conns int) {
	b.SetParallelism((conns + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	var failed atomic.Bool
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		own := clones(reqs)
		for i := int(next.Add(1)); pb.Next(); i++ {
			if err := get(client, own[i%len(own)]); err != nil {
				if !failed.Swap(true) {
					b.Error(err)
				}
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// load sends copies of req from conns goroutines for d, untimed.
func load(client *http.Client, req *http.Request, conns int, d time.Duration) error {
	return loadEach(client, []*http.Request{req}, conns, d)
}

// loadEach sends reqs in turn from conns goroutines for d, untimed.
func loadEach(client *http.Client, reqs []*http.Request, conns int, d time.Duration) error {
	deadline := time.Now().Add(d)
	errs := make(chan error, conns)
	for g := range conns {
		go func() {
			own := clones(reqs)
			for i := g; time.Now().Before(deadline); i++ {
				if err := get(client, own[i%len(own)]); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range conns {
		if err := <-errs; first == nil {
			first = err
		}
	}
	return first
}

// clones copies reqs for one goroutine, which sends the same copies again and again.
func clones(reqs []*http.Request) []*http.Request {
	out := make([]*http.Request, len(reqs))
	for i, req := range reqs {
		out[i] = req.Clone(req.Context())
	}
	return out
}

// get performs req and reads the whole body, so the connection goes back to the pool.
func get(client *http.Client, req *http.Request) error {
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d, want 200", req.URL.Path, resp.StatusCode)
	}
	return err
}

// BenchmarkKeyStore compares an authenticated request on a runtime whose key store is a replica
// of a libSQL primary (sync mode, sqld on this machine) with the same request on a runtime
// with a local key store: GET /api/admin/session with a viewer key in X-API-Key. Credentials
// are checked against the replica, so the target is at least 95% of local mode's req/s.
func BenchmarkKeyStore(b *testing.B) {
	primary := testkit.StartSqld(b)
	env := map[string]string{"RUNTIME_ROOT_KEY": rootKey}
	local := harness.Start(b, harness.Config{Env: env, Global: accessLog})
	synced := harness.Start(b, harness.Config{Env: env, Global: accessLog,
		App: "key_store sync {\n\t\t\turl " + primary.URL + "\n\t\t}"})

	client, conns := newClient()
	defer client.CloseIdleConnections()
	reqs := map[string]*http.Request{}
	for name, s := range map[string]*harness.Server{"local": local, "sync": synced} {
		key := s.CreateKey(rootKey, map[string]any{"name": "bench", "role": "viewer"})
		if resp := s.Get(s.API+"/admin/session", harness.WithKey(key.Secret)); resp.Status != http.StatusOK {
			b.Fatalf("%s: GET /admin/session = %s", name, resp)
		}
		req, err := newRequest(s.URL+s.API+"/admin/session", http.Header{"X-API-Key": {key.Secret}})
		if err != nil {
			b.Fatal(err)
		}
		if err := load(client, req, conns, warmUp); err != nil {
			b.Fatalf("warming up %s: %v", name, err)
		}
		reqs[name] = req
	}
	for i := range *rounds {
		order := []string{"local", "sync"}
		if i%2 == 1 {
			order = []string{"sync", "local"}
		}
		for _, name := range order {
			b.Run(name+"-auth", func(b *testing.B) { benchGet(b, client, reqs[name]) })
		}
	}
}
