package serving

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strconv"

	"github.com/caddy-runtime/runtime/internal/envelope"
)

// The header caps of process workers, as the older implementation had them: on the requests
// they get (431 past one) and the answers they give (502). worker_max_header_size bounds the
// bytes of an answer's head read at all; these apply to the head once read.
const (
	MaxHeaderLines = 100
	MaxHeaderValue = 8 << 10
	MaxHeaderTotal = 64 << 10
)

// Error codes of the header caps.
const (
	CodeRequestHeadersTooLarge = "REQUEST_HEADERS_TOO_LARGE"
	CodeWorkerHeadersTooLarge  = "WORKER_HEADERS_TOO_LARGE"
	CodeFreshWorkersBusy       = "FRESH_WORKERS_BUSY"
)

// capsText names the caps in messages.
var capsText = fmt.Sprintf("%d header lines, %d KiB a value and %d KiB in all", MaxHeaderLines, MaxHeaderValue>>10, MaxHeaderTotal>>10)

// overCaps tells which header cap h passes ("" for none): its lines, a value's bytes, or all
// names and values with their separators.
func overCaps(h http.Header) string {
	lines, total := 0, 0
	for k, vv := range h {
		for _, v := range vv {
			if len(v) > MaxHeaderValue {
				return fmt.Sprintf("a %s value of %d bytes, past the cap of %d KiB a value", k, len(v), MaxHeaderValue>>10)
			}
			lines++
			total += len(k) + len(v) + 4 // ": " and CRLF
		}
	}
	switch {
	case lines > MaxHeaderLines:
		return fmt.Sprintf("%d header lines, past the cap of %d", lines, MaxHeaderLines)
	case total > MaxHeaderTotal:
		return fmt.Sprintf("%d bytes of headers, past the cap of %d KiB in all", total, MaxHeaderTotal>>10)
	}
	return ""
}

// requestOverCaps is the answer to a request whose header passes a cap, nil for one within.
func requestOverCaps(h http.Header, name string) *envelope.Error {
	why := overCaps(h)
	if why == "" {
		return nil
	}
	return envelope.Errorf(http.StatusRequestHeaderFieldsTooLarge, CodeRequestHeadersTooLarge,
		"the request has %s; worker %q takes at most %s: send fewer or shorter headers", why, name, capsText)
}

// maxHeadScan bounds the bytes of an HTML answer held back while looking for its <head>.
const maxHeadScan = 64 << 10

// The places of an HTML page where the runtime's tags go, in the order they are looked for:
// after <head>, else after <html>, else after the doctype, else first.
var (
	headTag    = regexp.MustCompile(`(?i)<head(\s[^>]*)?>`)
	htmlTag    = regexp.MustCompile(`(?i)<html(\s[^>]*)?>`)
	doctypeTag = regexp.MustCompile(`(?i)<!doctype[^>]*>`)
)

// insertAt is where the runtime's tags go in the start of an HTML page.
func insertAt(page []byte) int {
	for _, re := range []*regexp.Regexp{headTag, htmlTag, doctypeTag} {
		if loc := re.FindIndex(page); loc != nil {
			return loc[1]
		}
	}
	return 0
}

// baseTag is the <base href> of a worker's base.
func baseTag(base string) string { return `<base href="` + html.EscapeString(base) + `">` }

// envScript is the script that gives a page env as window.__env__: JSON as encoding/json
// writes it escapes <, > and &, so no value ends the script.
func envScript(env map[string]string) string {
	js, _ := json.Marshal(env) // a map of strings always encodes
	return "<script>window.__env__=" + string(js) + ";</script>"
}

// injection is what an HTML answer of a process worker gets after its <head>: a <base href>
// with injectBase, and window.__env__ when the worker has public variables (envPrefix).
type injection struct {
	base string            // the worker's base and a slash; "" without injectBase
	env  map[string]string // the public variables (workers.Lease.PublicEnv)
}

func (in injection) none() bool { return in.base == "" && len(in.env) == 0 }

func (in injection) tags() []byte {
	var b []byte
	if in.base != "" {
		b = append(b, baseTag(in.base)...)
	}
	if len(in.env) > 0 {
		b = append(b, envScript(in.env)...)
	}
	return b
}

// shapeAnswer applies to a process worker's answer what the runtime adds: it refuses a head
// past the header caps (checked when caps is set: h is the worker's alone), and gives a whole
// HTML answer (200, not encoded) its injection, adjusting Content-Length, which stays known.
func shapeAnswer(t *proxyTarget, method string, res *http.Response, h http.Header, caps bool) error {
	if caps {
		if why := overCaps(h); why != "" {
			return envelope.Errorf(http.StatusBadGateway, CodeWorkerHeadersTooLarge,
				"worker %q answered %s; a worker answers at most %s (worker_max_header_size bounds the bytes read before): answer with fewer or shorter headers",
				t.name, why, capsText)
		}
	}
	if t.inject.none() || res.StatusCode != http.StatusOK || h.Get("Content-Encoding") != "" || h.Get("Content-Range") != "" || !isHTMLType(h.Get("Content-Type")) {
		return nil
	}
	tags := t.inject.tags()
	if res.ContentLength >= 0 {
		res.ContentLength += int64(len(tags))
		h.Set("Content-Length", strconv.FormatInt(res.ContentLength, 10))
	}
	if method != http.MethodHead && res.Body != nil && res.Body != http.NoBody {
		res.Body = &injector{src: res.Body, tags: tags}
	}
	return nil
}

// isHTMLType tells whether a Content-Type is text/html.
func isHTMLType(ct string) bool {
	if ct == "" || !containsFold(ct, "html") {
		return false
	}
	base, _, _ := mime.ParseMediaType(ct)
	return base == "text/html"
}

// injector is an HTML body with tags inserted at insertAt of its start: it holds back at most
// maxHeadScan bytes, until <head> has come (or the body ended), and then streams the rest.
type injector struct {
	src    io.ReadCloser
	tags   []byte
	out    []byte // the start, tags inserted, not yet read
	placed bool
	eof    bool // src ended while the start was read
}

func (j *injector) Read(p []byte) (int, error) {
	if !j.placed {
		if err := j.place(); err != nil {
			return 0, err
		}
	}
	if len(j.out) > 0 {
		n := copy(p, j.out)
		j.out = j.out[n:]
		return n, nil
	}
	if j.eof {
		return 0, io.EOF
	}
	return j.src.Read(p)
}

// place reads the start of the body until its <head> tag, maxHeadScan bytes or the end, and
// inserts the tags.
func (j *injector) place() error {
	buf := make([]byte, 0, 4<<10)
	for headTag.Find(buf) == nil && len(buf) < maxHeadScan {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(cap(buf), maxHeadScan-len(buf)))
		}
		n, err := j.src.Read(buf[len(buf):min(cap(buf), maxHeadScan)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			j.eof = true
			break
		}
		if err != nil {
			return err
		}
	}
	at := insertAt(buf)
	out := make([]byte, 0, len(buf)+len(j.tags))
	j.out = append(append(append(out, buf[:at]...), j.tags...), buf[at:]...)
	j.placed = true
	return nil
}

func (j *injector) Close() error { return j.src.Close() }
