package serving

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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
	path     string
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
	s := &socketServer{path: path, conns: map[net.Conn]bool{}}
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

// exchange sends a request without a body through the direct proxy's exchange, as
// serveDirect does, with ctx as the worker's timeout.
func exchange(t *testing.T, s *Server, w *socketServer, ctx context.Context, method, path string) (*http.Response, error) {
	t.Helper()
	r := httptest.NewRequestWithContext(ctx, method, path, nil)
	return s.exchangeDirect(httptest.NewRecorder(), r, &proxyTarget{addr: w.path, base: "/", rest: path, name: "w", limit: 1 << 20,
		timeout: time.Minute, requestID: "rid", ctx: ctx})
}

// fetch sends a request without a body through the direct proxy's exchange and reads its answer.
func fetch(t *testing.T, s *Server, w *socketServer, method, path string) string {
	t.Helper()
	resp, err := exchange(t, s, w, context.Background(), method, path)
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

// TestDirectPool: the direct proxy's requests to a worker's socket go over kept connections,
// one at a time over one connection; a kept connection the worker closed is replaced without
// failing the request; a body closed before its end closes its connection; a context that
// ends stops the exchange; unused connections are closed after a while.
func TestDirectPool(t *testing.T) {
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
	w := serveSocket(t, mux)
	s := New(Options{})
	s.direct = newDirectPool(4, time.Minute)

	for range 3 {
		if got := fetch(t, s, w, "GET", "/hello"); got != "hello localhost" {
			t.Fatalf("GET /hello = %q", got)
		}
		if got := fetch(t, s, w, "HEAD", "/hello"); got != "" {
			t.Fatalf("HEAD /hello = %q", got)
		}
		fetch(t, s, w, "GET", "/empty")
	}
	if n := w.accepted.Load(); n != 1 {
		t.Errorf("9 requests one after another took %d connections, want 1", n)
	}

	w.closeAll()
	if got := fetch(t, s, w, "GET", "/hello"); got != "hello localhost" {
		t.Errorf("after the worker closed the kept connection: %q", got)
	}

	resp, err := exchange(t, s, w, context.Background(), "GET", "/big")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Read(make([]byte, 10))
	resp.Body.Close()
	before := w.accepted.Load()
	fetch(t, s, w, "GET", "/hello")
	if n := w.accepted.Load() - before; n != 1 {
		t.Errorf("a request after a body closed early took %d new connections, want 1: the other was kept", n)
	}

	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := exchange(t, s, w, short, "GET", "/slow"); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a request past its context's deadline: %v", err)
	}

	s.direct = newDirectPool(4, 50*time.Millisecond)
	fetch(t, s, w, "GET", "/hello")
	closed := w.closed.Load()
	testkit.Eventually(t, "the unused connection to close", 5*time.Second, func() bool { return w.closed.Load() > closed })
}

// TestDirectPoolAfterIdleTimeout: a worker that closed every connection the runtime keeps to
// it (its idle timeout, as node:http's or Bun.serve's) answers the next requests: the first
// finds a kept connection closed and goes on a new one, not on another kept connection, which
// the worker closed too, and those are dropped.
func TestDirectPoolAfterIdleTimeout(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) })
	w := serveSocket(t, mux)
	s := New(Options{})
	s.direct = newDirectPool(8, time.Minute)

	// Four answers open at once: four connections, kept once their bodies are read.
	var open []*http.Response
	for range 4 {
		resp, err := exchange(t, s, w, context.Background(), "GET", "/hello")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, resp)
	}
	for _, resp := range open {
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if n := w.accepted.Load(); n != 4 {
		t.Fatalf("four answers open at once took %d connections, want 4", n)
	}

	w.closeAll()
	for i := range 4 {
		resp, err := exchange(t, s, w, context.Background(), "GET", "/hello")
		if err != nil {
			t.Fatalf("request %d after the worker closed the kept connections: %v", i, err)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != "hello" {
			t.Fatalf("request %d after the worker closed the kept connections: %q", i, b)
		}
		resp.Body.Close()
	}
	if n := w.accepted.Load() - 4; n != 1 {
		t.Errorf("four requests after the worker closed its connections took %d new ones, want 1", n)
	}
	s.direct.mu.Lock()
	kept := len(s.direct.idle[w.path])
	s.direct.mu.Unlock()
	if kept != 1 {
		t.Errorf("the pool keeps %d connections to the worker, want 1: those the worker closed are dropped", kept)
	}
}

// TestDirectPoolWorkerExit: the connections kept to a worker are closed once its process has
// exited (its lease's Exited), not when they have been unused for idleFor: a worker stopped
// at its ttl leaves nothing of it in the pool.
func TestDirectPoolWorkerExit(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) })
	w := serveSocket(t, mux)
	s := New(Options{})
	s.direct = newDirectPool(8, time.Hour)
	gone := make(chan struct{})
	ctx := context.Background()
	for range 2 {
		dc, _, err := s.direct.get(ctx, workerAddr{addr: w.path, gone: gone})
		if err != nil {
			t.Fatal(err)
		}
		s.direct.put(dc)
	}
	kept := func() int {
		s.direct.mu.Lock()
		defer s.direct.mu.Unlock()
		return len(s.direct.idle[w.path]) + len(s.direct.watched)
	}
	if n := kept(); n != 2 {
		t.Fatalf("kept and watched = %d before the exit, want 2 (one connection used twice, one watch)", n)
	}
	close(gone)
	testkit.Eventually(t, "the kept connection to close at the worker's exit", 5*time.Second, func() bool { return w.closed.Load() == 1 && kept() == 0 })
}
