package wasm

import (
	"strings"
	"testing"
)

func TestParseCGI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, out   string
		status      int
		header      map[string]string
		body, fails string
	}{
		{"lf", "Content-Type: text/plain\n\nhi", 200, map[string]string{"Content-Type": "text/plain"}, "hi", ""},
		{"crlf", "Content-Type: text/plain\r\nX-A: 1\r\n\r\nhi\r\n", 200, map[string]string{"X-A": "1"}, "hi\r\n", ""},
		{"status", "Status: 404 Not Found\nContent-Type: text/plain\n\n", 404, map[string]string{"Status": ""}, "", ""},
		{"status code only", "Status: 201\n\nmade", 201, nil, "made", ""},
		{"location", "Location: /elsewhere\n\n", 302, map[string]string{"Location": "/elsewhere"}, "", ""},
		{"no headers", "\nbody", 200, nil, "body", ""},
		{"framing dropped", "Content-Length: 99\nTransfer-Encoding: chunked\nConnection: close\n\nx", 200,
			map[string]string{"Content-Length": "", "Transfer-Encoding": "", "Connection": ""}, "x", ""},
		{"nothing", "", 0, nil, "", "wrote nothing"},
		{"no blank line", "hello world", 0, nil, "", "no blank line"},
		{"bad status", "Status: 99\n\n", 0, nil, "", "Status header"},
		{"bad status word", "Status: OK\n\n", 0, nil, "", "Status header"},
		{"malformed", "no colon here\n\n", 0, nil, "", "malformed"},
		{"headers at the limit", "X-A: " + strings.Repeat("a", 95) + "\n\nbody", 200, map[string]string{"X-A": strings.Repeat("a", 95)}, "body", ""},
		{"headers past the limit", "X-A: " + strings.Repeat("a", 96) + "\n\nbody", 0, nil, "", "worker_max_header_size"},
		{"many lines past the limit", strings.Repeat("X-A: 1\r\n", 20) + "\r\nbody", 0, nil, "", "worker_max_header_size"},
		{"no blank line within the limit", strings.Repeat("x", 200), 0, nil, "", "worker_max_header_size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := ParseCGI([]byte(tc.out), 100)
			if tc.fails != "" {
				if err == nil || !strings.Contains(err.Error(), tc.fails) {
					t.Fatalf("ParseCGI = %v, want an error with %q", err, tc.fails)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != tc.status || string(resp.Body) != tc.body {
				t.Fatalf("ParseCGI = %d %q, want %d %q", resp.Status, resp.Body, tc.status, tc.body)
			}
			for k, v := range tc.header {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}
