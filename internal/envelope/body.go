package envelope

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// minGzipSize is the smallest body worth compressing: below about one packet, gzip saves
// nothing on the wire.
const minGzipSize = 1400

// Body is the body of an answer that is sent often and changes seldom (a listing for one
// generation, the OpenAPI document, a page's asset), with its gzip form made once, on first
// demand: large answers cost bytes on the wire rather than work, and clients (browsers, curl
// --compressed, Go's default client) accept gzip.
type Body struct {
	raw []byte
	gz  func() []byte
}

// NewBody returns the body raw.
func NewBody(raw []byte) *Body {
	b := &Body{raw: raw}
	b.gz = sync.OnceValue(func() []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		_, _ = zw.Write(raw)
		_ = zw.Close()
		return buf.Bytes()
	})
	return b
}

// For returns the form of the body to send to r, and whether it is the gzip form. It marks the
// answer's header h: the form depends on Accept-Encoding, and the gzip form is so encoded.
func (b *Body) For(h http.Header, r *http.Request) ([]byte, bool) {
	h.Add("Vary", "Accept-Encoding")
	if len(b.raw) < minGzipSize || !acceptsGzip(r.Header.Get("Accept-Encoding")) {
		return b.raw, false
	}
	h.Set("Content-Encoding", "gzip")
	return b.gz(), true
}

// acceptsGzip reports whether an Accept-Encoding header value accepts gzip: named (or *)
// without q=0.
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		coding = strings.TrimSpace(coding)
		if coding != "gzip" && coding != "*" {
			continue
		}
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(p), "q="); ok {
				q, _ = strconv.ParseFloat(v, 64)
			}
		}
		if q > 0 {
			return true
		}
	}
	return false
}
