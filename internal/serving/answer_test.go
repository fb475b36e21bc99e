package serving

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

func TestOverCaps(t *testing.T) {
	lines := func(n, size int) http.Header {
		h := http.Header{}
		for i := range n {
			h.Add("X-H"+strconv.Itoa(i), strings.Repeat("v", size))
		}
		return h
	}
	for _, tc := range []struct {
		name string
		h    http.Header
		want string // in the reason; "" passes
	}{
		{"few", lines(3, 10), ""},
		{"100 lines", lines(MaxHeaderLines, 10), ""},
		{"101 lines", lines(MaxHeaderLines+1, 10), "101 header lines"},
		{"101 values of one name", http.Header{"X-A": slices100(101)}, "101 header lines"},
		{"a value of 8 KiB", lines(1, MaxHeaderValue), ""},
		{"a value past 8 KiB", lines(1, MaxHeaderValue+1), "8 KiB a value"},
		{"60 KiB in all", lines(8, 7500), ""},
		{"past 64 KiB in all", lines(9, 7500), "64 KiB in all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := overCaps(tc.h)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("overCaps = %q, want %q", got, tc.want)
			}
		})
	}
}

func slices100(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "v"
	}
	return out
}

// TestInjector: the tags go after <head> (else <html>, the doctype, or first), whatever the
// reads the body comes in; what follows streams as it is; at most maxHeadScan bytes are held
// back looking for <head>.
func TestInjector(t *testing.T) {
	const tags = "<base href=\"/app/\">"
	long := strings.Repeat("x", maxHeadScan+10)
	for _, tc := range []struct{ name, page, want string }{
		{"head", "<!doctype html><html><head><title>t</title></head><body>b</body></html>",
			"<!doctype html><html><head>" + tags + "<title>t</title></head><body>b</body></html>"},
		{"head with attributes", "<HTML><Head lang=en>x", "<HTML><Head lang=en>" + tags + "x"},
		{"header is not head", "<html><header>x</header>", "<html>" + tags + "<header>x</header>"},
		{"no head", "<!DOCTYPE html><p>x", "<!DOCTYPE html>" + tags + "<p>x"},
		{"nothing to find", "plain", tags + "plain"},
		{"empty", "", tags},
		{"head past the scan", "<html>" + long + "<head>", "<html>" + tags + long + "<head>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, reader := range []func(io.Reader) io.Reader{
				func(r io.Reader) io.Reader { return r }, iotest.OneByteReader, iotest.HalfReader, iotest.DataErrReader,
			} {
				j := &injector{src: io.NopCloser(reader(strings.NewReader(tc.page))), tags: []byte(tags)}
				got, err := io.ReadAll(j)
				if err != nil || string(got) != tc.want {
					t.Errorf("got %.200q, %v; want %.200q", got, err, tc.want)
				}
			}
		})
	}
}

// TestInjectorHoldsBackLittle: an endless page without <head> is read no further than
// maxHeadScan before its first bytes are handed on.
func TestInjectorHoldsBackLittle(t *testing.T) {
	counted := &countingReader{r: iotest.OneByteReader(endless{})}
	j := &injector{src: io.NopCloser(counted), tags: []byte("<t>")}
	buf := make([]byte, 10)
	if n, err := j.Read(buf); err != nil || string(buf[:n]) != "<t>aaaaaaa" {
		t.Fatalf("first read %q, %v", buf[:n], err)
	}
	if counted.n > maxHeadScan {
		t.Errorf("read %d bytes before answering, more than maxHeadScan %d", counted.n, maxHeadScan)
	}
}

type endless struct{}

func (endless) Read(p []byte) (int, error) { return copy(p, bytes.Repeat([]byte("a"), len(p))), nil }

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestEnvScript: no value closes the script or opens a comment, and the JSON reads back.
func TestEnvScript(t *testing.T) {
	got := envScript(map[string]string{"PUBLIC_X": "</script><script>alert(1)</script>", "PUBLIC_Y": "<!-- & \u2028"})
	inner := strings.TrimSuffix(strings.TrimPrefix(got, "<script>"), "</script>")
	if strings.Contains(inner, "<") || strings.Contains(inner, ">") || strings.Contains(inner, "\u2028") {
		t.Errorf("envScript = %s: a value breaks out", got)
	}
	if !strings.HasPrefix(inner, "window.__env__={") {
		t.Errorf("envScript = %s", got)
	}
}

// TestShapeAnswer: only a whole, unencoded HTML answer gets the tags, its Content-Length
// grown by their length.
func TestShapeAnswer(t *testing.T) {
	target := &proxyTarget{name: "w", inject: injection{base: "/w/"}}
	for _, tc := range []struct {
		name, method, ct, encoding string
		status                     int
		injected                   bool
	}{
		{"html", "GET", "text/html; charset=utf-8", "", 200, true},
		{"HEAD", "HEAD", "text/html", "", 200, true},
		{"json", "GET", "application/json", "", 200, false},
		{"gzip", "GET", "text/html", "gzip", 200, false},
		{"not found", "GET", "text/html", "", 404, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := "<head>x"
			h := http.Header{"Content-Type": {tc.ct}, "Content-Length": {strconv.Itoa(len(body))}}
			if tc.encoding != "" {
				h.Set("Content-Encoding", tc.encoding)
			}
			res := &http.Response{StatusCode: tc.status, ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body))}
			if err := shapeAnswer(target, tc.method, res, h, true); err != nil {
				t.Fatal(err)
			}
			tags := `<base href="/w/">`
			want := int64(len(body))
			if tc.injected {
				want += int64(len(tags))
			}
			if res.ContentLength != want || h.Get("Content-Length") != strconv.FormatInt(want, 10) {
				t.Errorf("Content-Length %d, header %s; want %d", res.ContentLength, h.Get("Content-Length"), want)
			}
			got, _ := io.ReadAll(res.Body)
			if tc.method != "HEAD" && strings.Contains(string(got), tags) != tc.injected {
				t.Errorf("body %q, injected want %v", got, tc.injected)
			}
			if tc.method != "HEAD" && int64(len(got)) != want {
				t.Errorf("body of %d bytes, Content-Length %d", len(got), want)
			}
		})
	}
}
