package serving

import (
	"io"
	"net/http"
	"slices"
	"strings"
)

// GuardResponse lets serve answer through a writer that keeps the response from setting or
// clearing the session cookies named cookies; serve is the part of a request's handling where
// uploaded code answers (a worker, a plugin route or an onRequest hook). Whatever the
// handlers put in the header, Set-Cookie lines naming one of them and a Clear-Site-Data that
// clears cookies are dropped just before the header goes out, also when serve returns
// without writing and leaves the header to the server.
func GuardResponse(w http.ResponseWriter, cookies []string, serve func(http.ResponseWriter)) {
	gw := &unitWriter{ResponseWriter: w, cookies: cookies}
	defer gw.guard()
	serve(gw)
}

// Guard returns GuardResponse's writer for the session cookies of the server's Credentials, and
// done, to call once the handlers have returned (it guards a header left to the server). The
// data plane's front (pluginhost) hands it to whatever uploaded code answers: workers, plugin
// routes and hooks alike.
func (s *Server) Guard(w http.ResponseWriter) (guarded http.ResponseWriter, done func()) {
	gw := &unitWriter{ResponseWriter: w, cookies: s.opts.Credentials.Cookies}
	return gw, gw.guard
}

// unitWriter is the writer GuardResponse answers through. It implements no optional interface
// that would let the header out past it (io.ReaderFrom and flushing are its own); hijacking
// goes through Unwrap, and the one hijacker that writes a header itself, the worker proxy,
// guards that header itself.
type unitWriter struct {
	http.ResponseWriter
	cookies []string
	sent    bool // the final header is out; later changes to the map are not sent
}

func (w *unitWriter) guard() {
	if !w.sent {
		DropCookie(w.ResponseWriter.Header(), w.cookies...)
	}
}

// WriteHeader guards every header sent, interim (1xx) ones included.
func (w *unitWriter) WriteHeader(code int) {
	w.guard()
	if code >= 200 || code == http.StatusSwitchingProtocols {
		w.sent = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *unitWriter) Write(b []byte) (int, error) {
	w.guard()
	w.sent = true
	return w.ResponseWriter.Write(b)
}

// ReadFrom keeps the underlying writer's sendfile path for files.
func (w *unitWriter) ReadFrom(src io.Reader) (int64, error) {
	w.guard()
	w.sent = true
	return io.Copy(w.ResponseWriter, src)
}

func (w *unitWriter) Flush() { _ = w.FlushError() }

// FlushError sends the header, guarded, and what is buffered.
func (w *unitWriter) FlushError() error {
	w.guard()
	w.sent = true
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *unitWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// DropCookie removes from a response header the lines that would set or clear a session
// cookie named in cookies. A cookie's name is case-sensitive, but a browser or a client library
// may be lenient, so names equal to one but for case and surrounding blanks or
// control characters go too; a pair without "=" counts by its whole text, since browsers
// store it as a nameless cookie that servers read back as a cookie of that name.
// Clear-Site-Data naming "cookies" (or "*") would clear every cookie of the site, the session
// included, so it goes as well. Header names are compared without regard to case, since
// a handler may write the map directly.
func DropCookie(h http.Header, cookies ...string) {
	for name, lines := range h {
		switch {
		case strings.EqualFold(name, "Set-Cookie"):
			if kept := slices.DeleteFunc(lines, func(line string) bool { return setsCookie(line, cookies) }); len(kept) > 0 {
				h[name] = kept
			} else {
				delete(h, name)
			}
		case strings.EqualFold(name, "Clear-Site-Data"):
			if slices.ContainsFunc(lines, clearsCookies) {
				delete(h, name)
			}
		}
	}
}

func setsCookie(line string, cookies []string) bool {
	pair, _, _ := strings.Cut(line, ";")
	name, _, _ := strings.Cut(pair, "=")
	return namesCookie(name, cookies)
}

func clearsCookies(value string) bool {
	for _, token := range strings.Split(value, ",") {
		token = strings.Trim(strings.TrimFunc(token, blankOrControl), `"`)
		if strings.EqualFold(token, "cookies") || token == "*" {
			return true
		}
	}
	return false
}

func blankOrControl(r rune) bool { return r <= ' ' || r == 0x7f }
