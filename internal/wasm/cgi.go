package wasm

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// Response is a CGI answer read from a module's standard output.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// hopHeaders are headers a module does not decide: the server frames the answer itself.
var hopHeaders = []string{"Connection", "Content-Length", "Keep-Alive", "Transfer-Encoding", "Trailer", "Upgrade", "Status"}

// DefaultMaxHeader is the default of ParseCGI's cap on the headers.
const DefaultMaxHeader = 1 << 20

// ParseCGI reads a CGI answer (RFC 3875, section 6): header lines, a blank line, the body.
// Status: gives the status ("404 Not Found" or "404"); without it, a Location header makes
// it 302 and anything else 200. Lines may end in CRLF or LF. Headers of more than maxHeader
// bytes (worker_max_header_size; 0: DefaultMaxHeader) are refused unread: parsed, they would
// take a few times their size again.
func ParseCGI(out []byte, maxHeader int64) (*Response, error) {
	if maxHeader <= 0 {
		maxHeader = DefaultMaxHeader
	}
	// The blank line is looked for within the limit only.
	end, skip := headerEnd(out[:min(int64(len(out)), maxHeader+3)])
	if end > int(maxHeader) || end < 0 && int64(len(out)) > maxHeader {
		return nil, fmt.Errorf("its CGI headers are larger than %d bytes, the limit worker_max_header_size sets: write fewer or shorter headers", maxHeader)
	}
	if end < 0 {
		if len(out) == 0 {
			return nil, fmt.Errorf("it wrote nothing to standard output: write CGI headers (Content-Type: text/plain), a blank line, then the body")
		}
		return nil, fmt.Errorf("its output has no blank line after the CGI headers: write headers (Content-Type: text/plain), a blank line, then the body")
	}
	head := append(bytes.Clone(bytes.TrimRight(out[:end], "\r")), "\r\n\r\n"...)
	mime, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(head))).ReadMIMEHeader()
	if err != nil {
		return nil, fmt.Errorf("its CGI headers are malformed: %w", err)
	}
	h := http.Header(mime)
	status := http.StatusOK
	if raw := h.Get("Status"); raw != "" {
		code, _, _ := strings.Cut(strings.TrimSpace(raw), " ")
		n, err := strconv.Atoi(code)
		if err != nil || n < 200 || n > 599 {
			return nil, fmt.Errorf("its Status header %q is not a status from 200 to 599", raw)
		}
		status = n
	} else if h.Get("Location") != "" {
		status = http.StatusFound
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
	return &Response{Status: status, Header: h, Body: out[end+skip:]}, nil
}

// headerEnd finds the blank line ending the headers: where it starts and how long it is.
func headerEnd(out []byte) (int, int) {
	if bytes.HasPrefix(out, []byte("\r\n")) {
		return 0, 2
	}
	if bytes.HasPrefix(out, []byte("\n")) {
		return 0, 1
	}
	for i := 0; i < len(out); i++ {
		if out[i] != '\n' {
			continue
		}
		switch {
		case bytes.HasPrefix(out[i+1:], []byte("\r\n")):
			return i, 3
		case bytes.HasPrefix(out[i+1:], []byte("\n")):
			return i, 2
		}
	}
	return -1, 0
}
