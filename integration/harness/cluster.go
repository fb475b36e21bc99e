package harness

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// Cluster is the shared part of several runtime instances: one libSQL primary (their key
// store in sync mode, which also holds the desired state) and one bucket of an S3-compatible
// server (their package store). Each instance it starts has its own folders, state and port.
type Cluster struct {
	Primary *testkit.Sqld
	Store   *testkit.S3
	Bucket  string
	Prefix  string // the folder of the archives in the bucket: <Prefix>/sha256/<hex>
	// Interval is the instances' pull interval.
	Interval time.Duration
	env      map[string]string
}

// ClusterOptions configure StartCluster.
type ClusterOptions struct {
	// Interval is the pull interval of every instance; 1s (the shortest the setting takes)
	// when zero, so the tests wait little.
	Interval time.Duration
	// Env is the environment of every instance, e.g. RUNTIME_ROOT_KEY, so one key is admin
	// on all of them.
	Env map[string]string
}

// StartCluster starts the primary and the S3 server, with an empty bucket, for the instances
// of one test; they stop when it ends.
func StartCluster(tb testing.TB, opts ClusterOptions) *Cluster {
	tb.Helper()
	c := &Cluster{Primary: testkit.StartSqld(tb), Store: testkit.StartS3(tb), Prefix: "units", Interval: opts.Interval}
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	c.Bucket = c.Store.Bucket(tb, "runtime")
	// The store's credentials reach the Caddyfile through placeholders, as the README
	// advises, so they are in no config file.
	c.env = map[string]string{"CLUSTER_S3_KEY_ID": c.Store.AccessKey, "CLUSTER_S3_SECRET": c.Store.SecretKey}
	maps.Copy(c.env, opts.Env)
	return c
}

// App returns the lines of the global runtime option of an instance that reaches the store
// at endpoint (the S3 server's, or a Gate in front of it).
func (c *Cluster) App(endpoint string) string {
	return fmt.Sprintf(`		key_store sync {
			url %s
			interval %s
		}
		package_store s3 {
			endpoint %s
			bucket %s
			region %s
			prefix %s
			access_key_id {env.CLUSTER_S3_KEY_ID}
			secret_access_key {env.CLUSTER_S3_SECRET}
			path_style
		}`, c.Primary.URL, c.Interval, endpoint, c.Bucket, c.Store.Region, c.Prefix)
}

// Config returns the config of a new instance named name (for messages), reaching the store
// directly.
func (c *Cluster) Config(name string) Config {
	return Config{Name: name, App: c.App(c.Store.Endpoint), Env: maps.Clone(c.env)}
}

// Start starts one instance per name side by side and waits until each is ready.
func (c *Cluster) Start(tb testing.TB, names ...string) Group {
	tb.Helper()
	var cfgs []Config
	for _, name := range names {
		cfgs = append(cfgs, c.Config(name))
	}
	return StartAll(tb, cfgs...)
}

// Object is the path, on the S3 server's disk, of the archive whose SHA-256 is sum (hex).
func (c *Cluster) Object(sum string) string {
	return c.Store.Object(c.Bucket, c.Prefix+"/sha256/"+sum)
}

// Objects lists the paths of the archives the store holds.
func (c *Cluster) Objects(tb testing.TB) []string {
	tb.Helper()
	found, err := filepath.Glob(c.Object("*"))
	if err != nil {
		tb.Fatal(err)
	}
	return found
}

// StartAll launches a runtime for each config at once, then waits until every one is ready.
func StartAll(tb testing.TB, cfgs ...Config) Group {
	tb.Helper()
	var g Group
	for _, cfg := range cfgs {
		s, err := Launch(tb, cfg)
		if err != nil {
			tb.Fatal(err)
		}
		g = append(g, s)
	}
	for _, s := range g {
		if err := s.WaitReady(30 * time.Second); err != nil {
			tb.Fatalf("%s: %v", s.Name(), err) // its logs follow, from Launch's cleanup
		}
	}
	return g
}

// Relaunch starts the process again after Stop, with the same config, folders and port, as
// an instance back from maintenance; it does not wait for readiness.
func (s *Server) Relaunch(tb testing.TB) (*Server, error) {
	tb.Helper()
	select {
	case <-s.exited:
	default:
		return nil, fmt.Errorf("%s is still running", s.Name())
	}
	cfg := s.cfg
	cfg.Dir, cfg.Port = s.Dir, s.Port
	return Launch(tb, cfg)
}

// In returns a view of the server that reports to tb, for subtests sharing a server that
// their parent started (a test may only fail itself from its own goroutine).
func (s *Server) In(tb testing.TB) *Server {
	view := *s
	view.tb = tb
	return &view
}

// Name is the name of the config, else the URL.
func (s *Server) Name() string {
	if s.cfg.Name != "" {
		return s.cfg.Name
	}
	return s.URL
}

// Group is several runtime instances, e.g. of one cluster.
type Group []*Server

// In returns views of the servers that report to tb.
func (g Group) In(tb testing.TB) Group {
	out := make(Group, len(g))
	for i, s := range g {
		out[i] = s.In(tb)
	}
	return out
}

// Each polls check on every server until it holds on all of them at once, failing tb after
// timeout with what was still wrong on each server where it did not.
func (g Group) Each(tb testing.TB, timeout time.Duration, check func(s *Server) error) {
	tb.Helper()
	if err := g.Wait(timeout, check); err != nil {
		tb.Fatalf("still after %s: %v", timeout, err)
	}
}

// Wait polls check on every server until it holds on all of them at once, and answers what
// was still wrong when it does not within timeout. A server where it holds is asked again
// in each round: a condition that comes and goes does not count.
func (g Group) Wait(timeout time.Duration, check func(s *Server) error) error {
	deadline := time.Now().Add(timeout)
	for {
		var errs []error
		for _, s := range g {
			if err := check(s); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", s.Name(), err))
			}
		}
		if len(errs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(errs...)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Gate is an HTTP proxy in front of an S3 endpoint that can hold the downloads of archives
// (GET of a key under sha256/) until released, to catch an instance in the middle of a
// reconcile. Everything else passes at once.
type Gate struct {
	URL string

	mu      sync.Mutex
	open    chan struct{} // closed while the gate lets downloads through
	waiting int
}

// NewGate starts a gate in front of the S3 endpoint target, open; it stops when tb ends.
func NewGate(tb testing.TB, target string) *Gate {
	tb.Helper()
	to, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	g := &Gate{open: make(chan struct{})}
	close(g.open)
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(to)
		// The request is signed for the host the client sent it to.
		r.Out.Host = r.In.Host
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/sha256/") {
			g.mu.Lock()
			open := g.open
			g.waiting++
			g.mu.Unlock()
			select {
			case <-open:
			case <-r.Context().Done():
			}
			g.mu.Lock()
			g.waiting--
			g.mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	tb.Cleanup(func() {
		g.Release()
		srv.Close()
	})
	g.URL = srv.URL
	return g
}

// Hold makes downloads wait from now on.
func (g *Gate) Hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

// Release lets the waiting downloads and every later one through.
func (g *Gate) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// Waiting is how many downloads the gate holds now.
func (g *Gate) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}
