package serving

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"syscall"
	"time"
)

// directTransport sends the requests without a body (GET, HEAD, OPTIONS) to a worker that
// serves on its unix socket over connections it keeps per socket, writing each request and
// reading its answer on the calling goroutine. http.Transport hands each request to a writing
// and a reading goroutine of the connection through channels, which doubles the proxy's own
// CPU for a small answer. Everything else (a body, a protocol switch, any other method, a
// worker on a port) goes through the pooled http.Transport.
type directTransport struct {
	fallback http.RoundTripper
	maxIdle  int           // connections kept per socket
	idleFor  time.Duration // how long an unused connection is kept

	mu      sync.Mutex
	idle    map[string][]*directConn // by host (socketHost), the most recently used last
	sweeper *time.Timer              // closes connections unused for idleFor; nil when none is kept
}

func newDirectTransport(fallback http.RoundTripper, maxIdle int, idleFor time.Duration) *directTransport {
	return &directTransport{fallback: fallback, maxIdle: maxIdle, idleFor: idleFor, idle: map[string][]*directConn{}}
}

// directConn is a kept connection to a worker's socket.
type directConn struct {
	net.Conn
	host string
	br   *bufio.Reader
	bw   *bufio.Writer
	used time.Time
}

// RoundTrip implements http.RoundTripper.
func (t *directTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !direct(req) {
		return t.fallback.RoundTrip(req)
	}
	for attempt := 0; ; attempt++ {
		path, ok := socketOfHost(req.URL.Host)
		if !ok {
			return nil, fmt.Errorf("%s names no worker socket", req.URL.Host)
		}
		dc, kept, err := t.get(req.Context(), req.URL.Host, path)
		if err != nil {
			return nil, err
		}
		resp, err := t.roundTrip(dc, req)
		if err == nil {
			return resp, nil
		}
		dc.Close()
		// A kept connection the worker closed meanwhile fails at once: the request, which
		// changes nothing, goes once more on a new one.
		if !kept || attempt > 0 || !closedByPeer(err) {
			return nil, err
		}
	}
}

// aLongTimeAgo is a deadline in the past, which interrupts a connection's reads and writes.
var aLongTimeAgo = time.Unix(1, 0)

// closedByPeer tells whether err shows the other side closed the connection.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// direct tells whether req goes over a kept connection of its own: a request without a body
// that may be sent twice, to a worker's socket, that switches no protocol.
func direct(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		return false
	}
	return strings.HasSuffix(req.URL.Host, socketSuffix) && (req.Body == nil || req.Body == http.NoBody) && req.Header.Get("Upgrade") == ""
}

// roundTrip sends req over dc and reads the answer; the answer's body gives dc back, or closes
// it, once read or closed.
func (t *directTransport) roundTrip(dc *directConn, req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	deadline, _ := ctx.Deadline()
	if err := dc.SetDeadline(deadline); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = dc.SetDeadline(aLongTimeAgo) })
	resp, err := dc.exchange(req)
	if err != nil {
		stop()
		return nil, err
	}
	body := &directBody{ReadCloser: resp.Body, t: t, dc: dc, stop: stop, keep: !resp.Close && !req.Close}
	if resp.Body == http.NoBody {
		body.finish(true)
		return resp, nil
	}
	resp.Body = body
	return resp, nil
}

// exchange writes req and reads its answer, passing informational (1xx) answers on to the
// request's trace, as http.Transport does (the proxy forwards them to the client).
func (dc *directConn) exchange(req *http.Request) (*http.Response, error) {
	if err := req.Write(dc.bw); err != nil {
		return nil, err
	}
	if err := dc.bw.Flush(); err != nil {
		return nil, err
	}
	for {
		resp, err := http.ReadResponse(dc.br, req)
		if err != nil || resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, err
		}
		if trace := httptrace.ContextClientTrace(req.Context()); trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(resp.StatusCode, textproto.MIMEHeader(resp.Header)); err != nil {
				return nil, err
			}
		}
	}
}

// directBody is an answer's body: read to its end, it gives its connection back.
type directBody struct {
	io.ReadCloser
	t    *directTransport
	dc   *directConn
	stop func() bool // ends the watch on the request's context
	keep bool        // neither side asked to close the connection
	done bool
}

func (b *directBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.finish(true)
	}
	return n, err
}

// Close closes the connection of a body not read to its end: what is left of the answer is
// not read.
func (b *directBody) Close() error {
	if !b.done {
		b.finish(false)
	}
	return nil
}

func (b *directBody) finish(complete bool) {
	b.done = true
	// A context that ended meanwhile has put the connection's deadline in the past.
	intact := b.stop()
	if complete && b.keep && intact {
		b.t.put(b.dc)
		return
	}
	b.dc.Close()
}

// get returns a kept connection of those kept under host, the most recently used, or a new one
// to the socket at path; kept tells which.
func (t *directTransport) get(ctx context.Context, host, path string) (*directConn, bool, error) {
	now := time.Now()
	t.mu.Lock()
	for list := t.idle[host]; len(list) > 0; list = t.idle[host] {
		dc := list[len(list)-1]
		t.idle[host] = list[:len(list)-1]
		if now.Sub(dc.used) < t.idleFor {
			t.mu.Unlock()
			return dc, true, nil
		}
		dc.Close()
	}
	delete(t.idle, host)
	t.mu.Unlock()
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "unix", path)
	if err != nil {
		return nil, false, err
	}
	return &directConn{Conn: c, host: host, br: bufio.NewReader(c), bw: bufio.NewWriter(c)}, false, nil
}

// put keeps dc for the next request to its worker, unless enough are kept.
func (t *directTransport) put(dc *directConn) {
	dc.used = time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.idle[dc.host]) >= t.maxIdle {
		dc.Close()
		return
	}
	t.idle[dc.host] = append(t.idle[dc.host], dc)
	if t.sweeper == nil {
		t.sweeper = time.AfterFunc(t.idleFor, t.sweep)
	}
}

// sweep closes the connections unused for idleFor, those to workers that stopped among them.
func (t *directTransport) sweep() {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for host, list := range t.idle {
		kept := list[:0]
		for _, dc := range list {
			if now.Sub(dc.used) < t.idleFor {
				kept = append(kept, dc)
			} else {
				dc.Close()
			}
		}
		if len(kept) == 0 {
			delete(t.idle, host)
		} else {
			t.idle[host] = kept
		}
	}
	t.sweeper = nil
	if len(t.idle) > 0 {
		t.sweeper = time.AfterFunc(t.idleFor, t.sweep)
	}
}
