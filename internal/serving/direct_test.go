package serving

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// socketServer serves handler on a unix socket and counts the connections it accepts; closeAll
// closes every connection it holds, as a worker that drops its kept connections does.
type socketServer struct {
	host     string
	accepted atomic.Int64
	closed   atomic.Int64
	mu       sync.Mutex
	conns    map[net.Conn]bool
}

func serveSocket(t *testing.T, handler http.Handler) *socketServer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "w.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := &socketServer{host: socketHost(path), conns: map[net.Conn]bool{}}
	srv := &http.Server{Handler: handler, ConnState: func(c net.Conn, state http.ConnState) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch state {
		case http.StateNew:
			s.accepted.Add(1)
			s.conns[c] = true
		case http.StateClosed, http.StateHijacked:
			s.closed.Add(1)
			delete(s.conns, c)
		}
	}}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close(); os.Remove(path) })
	return s
}

func (s *socketServer) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

// recorder is a fallback transport that answers 299 and counts its requests.
type recorder struct{ calls atomic.Int64 }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.calls.Add(1)
	return &http.Response{StatusCode: 299, Body: http.NoBody, Request: req}, nil
}

func send(t *testing.T, tr http.RoundTripper, method, host, path string, body io.Reader, ctx context.Context) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+host+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "localhost"
	return tr.RoundTrip(req)
}

// fetch sends a request without a body and reads its answer.
func fetch(t *testing.T, tr http.RoundTripper, method, host, path string) string {
	t.Helper()
	resp, err := send(t, tr, method, host, path, nil, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDirectTransport: requests without a body to a worker's socket go over kept connections,
// one at a time over one connection; a kept connection the worker closed is replaced without
// failing the request; a body closed before its end closes its connection; a context that
// ends stops the exchange; requests with a body, protocol switches and workers on a port go
// to the pooled transport; unused connections are closed after a while.
func TestDirectTransport(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello " + r.Host)) })
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(strings.Repeat("x", 1<<20))) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	s := serveSocket(t, mux)
	fallback := &recorder{}
	tr := newDirectTransport(fallback, 4, time.Minute)
	ctx := context.Background()

	for range 3 {
		if got := fetch(t, tr, "GET", s.host, "/hello"); got != "hello localhost" {
			t.Fatalf("GET /hello = %q", got)
		}
		if got := fetch(t, tr, "HEAD", s.host, "/hello"); got != "" {
			t.Fatalf("HEAD /hello = %q", got)
		}
		fetch(t, tr, "GET", s.host, "/empty")
	}
	if n := s.accepted.Load(); n != 1 {
		t.Errorf("9 requests one after another took %d connections, want 1", n)
	}

	s.closeAll()
	if got := fetch(t, tr, "GET", s.host, "/hello"); got != "hello localhost" {
		t.Errorf("after the worker closed the kept connection: %q", got)
	}

	resp, err := send(t, tr, "GET", s.host, "/big", nil, ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Read(make([]byte, 10))
	resp.Body.Close()
	before := s.accepted.Load()
	fetch(t, tr, "GET", s.host, "/hello")
	if n := s.accepted.Load() - before; n != 1 {
		t.Errorf("a request after a body closed early took %d new connections, want 1: the other was kept", n)
	}

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := send(t, tr, "GET", s.host, "/slow", nil, short); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a request past its context's deadline: %v", err)
	}

	upgrade, _ := http.NewRequest("GET", "http://"+s.host+"/hello", nil)
	upgrade.Header.Set("Upgrade", "websocket")
	for _, req := range []*http.Request{
		must(http.NewRequest("POST", "http://"+s.host+"/hello", strings.NewReader("body"))),
		must(http.NewRequest("DELETE", "http://"+s.host+"/hello", nil)),
		must(http.NewRequest("GET", "http://127.0.0.1:1/hello", nil)),
		upgrade,
	} {
		calls := fallback.calls.Load()
		if resp, err := tr.RoundTrip(req); err != nil || resp.StatusCode != 299 || fallback.calls.Load() != calls+1 {
			t.Errorf("%s %s %v did not go to the pooled transport: %v %v", req.Method, req.URL, req.Header, resp, err)
		}
	}

	quick := newDirectTransport(fallback, 4, 50*time.Millisecond)
	fetch(t, quick, "GET", s.host, "/hello")
	closed := s.closed.Load()
	testkit.Eventually(t, "the unused connection to close", 5*time.Second, func() bool { return s.closed.Load() > closed })
}

func must(req *http.Request, err error) *http.Request {
	if err != nil {
		panic(err)
	}
	return req
}
