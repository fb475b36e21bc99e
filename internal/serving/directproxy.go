package serving

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/http/httpguts"

	"github.com/caddy-runtime/runtime/internal/trace"
)

// The direct proxy serves the requests to a worker's process (on its unix socket or its TCP
// port) that directRequest picks without httputil.ReverseProxy, over connections of its own
// (directPool): the request line and headers go straight into the connection's buffer, and
// the answer's headers and body straight to the client. It does what the shared proxy does for those requests, header by header (hop-by-hop headers both
// ways, X-Forwarded-*, X-Base, X-Request-Id, credentials, 1xx answers, trailers, flushing of
// streams), at a fraction of its allocations: the proxy's CPU is most of the runtime's share
// of a small answer.

// directRequest tells whether r, to a worker's process, goes the direct way: a request
// without a body that may be sent twice and switches no protocol, to a path.
func directRequest(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		return false
	}
	return r.ContentLength == 0 && r.URL.Opaque == "" && upgradeType(r.Header) == ""
}

// upgradeType is the protocol a header asks to switch to, as the shared proxy reads it.
func upgradeType(h http.Header) string {
	if !httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade") {
		return ""
	}
	return h.Get("Upgrade")
}

// hopHeaders are the hop-by-hop headers the shared proxy removes both ways.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// directSet are the request headers the proxy sets itself (or removes): a client's are not
// passed on. Host, User-Agent, Content-Length, Transfer-Encoding and Trailer are written apart
// or not at all, as http.Request.Write does.
var directSet = map[string]bool{
	"Forwarded": true, "X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true,
	"X-Forwarded-Prefix": true, "X-Base": true, trace.RequestIDHeader: true,
	"Host": true, "User-Agent": true, "Content-Length": true, "Transfer-Encoding": true, "Trailer": true,
}

func init() {
	for _, h := range hopHeaders {
		directSet[h] = true
	}
}

// headerLines is a header to write and its lines, or its one line when lines is nil.
type headerLines struct {
	key   string
	lines []string
	one   string
}

// serveDirect proxies r to the worker's socket, whose path is t.addr, over a kept connection.
func (s *Server) serveDirect(w http.ResponseWriter, r *http.Request, t *proxyTarget) {
	res, err := s.exchangeDirect(w, r, t)
	if err != nil {
		s.proxyFailed(t, err)
		return
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		// Not asked for: the shared proxy refuses it too.
		res.Body.Close()
		up := upgradeType(res.Header)
		switch {
		case !isPrint(up):
			err = fmt.Errorf("backend tried to switch to invalid protocol %q", up)
		case up != "":
			err = fmt.Errorf("backend tried to switch protocol %q when %q was requested", up, "")
		default:
			err = errors.New("internal error: 101 switching protocols response with non-writable body")
		}
		s.proxyFailed(t, err)
		return
	}
	h := w.Header()
	// readSimple puts a head within the caps (a few lines in its buffer) in h, beside the
	// runtime's own headers.
	head := h
	if res.Header != nil {
		head = res.Header
		removeHopByHop(res.Header)
		// The response already carries the runtime's id and version.
		res.Header.Del(trace.RequestIDHeader)
		res.Header.Del(VersionHeader)
	}
	if err := shapeAnswer(t, r.Method, res, head, res.Header != nil); err != nil {
		res.Body.Close()
		s.proxyFailed(t, err)
		return
	}
	if res.Header != nil { // else readSimple put it in h
		for k, vv := range res.Header {
			for _, v := range vv {
				h.Add(k, v)
			}
		}
	}
	announced := len(res.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range res.Trailer {
			keys = append(keys, k)
		}
		h.Add("Trailer", strings.Join(keys, ", "))
	}
	w.WriteHeader(res.StatusCode)
	if err := copyAnswer(w, res, h.Get("Content-Type")); err != nil {
		defer res.Body.Close()
		if errors.As(err, new(workerReadError)) && !errors.Is(err, context.Canceled) {
			s.opts.Logger.Warn("a worker failed after it began to answer", zap.String("worker", t.name),
				zap.String("request_id", t.requestID), zap.Error(err))
		}
		if r.Context().Value(http.ServerContextKey) != nil {
			// The answer is cut: the client must not take it for whole.
			panic(http.ErrAbortHandler)
		}
		return
	}
	res.Body.Close() // now, to read the trailers
	if len(res.Trailer) > 0 {
		// Trailers force chunking, also of a short body.
		_ = http.NewResponseController(w).Flush()
	}
	if len(res.Trailer) == announced {
		for k, vv := range res.Trailer {
			for _, v := range vv {
				h.Add(k, v)
			}
		}
		return
	}
	for k, vv := range res.Trailer {
		for _, v := range vv {
			h.Add(http.TrailerPrefix+k, v)
		}
	}
}

