package handlers

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

// compressible is a body that is sent often and changes seldom (a listing for one generation,
// the OpenAPI document, a docs asset), with its gzip form made once, on first demand: large
// listings cost bytes on the wire rather than work, and clients (browsers, curl --compressed,
// Go's default client) accept gzip.
type compressible struct {
	raw []byte
	gz  func() []byte
}

func newCompressible(raw []byte) *compressible {
	c := &compressible{raw: raw}
	c.gz = sync.OnceValue(func() []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		_, _ = zw.Write(raw)
		_ = zw.Close()
		return buf.Bytes()
	})
	return c
}

// pick returns the form of the body to send to r, and whether it is the gzip form; the
// caller sets Content-Encoding with setEncoding.
func (c *compressible) pick(r *http.Request) ([]byte, bool) {
	if len(c.raw) < minGzipSize || !acceptsGzip(r.Header.Get("Accept-Encoding")) {
		return c.raw, false
	}
	return c.gz(), true
}

// setEncoding marks an answer whose form depends on Accept-Encoding, and its gzip form.
func setEncoding(h http.Header, gzipped bool) {
	h.Add("Vary", "Accept-Encoding")
	if gzipped {
		h.Set("Content-Encoding", "gzip")
	}
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
