package serving

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptedWorker serves a unix socket (or a loopback TCP port): it records each request's
// header block as it arrived and answers with the bytes answer gives for it, closing the
// connection after the answer when close is set.
type scriptedWorker struct {
	path string // the socket's path, or host:port with tcp
	tcp  bool
	mu   sync.Mutex
	got  []string
}

func newScriptedWorker(t testing.TB, answer func(request string) (string, bool)) *scriptedWorker {
	return newScriptedWorkerOn(t, "unix", answer)
}

// newScriptedWorkerOn is newScriptedWorker on network: unix, or tcp (a loopback port).
func newScriptedWorkerOn(t testing.TB, network string, answer func(request string) (string, bool)) *scriptedWorker {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "w.sock")
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	sw := &scriptedWorker{path: l.Addr().String(), tcp: network == "tcp"}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					var req strings.Builder
					for {
						line, err := br.ReadString('\n')
						if err != nil {
							return
						}
						req.WriteString(line)
						if line == "\r\n" {
							break
						}
					}
					sw.mu.Lock()
					sw.got = append(sw.got, req.String())
					sw.mu.Unlock()
					text, closeAfter := answer(req.String())
					if _, err := io.WriteString(c, text); err != nil || closeAfter {
						return
					}
				}
			}()
		}
	}()
	return sw
}

func (sw *scriptedWorker) last() string {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if len(sw.got) == 0 {
		return ""
	}
	return sw.got[len(sw.got)-1]
}

// frontFor serves the runtime's side of a request through the shared proxy or the direct one
// to the worker's socket, as serveProcess does (the runtime's X-Worker-Version and X-Request-Id
// set first), and writes the error answer the proxy returns as its status and code.
func frontFor(t *testing.T, s *Server, sw *scriptedWorker, direct bool) *httptest.Server {
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(VersionHeader, "1.0.0")
		w.Header().Set("X-Request-Id", "rid")
		ctx, cancel := context.WithTimeout(r.Context(), 500*time.Millisecond)
		defer cancel()
		target := &proxyTarget{addr: sw.path, tcp: sw.tcp, base: "/w/", rest: strings.TrimPrefix(r.URL.Path, "/w"), name: "w", limit: 1 << 20,
			timeout: 500 * time.Millisecond, requestID: "rid", ctx: ctx, lease: nil}
		if direct {
			s.serveDirect(w, r, target)
		} else {
			if !sw.tcp {
				target.addr = socketHost(sw.path)
			}
			s.proxy.ServeHTTP(w, r.WithContext(context.WithValue(ctx, proxyTargetKey{}, target)))
		}
		if target.failed != nil {
			w.Header().Set("X-Failed", target.failed.Code+": "+target.failed.Message)
			w.WriteHeader(target.failed.Status)
		}
	}))
	t.Cleanup(front.Close)
	return front
}

// TestDirectProxyRequests: the worker receives from the direct proxy the very bytes the
// shared proxy sends it, for requests with hop-by-hop headers (also those Connection names),
// forwarding headers of their own, the runtime's credentials, TE: trailers, no User-Agent, a
// query, an escaped path, and every method that goes the direct way, on a unix socket and on
// a TCP port (whose Host the shared proxy names).
func TestDirectProxyRequests(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) { checkDirectProxyRequests(t, network) })
	}
}