// copyAnswer copies the answer's body to w with a pooled buffer; a stream (an unknown length,
// or server-sent events) is flushed as it comes, and its header at once, as the shared proxy
// does.
func copyAnswer(w http.ResponseWriter, res *http.Response, contentType string) error {
	var dst io.Writer = w
	if res.ContentLength == -1 || isEventStream(contentType) {
		sw := &streamWriter{dst: w, flush: http.NewResponseController(w).Flush, pending: true}
		// The header goes out at once unless the body's first bytes come first.
		sw.t = time.AfterFunc(0, sw.delayedFlush)
		defer sw.stop()
		dst = sw
	}
	bp := proxyBuffers.Get().(*[]byte)
	defer proxyBuffers.Put(bp)
	buf := *bp
	for {
		nr, rerr := res.Body.Read(buf)
		if nr > 0 {
			nw, werr := dst.Write(buf[:nr])
			if werr != nil {
				return werr
			}
			if nr != nw {
				return io.ErrShortWrite
			}
		}
		if rerr != nil {
			if rerr == io.EOF {
				return nil
			}
			return workerReadError{rerr}
		}
	}
}

// workerReadError is a failure to read the worker's answer, as opposed to one to write it to
// the client (who may simply have gone).
type workerReadError struct{ err error }

func (e workerReadError) Error() string { return "reading the worker's answer: " + e.err.Error() }
func (e workerReadError) Unwrap() error { return e.err }

// streamWriter flushes each write, and the header once if no write came first.
type streamWriter struct {
	mu      sync.Mutex
	dst     io.Writer
	flush   func() error
	t       *time.Timer
	pending bool // the header's flush has not happened yet
}

func (m *streamWriter) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.dst.Write(p)
	_ = m.flush()
	return n, err
}

func (m *streamWriter) delayedFlush() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.pending { // stopped meanwhile
		return
	}
	_ = m.flush()
	m.pending = false
}

func (m *streamWriter) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending = false
	m.t.Stop()
}

// isEventStream tells whether a Content-Type is text/event-stream, as mime.ParseMediaType
// reads it; only a value that names it is parsed.
func isEventStream(ct string) bool {
	if ct == "" || !containsFold(ct, "event-stream") {
		return false
	}
	base, _, _ := mime.ParseMediaType(ct)
	return base == "text/event-stream"
}

func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

