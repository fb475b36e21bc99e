package serving

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// directPool keeps connections to the workers, per socket (a unix socket's path, or a TCP
// worker's host:port), for the direct proxy (directproxy.go): each request is written and its answer read on the
// calling goroutine. http.Transport hands each request to a writing and a reading goroutine of
// the connection through channels, which doubles the proxy's own CPU for a small answer; the
// shared proxy and its pooled http.Transport take everything the direct proxy does not.
type directPool struct {
	maxIdle int           // connections kept per socket
	idleFor time.Duration // how long an unused connection is kept

	mu      sync.Mutex
	idle    map[string][]*directConn // by worker address, the most recently used last
	watched map[string]bool          // the addresses whose worker's exit drops their kept connections
	sweeper *time.Timer              // closes connections unused for idleFor; nil when none is kept
}

func newDirectPool(maxIdle int, idleFor time.Duration) *directPool {
	return &directPool{maxIdle: maxIdle, idleFor: idleFor, idle: map[string][]*directConn{}, watched: map[string]bool{}}
}

// workerAddr is where the direct proxy reaches a worker's process.
type workerAddr struct {
	addr  string          // its unix socket's path, or host:port with tcp
	tcp   bool            // it listens on a TCP port
	gone  <-chan struct{} // closed once the process has exited; nil: not known
	check func() error    // vets each new connection (Lease.CheckConn: the port is still the worker's); nil: none
	take  func() net.Conn // the pool's own connection to the worker, checked, once (Lease.TakeConn); nil: none
}

// directConn is a kept connection to a worker's socket.
type directConn struct {
	net.Conn
	path string      // the worker's address (workerAddr.addr)
	head *headReader // under br: bounds the bytes of an answer's head
	br   *bufio.Reader
	bw   *bufio.Writer
	used time.Time
	gone <-chan struct{} // closed when the worker has exited; nil: not known
}

// aLongTimeAgo is a deadline in the past, which interrupts a connection's reads and writes.
var aLongTimeAgo = time.Unix(1, 0)

// closedByPeer tells whether err shows the other side closed the connection.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// directBody is an answer's body: read to its end, it gives its connection back.
type directBody struct {
	io.ReadCloser
	pool *directPool
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
		b.pool.put(b.dc)
		return
	}
	b.dc.Close()
}

// get returns a kept connection to the worker at to, the most recently used, or a new one;
// kept tells which.
func (t *directPool) get(ctx context.Context, to workerAddr) (*directConn, bool, error) {
	path := to.addr
	now := time.Now()
	t.mu.Lock()
	for list := t.idle[path]; len(list) > 0; list = t.idle[path] {
		dc := list[len(list)-1]
		t.idle[path] = list[:len(list)-1]
		if now.Sub(dc.used) < t.idleFor {
			t.mu.Unlock()
			return dc, true, nil
		}
		dc.Close()
	}
	delete(t.idle, path)
	t.mu.Unlock()
	if to.take != nil {
		// As good as a kept one: it may have been idle since the start.
		if c := to.take(); c != nil {
			return newDirectConn(c, to), true, nil
		}
	}
	dc, err := t.dial(ctx, to)
	return dc, false, err
}

// dial opens a new connection to the worker at to. A connection to a TCP port is vetted
// before a byte is sent on it: another process may listen there once the worker let it go.
func (t *directPool) dial(ctx context.Context, to workerAddr) (*directConn, error) {
	network := "unix"
	if to.tcp {
		network = "tcp"
	}
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, to.addr)
	if err != nil {
		return nil, err
	}
	if to.check != nil {
		if err := to.check(); err != nil {
			c.Close()
			return nil, err
		}
	}
	return newDirectConn(c, to), nil
}

// newDirectConn wraps c, a connection to the worker at to.
func newDirectConn(c net.Conn, to workerAddr) *directConn {
	head := &headReader{r: c, left: -1}
	return &directConn{Conn: c, path: to.addr, head: head, br: bufio.NewReader(head), bw: bufio.NewWriter(c), gone: to.gone}
}

// dropIdle closes the connections kept to the socket at path that were last used at or before
// used: idle at least as long as one the worker closed, the worker has closed them too.
func (t *directPool) dropIdle(path string, used time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := t.idle[path]
	kept := list[:0]
	for _, dc := range list {
		if dc.used.After(used) {
			kept = append(kept, dc)
		} else {
			dc.Close()
		}
	}
	clear(list[len(kept):])
	if len(kept) == 0 {
		delete(t.idle, path)
	} else {
		t.idle[path] = kept
	}
}

// headReader reads a connection; while an answer's head is read (left >= 0) it reads at most
// left bytes more and then fails with errHeaderTooLarge, as http.Transport's
// MaxResponseHeaderBytes does, so a worker writing header lines without end costs the runtime
// no more than the limit. The count includes what the buffer reads past the head.
type headReader struct {
	r    io.Reader
	left int64 // -1: no head is being read
}

func (h *headReader) Read(p []byte) (int, error) {
	if h.left < 0 {
		return h.r.Read(p)
	}
	if h.left == 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > h.left {
		p = p[:h.left]
	}
	n, err := h.r.Read(p)
	h.left -= int64(n)
	return n, err
}

// put keeps dc for the next request to its worker, unless enough are kept.
func (t *directPool) put(dc *directConn) {
	dc.used = time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.idle[dc.path]) >= t.maxIdle {
		dc.Close()
		return
	}
	t.idle[dc.path] = append(t.idle[dc.path], dc)
	if dc.gone != nil && !t.watched[dc.path] {
		t.watched[dc.path] = true
		go t.forget(dc.path, dc.gone)
	}
	if t.sweeper == nil {
		t.sweeper = time.AfterFunc(t.idleFor, t.sweep)
	}
}

// forget closes the connections kept to the socket at path once its worker has exited (gone
// closes), rather than when the sweep finds them idle: a worker stopped at its ttl leaves
// nothing of it in the pool.
func (t *directPool) forget(path string, gone <-chan struct{}) {
	<-gone
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, dc := range t.idle[path] {
		dc.Close()
	}
	delete(t.idle, path)
	delete(t.watched, path)
}

// sweep closes the connections unused for idleFor, those to workers that stopped among them.
func (t *directPool) sweep() {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for path, list := range t.idle {
		kept := list[:0]
		for _, dc := range list {
			if now.Sub(dc.used) < t.idleFor {
				kept = append(kept, dc)
			} else {
				dc.Close()
			}
		}
		if len(kept) == 0 {
			delete(t.idle, path)
		} else {
			t.idle[path] = kept
		}
	}
	t.sweeper = nil
	if len(t.idle) > 0 {
		t.sweeper = time.AfterFunc(t.idleFor, t.sweep)
	}
}
