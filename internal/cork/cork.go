// Package cork writes an answer with its connection corked (TCP_CORK), so that a large answer
// leaves in as few segments as the kernel can make: the server records each request's
// connection (ConnContext) and a handler writes through Write.
package cork

import (
	"context"
	"net"
	"net/http"
	"syscall"
)

// Threshold is the answer size from which Write corks the connection: net/http sends
// the header and the first part of a body from a 4 KiB buffer, and the rest in another write.
const Threshold = 3 << 10

// connKey is the context key of the connection a request came on.
type connKey struct{}

// ConnContext records c, the connection whose requests ctx serves, for Write; the server
// that serves the API calls it for every connection (http.Server.ConnContext).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// rawConn returns the socket r came on, through TLS, or nil when the server did not record
// it or it has none.
func rawConn(r *http.Request) syscall.RawConn {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	for c != nil {
		if sc, ok := c.(syscall.Conn); ok {
			raw, err := sc.SyscallConn()
			if err != nil {
				return nil
			}
			return raw
		}
		inner, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = inner.NetConn()
	}
	return nil
}