func isPrint(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// removeHopByHop removes the hop-by-hop headers, those the Connection header names among them.
func removeHopByHop(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, f := range hopHeaders {
		h.Del(f)
	}
}

// exchangeDirect sends r over a kept connection to the worker and reads its answer, forwarding
// informational answers to w; a kept connection the worker closed meanwhile fails at once, and
// the request, which changes nothing, goes once more on a new connection, not on another kept
// one: a worker's idle timeout (node:http's 5 s, Bun.serve's 10 s) closes every connection
// kept as long, so those kept before the one that failed are closed too.
func (s *Server) exchangeDirect(w http.ResponseWriter, r *http.Request, t *proxyTarget) (*http.Response, error) {
	dc, kept, err := s.direct.get(t.ctx, t.workerAddr())
	if err != nil {
		return nil, err
	}
	res, err := s.roundTripDirect(w, r, t, dc)
	if err == nil {
		return res, nil
	}
	dc.Close()
	if !kept || !closedByPeer(err) {
		return nil, err
	}
	s.direct.dropIdle(t.addr, dc.used)
	if dc, err = s.direct.dial(t.ctx, t.workerAddr()); err != nil {
		return nil, err
	}
	res, err = s.roundTripDirect(w, r, t, dc)
	if err != nil {
		dc.Close()
		return nil, err
	}
	return res, nil
}

// roundTripDirect writes r on dc and reads the answer; its body gives dc back once read.
func (s *Server) roundTripDirect(w http.ResponseWriter, r *http.Request, t *proxyTarget, dc *directConn) (*http.Response, error) {
	// The context's end (the worker's timeout, or the client gone) interrupts the exchange.
	stop := context.AfterFunc(t.ctx, func() { _ = dc.SetDeadline(aLongTimeAgo) })
	res, err := s.exchange(w, r, t, dc)
	if err != nil {
		stop()
		return nil, err
	}
	body := &directBody{ReadCloser: res.Body, pool: s.direct, dc: dc, stop: stop, keep: !res.Close}
	if res.Body == http.NoBody {
		body.finish(true)
		return res, nil
	}
	res.Body = body
	return res, nil
}

func (s *Server) exchange(w http.ResponseWriter, r *http.Request, t *proxyTarget, dc *directConn) (*http.Response, error) {
	if err := s.writeDirect(dc.bw, r, t); err != nil {
		return nil, err
	}
	if err := dc.bw.Flush(); err != nil {
		return nil, err
	}
	// Each head is read within worker_max_header_size, as the shared proxy's transport reads
	// it (which counts each informational answer it forwards apart); the body is not bounded.
	defer func() { dc.head.left = -1 }()
	dc.head.left = s.opts.MaxHeaderSize
	if r.Method != http.MethodHead {
		if res := readSimple(dc.br, w.Header()); res != nil {
			return res, nil
		}
	}
	// ReadResponse reads a HEAD answer's header alone.
	req := &http.Request{Method: r.Method}
	for {
		res, err := http.ReadResponse(dc.br, req)
		if err != nil && dc.head.left == 0 {
			// bufio.Reader.ReadLine hands a line cut by the limit over without its error,
			// which ReadResponse then reports as malformed.
			err = errHeaderTooLarge
		}
		if err != nil || res.StatusCode >= 200 || res.StatusCode == http.StatusSwitchingProtocols {
			return res, err
		}
		// An informational answer goes to the client as it comes.
		h := w.Header()
		for k, vv := range res.Header {
			for _, v := range vv {
				h.Add(k, v)
			}
		}
		w.WriteHeader(res.StatusCode)
		clear(h)
		dc.head.left = s.opts.MaxHeaderSize
	}
}

// readSimple reads the head of the most common answer itself, straight into the client's
// header h, as the shared proxy would leave it there (hop-by-hop headers and the worker's
// X-Request-Id and X-Worker-Version dropped): an HTTP/1.1 final answer but 204 and 304, its
// head whole in br's buffer, with one Content-Length and neither Transfer-Encoding nor
// Trailer, each line a canonical name, a colon and a valid value. Anything else it leaves
// unread, for http.ReadResponse, and returns nil. The answer's Header is nil: it is in h.
func readSimple(br *bufio.Reader, h http.Header) *http.Response {
	if _, err := br.Peek(1); err != nil {
		return nil
	}
	b, _ := br.Peek(br.Buffered())
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 || len(b) < 13 || string(b[:9]) != "HTTP/1.1 " {
		return nil
	}
	status := 0
	for _, c := range b[9:12] {
		if c < '0' || c > '9' {
			return nil
		}
		status = status*10 + int(c-'0')
	}
	if status < 200 || status == http.StatusNoContent || status == http.StatusNotModified {
		return nil
	}
	head := string(b[:end+2]) // one string for every name and value
	first := strings.Index(head, "\r\n")
	if rest := head[12:first]; rest != "" && rest[0] != ' ' {
		return nil
	}
	fields := ""
	if end > first {
		fields = head[first+2 : end]
	}
	var storage [32][2]string
	lines := storage[:0]
	length := int64(-1)
	var connection []string
	for line := range strings.SplitSeq(fields, "\r\n") {
		if fields == "" {
			break
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || !canonicalName(k) || len(lines) == len(storage) {
			return nil
		}
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
				return nil
			}
		}
		v = strings.Trim(v, " \t")
		switch k {
		case "Transfer-Encoding", "Trailer":
			return nil
		case "Content-Length":
			if length >= 0 || v == "" || len(v) > 18 || strings.ContainsFunc(v, func(c rune) bool { return c < '0' || c > '9' }) {
				return nil
			}
			length = 0
			for _, c := range v {
				length = length*10 + int64(c-'0')
			}
		case "Connection":
			connection = append(connection, v)
		}
		lines = append(lines, [2]string{k, v})
	}
	if length < 0 {
		return nil
	}
	closing := httpguts.HeaderValuesContainsToken(connection, "close")
	if closing {
		// ReadResponse drops a Connection header that says close, and with it what it lists:
		// only the shared proxy's hop-by-hop list applies then.
		connection = nil
	}
	var named []string // the names Connection lists, canonical
	for _, f := range connection {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				named = append(named, textproto.CanonicalMIMEHeaderKey(sf))
			}
		}
	}
	values := make([]string, len(lines)) // one array for the lines of every new name
	for i, kv := range lines {
		k := kv[0]
		if k == trace.RequestIDHeader || k == VersionHeader || slices.Contains(hopHeaders, k) || slices.Contains(named, k) {
			continue
		}
		if vv, ok := h[k]; ok {
			h[k] = append(vv, kv[1])
		} else {
			values[i] = kv[1]
			h[k] = values[i : i+1 : i+1]
		}
	}
	br.Discard(end + 4)
	res := &http.Response{StatusCode: status, ContentLength: length, Close: closing, Body: http.NoBody}
	if length > 0 {
		res.Body = &lengthBody{r: br, n: length}
	}
	return res
}

