package cork

import (
	"net/http"
	"syscall"
)

// Write runs write, which writes a whole answer of size bytes to w, with the connection
// corked (TCP_CORK) when the answer is larger than net/http writes at once: the header and the
// body then leave in one segment where the kernel can make one, and the client reads the
// answer in one go rather than waking for each piece. HTTP/2 streams share their connection
// and are written elsewhere: they are left as they are.
func Write(w http.ResponseWriter, r *http.Request, size int, write func()) {
	if size < Threshold || r.ProtoMajor != 1 || r.Method == http.MethodHead {
		write()
		return
	}
	raw := rawConn(r)
	if raw == nil {
		write()
		return
	}
	cork := func(on int) {
		_ = raw.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, on) })
	}
	cork(1)
	defer cork(0)
	write()
	// What net/http still buffers goes to the kernel before the cork comes off.
	_ = http.NewResponseController(w).Flush()
}