func checkDirectProxyRequests(t *testing.T, network string) {
	issuer := tokens{"rt-key-1": true}
	s := New(Options{Credentials: Credentials{Header: "X-API-Key", Cookies: []string{"rt_session"}, Issuer: issuer}})
	sw := newScriptedWorkerOn(t, network, func(req string) (string, bool) {
		if strings.HasPrefix(req, "HEAD ") {
			return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", false
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false
	})
	shared, direct := frontFor(t, s, sw, false), frontFor(t, s, sw, true)
	for _, tc := range []struct {
		name, method, path string
		header             [][2]string
	}{
		{"plain", "GET", "/w/hello", [][2]string{{"User-Agent", "test/1"}, {"Accept", "*/*"}}},
		{"no user agent", "GET", "/w/", nil},
		{"head", "HEAD", "/w/hello?x=1&y=%20", nil},
		{"options", "OPTIONS", "/w/hello", [][2]string{{"Origin", "https://a.example"}}},
		{"force query", "GET", "/w/hello?", nil},
		{"escaped path", "GET", "/w/a%20b/c%2Fd", nil},
		{"hop by hop", "GET", "/w/x", [][2]string{{"Connection", "keep-alive, X-Secret, X-Base"}, {"X-Secret", "s"}, {"Keep-Alive", "timeout=5"},
			{"Proxy-Authorization", "Basic eDp5"}, {"Te", "trailers, deflate"}, {"Upgrade", "websocket"}, {"Trailer", "X"}, {"Proxy-Connection", "x"}}},
		{"te without trailers", "GET", "/w/x", [][2]string{{"Te", "deflate"}}},
		{"connection names user agent", "GET", "/w/x", [][2]string{{"Connection", "User-Agent"}, {"User-Agent", "ua"}}},
		{"forwarding headers of the client", "GET", "/w/x", [][2]string{{"X-Forwarded-For", "6.6.6.6"}, {"X-Forwarded-Host", "evil"},
			{"X-Forwarded-Proto", "https"}, {"Forwarded", "for=6.6.6.6"}, {"X-Forwarded-Prefix", "/evil/"}, {"X-Base", "/evil/"}, {"X-Request-Id", "evil"}}},
		{"credentials", "GET", "/w/x", [][2]string{{"X-Api-Key", "rt-key-1"}, {"Authorization", "Bearer rt-key-1"},
			{"Cookie", "a=1; rt_session=tok; b=2"}, {"Cookie", "rt_session=only"}}},
		{"the app's own credentials", "GET", "/w/x", [][2]string{{"Authorization", "Bearer app-token"}, {"Cookie", "a=1"}}},
		{"several lines", "GET", "/w/x", [][2]string{{"Accept", "a"}, {"Accept", "b"}, {"X-Custom", "  padded  "}}},
		{"upgrade without connection upgrade", "GET", "/w/x", [][2]string{{"Upgrade", "websocket"}}},
		{"get with an empty body", "GET", "/w/x", [][2]string{{"Content-Length", "0"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]string
			for i, front := range []*httptest.Server{shared, direct} {
				req, err := http.NewRequest(tc.method, front.URL+tc.path, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, h := range tc.header {
					req.Header.Add(h[0], h[1])
				}
				if tc.path == "/w/hello?" {
					req.URL.ForceQuery = true
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("front %d: status %d (%s)", i, resp.StatusCode, resp.Header.Get("X-Failed"))
				}
				// X-Forwarded-Host names each front.
				got[i] = strings.ReplaceAll(sw.last(), strings.TrimPrefix(front.URL, "http://"), "front")
			}
			if got[0] != got[1] {
				t.Errorf("the shared proxy sends\n%s\nthe direct one\n%s", got[0], got[1])
			}
			for _, leak := range []string{"rt-key-1", "rt_session", "X-Secret", "evil", "6.6.6.6", "Keep-Alive", "Proxy-"} {
				if strings.Contains(got[1], leak) {
					t.Errorf("the worker received %q:\n%s", leak, got[1])
				}
			}
		})
	}
}

// tokens is an Issuer knowing a set of tokens.
type tokens map[string]bool

func (k tokens) HoldsCredential(s string) bool {
	for token := range k {
		if strings.Contains(s, token) {
			return true
		}
	}
	return false
}

// TestDirectProxyAnswers: the client receives through the direct proxy what it receives
// through the shared one, for well-formed answers (hop-by-hop headers, the worker's own
// X-Request-Id and X-Worker-Version, informational answers, chunked bodies with trailers,
// bodies up to the connection's end, streams, HEAD, 204) and hostile ones (a malformed status
// line, a header too large, a connection closed mid-answer, a protocol switch nobody asked
// for, a body shorter than announced).
func TestDirectProxyAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, method, answer string
		close, sniffed       bool
	}{
		{"small", "GET", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello", false, false},
		{"hop by hop", "GET", "HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=1\r\nX-Kept: 2\r\nContent-Length: 2\r\n\r\nok", false, false},
		{"the worker's id and version", "GET", "HTTP/1.1 200 OK\r\nX-Request-Id: worker\r\nX-Worker-Version: 9.9.9\r\nContent-Length: 2\r\n\r\nok", false, false},
		{"set cookies", "GET", "HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\n\r\nok", false, false},
		{"informational", "GET", "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false, false},
		{"chunked with trailers", "GET", "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-Sum: 5\r\nX-Late: 1\r\n\r\n", false, true},
		{"until the end", "GET", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nno length", true, false},
		{"until the end, no type", "GET", "HTTP/1.1 200 OK\r\n\r\nno length", true, true},
		{"event stream", "GET", "HTTP/1.1 200 OK\r\nContent-Type: Text/Event-Stream; charset=utf-8\r\nContent-Length: 9\r\n\r\ndata: x\n\n", false, false},
		{"head", "HEAD", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n", false, false},
		{"no content", "GET", "HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n", false, false},
		{"not found", "GET", "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope", false, false},
		{"malformed status line", "GET", "HTTP/1.1 abc OK\r\nContent-Length: 2\r\n\r\nok", true, false},
		{"not http", "GET", "hello there\r\n\r\n", true, false},
		{"huge header", "GET", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("x", 1<<20) + "\r\nContent-Length: 2\r\n\r\nok", true, false},
		{"closed in the header", "GET", "HTTP/1.1 200 OK\r\nContent-Le", true, false},
		{"closed in the body", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this", true, false},
		{"closed in a chunk", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc", true, true},
		{"closed at once", "GET", "", true, false},
		{"switch nobody asked for", "GET", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", true, false},
		{"no reason", "GET", "HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok", false, false},
		{"reason glued to the code", "GET", "HTTP/1.1 200OK\r\nContent-Length: 2\r\n\r\nok", true, false},
		{"http/1.0", "GET", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", true, false},
		{"connection close", "GET", "HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nContent-Length: 2\r\n\r\nok", true, false},
		{"names not canonical", "GET", "HTTP/1.1 200 OK\r\ncontent-type: text/x\r\nx-request-id: w\r\ncontent-length: 2\r\n\r\nok", false, false},
		{"folded line", "GET", "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 2\r\n\r\nok", true, false},
		{"two lengths", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", false, false},
		{"lengths that differ", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok", true, false},
		{"a length not a number", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 2x\r\n\r\nok", true, false},
		{"a negative length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\nok", true, false},
		{"a huge length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nok", true, false},
		{"blanks and tabs", "GET", "HTTP/1.1 200 OK\r\nX-A:\t a b \t\r\nX-Empty:\r\nContent-Length:  2 \r\n\r\nok", false, false},
		{"obs-text", "GET", "HTTP/1.1 200 OK\r\nX-A: caf\xc3\xa9\r\nContent-Length: 2\r\n\r\nok", false, false},
		{"a control byte", "GET", "HTTP/1.1 200 OK\r\nX-A: a\x01b\r\nContent-Length: 2\r\n\r\nok", true, false},
		{"a bare line feed", "GET", "HTTP/1.1 200 OK\r\nX-A: a\nX-B: b\r\nContent-Length: 2\r\n\r\nok", true, false},
		{"a blank before the colon", "GET", "HTTP/1.1 200 OK\r\nX-A : a\r\nContent-Length: 2\r\n\r\nok", true, false},
		{"no colon", "GET", "HTTP/1.1 200 OK\r\nX-A a\r\nContent-Length: 2\r\n\r\nok", true, false},
		{"odd name characters", "GET", "HTTP/1.1 200 OK\r\nX_A.b: 1\r\nContent-Length: 2\r\n\r\nok", false, false},
		{"repeated names", "GET", "HTTP/1.1 200 OK\r\nVary: A\r\nVary: B\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\n\r\nok", false, false},
		{"a head larger than the buffer", "GET", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("y", 6000) + "\r\nContent-Length: 2\r\n\r\nok", false, false},
		{"a body larger than the copy buffer", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("z", 100000), false, false},
		{"an empty body", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, false},
		{"options", "OPTIONS", "HTTP/1.1 200 OK\r\nAllow: GET\r\nContent-Length: 0\r\n\r\n", false, false},
		{"no answer", "GET", "", false, false},
		{"half an answer", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this", false, false},
		{"switch without a protocol", "GET", "HTTP/1.1 101 Switching Protocols\r\n\r\n", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{})
			sw := newScriptedWorker(t, func(string) (string, bool) { return tc.answer, tc.close })
			var got [2]string
			for i, front := range []*httptest.Server{frontFor(t, s, sw, false), frontFor(t, s, sw, true)} {
				got[i] = clientView(t, front, tc.method)
			}
			if tc.sniffed {
				// Whether a stream's header goes out before its first bytes, which would be
				// sniffed for a Content-Type, is a race in both.
				for i := range got {
					got[i] = strings.Replace(got[i], "Content-Type: text/plain; charset=utf-8\n", "", 1)
				}
			}
			// Why the worker did not answer is the transport's error, in words of its own: the
			// shared proxy's http.Transport says more ("net/http: HTTP/1.x transport connection
			// broken: …", EOF for the direct one's unexpected EOF). Status and code must agree.
			for i := range got {
				got[i] = failedReason.ReplaceAllString(got[i], "did not answer: …")
			}
			if tc.name == "no answer" {
				// The shared proxy's connection deadline races the context's: 502 or 504.
				if !strings.HasPrefix(got[1], "504 ") || !strings.Contains(got[1], "WORKER_TIMEOUT") {
					t.Errorf("a worker that does not answer: %s", got[1])
				}
				return
			}
			if got[0] != got[1] {
				t.Errorf("through the shared proxy the client sees\n%s\nthrough the direct one\n%s", got[0], got[1])
			}
		})
	}
}

// failedReason is the transport's error in the message of a request the worker did not answer.
var failedReason = regexp.MustCompile(`did not answer: .*`)

// clientView is what a client sees of one request: status, headers but Date, body, trailers,
// or the error.
func clientView(t *testing.T, front *httptest.Server, method string) string {
	t.Helper()
	req, _ := http.NewRequest(method, front.URL+"/w/x", nil)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return "error: " + strings.ReplaceAll(err.Error(), front.URL, "")
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	var b strings.Builder
	b.WriteString(resp.Status + "\n")
	resp.Header.Del("Date")
	for _, k := range slices.Sorted(maps.Keys(resp.Header)) {
		b.WriteString(k + ": " + strings.Join(resp.Header[k], " | ") + "\n")
	}
	b.WriteString("body: " + string(body) + "\n")
	if err != nil {
		b.WriteString("body error: " + err.Error() + "\n")
	}
	for _, k := range slices.Sorted(maps.Keys(resp.Trailer)) {
		b.WriteString("trailer " + k + ": " + strings.Join(resp.Trailer[k], " | ") + "\n")
	}
	return b.String()
}

// TestDirectProxyRetry: a kept connection the worker closed after its answer is replaced
// without failing the next request, which is sent once more; one the worker keeps serves
// the requests one after another.
func TestDirectProxyRetry(t *testing.T) {
	for _, closeAfter := range []bool{false, true} {
		s := New(Options{})
		sw := newScriptedWorker(t, func(string) (string, bool) { return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", closeAfter })
		front := frontFor(t, s, sw, true)
		for range 3 {
			if got := clientView(t, front, "GET"); !strings.HasPrefix(got, "200 OK\n") || !strings.Contains(got, "body: ok\n") {
				t.Fatalf("closing after each answer %v: %s", closeAfter, got)
			}
		}
		s.direct.mu.Lock()
		kept := len(s.direct.idle[sw.path])
		s.direct.mu.Unlock()
		if kept != 1 {
			t.Errorf("closing after each answer %v: %d connections kept, want 1", closeAfter, kept)
		}
	}
}

// BenchmarkDirectProxy compares the direct proxy with the shared one on a small answer from a
// worker on its socket (the worker's own work included).
func BenchmarkDirectProxy(b *testing.B) {
	sw := newScriptedWorker(b, func(string) (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nDate: Fri, 27 Nov 2026 10:00:00 GMT\r\n\r\nok", false
	})
	s := New(Options{Credentials: Credentials{Header: "X-API-Key", Cookies: []string{"rt_session"}}})
	req := httptest.NewRequest("GET", "http://example.com/w/sleep?d=0", nil)
	req.Header.Set("User-Agent", "Go-http-client/1.1")
	req.Header.Set("Accept-Encoding", "gzip")
	for _, name := range []string{"shared", "direct"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx, cancel := context.WithTimeout(req.Context(), time.Minute)
				t := &proxyTarget{addr: sw.path, base: "/w/", rest: "/sleep", name: "w", limit: 1 << 20, timeout: time.Minute, requestID: "id", ctx: ctx}
				w := httptest.NewRecorder()
				if name == "direct" {
					s.serveDirect(w, req, t)
				} else {
					t.addr = socketHost(sw.path)
					s.proxy.ServeHTTP(w, req.WithContext(context.WithValue(ctx, proxyTargetKey{}, t)))
				}
				cancel()
				if w.Code != 200 || t.failed != nil {
					b.Fatalf("%d %v", w.Code, t.failed)
				}
			}
		})
	}
}

// TestAnswerHeadLimit: both proxies read at most worker_max_header_size of a worker's answer
// head, informational answers included, and answer 502 naming the setting past it; a head
// within the limit passes through both.
func TestAnswerHeadLimit(t *testing.T) {
	const limit = 64 << 10
	head := func(size int) string {
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Big: " + strings.Repeat("x", size) + "\r\n\r\nok"
	}
	// A head of about size bytes within the caps of a value and of the lines (MaxHeaderValue,
	// MaxHeaderLines).
	lines := func(size int) string {
		var b strings.Builder
		for i := 0; b.Len() < size-7100; i++ {
			fmt.Fprintf(&b, "X-Big-%d: %s\r\n", i, strings.Repeat("x", 7000))
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + b.String() + "\r\nok"
	}
	for _, tc := range []struct {
		name, answer string
		passes       bool
	}{
		{"within", lines(limit - 200), true},
		{"one line past", head(limit), false},
		{"many lines", "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Line: yyyyyyyyyyyyyyyy\r\n", 8<<20/26) + "Content-Length: 2\r\n\r\nok", false},
		{"informational answers, each within", strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n", limit/50) + head(10), true},
		{"an informational answer past it", "HTTP/1.1 103 Early Hints\r\nLink: " + strings.Repeat("z", limit) + "\r\n\r\n" + head(10), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{MaxHeaderSize: limit})
			sw := newScriptedWorker(t, func(string) (string, bool) { return tc.answer, true })
			for _, direct := range []bool{false, true} {
				got := clientView(t, frontFor(t, s, sw, direct), "GET")
				switch {
				case tc.passes && (!strings.HasPrefix(got, "200 OK\n") || !strings.Contains(got, "body: ok\n")):
					t.Errorf("direct %v: a head within the limit: %.300s", direct, got)
				case !tc.passes && (!strings.HasPrefix(got, "502 ") || !strings.Contains(got, "WORKER_UNAVAILABLE") || !strings.Contains(got, "worker_max_header_size")):
					t.Errorf("direct %v: a head past the limit: %.300s, want 502 WORKER_UNAVAILABLE naming worker_max_header_size", direct, got)
				}
			}
		})
	}
}