// lengthBody reads an answer's body of a known length, as http.ReadResponse's does.
type lengthBody struct {
	r io.Reader
	n int64
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	if err == io.EOF && b.n > 0 {
		err = io.ErrUnexpectedEOF
	}
	if err == nil && b.n == 0 {
		err = io.EOF
	}
	return n, err
}

func (b *lengthBody) Close() error { return nil }

// canonicalName tells whether k is a header name in its canonical form.
func canonicalName(k string) bool {
	if k == "" {
		return false
	}
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '-':
			upper = true
			continue
		case 'A' <= c && c <= 'Z':
			if !upper {
				return false
			}
		case 'a' <= c && c <= 'z':
			if upper {
				return false
			}
		case '0' <= c && c <= '9':
		default:
			return false
		}
		upper = false
	}
	return true
}

// writeDirect writes the request the worker receives for r into bw: the shared proxy's,
// byte for byte (http.Request.Write's order: the request line, Host, User-Agent, then the
// other headers sorted by name; no Content-Length for a request without a body).
func (s *Server) writeDirect(bw *bufio.Writer, r *http.Request, t *proxyTarget) error {
	u := url.URL{Path: t.rest, RawQuery: r.URL.RawQuery, ForceQuery: r.URL.ForceQuery}
	if u.Path == "" {
		u.Path = "/"
	}
	ruri := u.RequestURI()
	if strings.ContainsFunc(ruri, func(c rune) bool { return c < ' ' || c == 0x7f }) {
		return errors.New("net/http: can't write control character in Request.URL")
	}
	var connection []string // the names the Connection header lists, canonical
	for _, f := range r.Header["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				connection = append(connection, textproto.CanonicalMIMEHeaderKey(sf))
			}
		}
	}
	passed := func(k string) bool { return !slices.Contains(connection, k) }
	creds := s.opts.Credentials

	var storage [24]headerLines
	out := storage[:0]
	for k, lines := range r.Header {
		if directSet[k] || !passed(k) {
			continue
		}
		if creds.concerns(k) {
			var changed bool
			if lines, changed = creds.strip(k, lines); changed && len(lines) == 0 {
				continue
			}
		}
		out = append(out, headerLines{key: k, lines: lines})
	}
	set := func(k, v string) {
		if creds.concerns(k) {
			lines, _ := creds.strip(k, []string{v})
			if len(lines) > 0 {
				out = append(out, headerLines{key: k, lines: lines})
			}
			return
		}
		out = append(out, headerLines{key: k, one: v})
	}
	if httpguts.HeaderValuesContainsToken(r.Header["Te"], "trailers") {
		set("Te", "trailers")
	}
	if clientIP, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		set("X-Forwarded-For", clientIP)
	}
	set("X-Forwarded-Host", r.Host)
	if r.TLS == nil {
		set("X-Forwarded-Proto", "http")
	} else {
		set("X-Forwarded-Proto", "https")
	}
	set("X-Forwarded-Prefix", t.base)
	set("X-Base", t.base)
	set(trace.RequestIDHeader, t.requestID)
	slices.SortFunc(out, func(a, b headerLines) int { return cmp.Compare(a.key, b.key) })

	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	bw.WriteString(ruri)
	// Host as the shared proxy writes it: the worker's host:port, or localhost for a socket.
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	if t.tcp {
		bw.WriteString(t.addr)
	} else {
		bw.WriteString("localhost")
	}
	bw.WriteString("\r\n")
	if ua, ok := r.Header["User-Agent"]; ok && passed("User-Agent") {
		if creds.concerns("User-Agent") {
			ua, _ = creds.strip("User-Agent", ua)
		}
		if len(ua) > 0 {
			if v := headerValue(ua[0]); v != "" {
				bw.WriteString("User-Agent: ")
				bw.WriteString(v)
				bw.WriteString("\r\n")
			}
		}
	}
	for _, kv := range out {
		if !httpguts.ValidHeaderFieldName(kv.key) {
			continue
		}
		if kv.lines == nil {
			writeHeaderLine(bw, kv.key, kv.one)
		}
		for _, v := range kv.lines {
			writeHeaderLine(bw, kv.key, v)
		}
	}
	_, err := bw.WriteString("\r\n")
	return err
}

func writeHeaderLine(bw *bufio.Writer, k, v string) {
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(headerValue(v))
	bw.WriteString("\r\n")
}

// headerValue is a header line's value as http.Header.Write writes it: line breaks as blanks,
// blanks trimmed.
func headerValue(v string) string {
	if strings.ContainsAny(v, "\r\n") {
		v = strings.NewReplacer("\n", " ", "\r", " ").Replace(v)
	}
	return textproto.TrimString(v)
}
