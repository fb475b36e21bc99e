package testkit

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago and that it has not
// returned before in this test process: the kernel may hand out a just-closed port again, and
// Caddy's listeners (SO_REUSEPORT) would then share it, the admin endpoint and a site alike.
func FreePort(tb testing.TB) int {
	tb.Helper()
	givenPorts.Lock()
	defer givenPorts.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !givenPorts.m[port] {
			givenPorts.m[port] = true
			return port
		}
	}
}

var givenPorts = struct {
	sync.Mutex
	m map[int]bool
}{m: map[int]bool{}}

// Buffer collects a process's output; it is safe for concurrent writes.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ServeUnix listens on a unix socket at path and answers every connection with answer, until
// the test ends: a stand-in for a local service such as Caddy's admin socket.
func ServeUnix(tb testing.TB, path, answer string) {
	tb.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(answer))
			c.Close()
		}
	}()
}
