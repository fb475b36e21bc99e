package serving

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strings"
	"testing"
)

// testCookies are the runtime's session cookies, as the tests' lines name them.
var testCookies = []string{"runtime_api_key", "__Host-runtime_api_key"}

func TestDropCookie(t *testing.T) {
	tests := []struct {
		name string
		line string
		drop bool
	}{
		{"sets it", "runtime_api_key=evil; Path=/", true},
		{"clears it", "runtime_api_key=; Max-Age=0; Path=/", true},
		{"for the parent domain", "runtime_api_key=evil; Domain=example.com; Path=/", true},
		{"capitals", "Runtime_API_Key=evil", true},
		{"leading blanks", " \t runtime_api_key=evil", true},
		{"blank before =", "runtime_api_key =evil", true},
		{"leading control character", "\x01runtime_api_key=evil", true},
		{"nameless, read back as the name", "runtime_api_key; Path=/api", true},
		{"the __Host- twin", "__Host-runtime_api_key=evil; Secure; Path=/", true},
		{"the __Host- twin in other case", "__host-Runtime_Api_Key=evil; Secure; Path=/", true},
		{"another cookie", "theme=dark; Path=/", false},
		{"a longer name", "runtime_api_key2=x", false},
		{"a prefixed name", "my_runtime_api_key=x", false},
		{"the name as a value", "session=runtime_api_key", false},
		{"the name in an attribute", "session=1; Path=/runtime_api_key", false},
		{"the __Host- cookie", "__Host-runtime_api_key=evil; Secure; Path=/", true},
		{"the __Host- cookie in capitals", "__HOST-Runtime_Api_Key=evil", true},
		{"the __Secure- cookie", "__Secure-runtime_api_key=evil", false},
	}
	for _, tt := range tests {
		h := http.Header{"Set-Cookie": {"keep=1", tt.line, "keep=2"}}
		DropCookie(h, testCookies...)
		want := []string{"keep=1", tt.line, "keep=2"}
		if tt.drop {
			want = []string{"keep=1", "keep=2"}
		}
		if !slices.Equal(h["Set-Cookie"], want) {
			t.Errorf("%s: Set-Cookie %q left %q", tt.name, tt.line, h["Set-Cookie"])
		}
	}

	h := http.Header{"set-cookie": {"runtime_api_key=evil"}, "Set-Cookie": {"runtime_api_key=evil"}, "X-Other": {"runtime_api_key=1"}}
	DropCookie(h, testCookies...)
	if len(h) != 1 || h.Get("X-Other") == "" {
		t.Errorf("a header map written directly kept %v", h)
	}

	for value, drop := range map[string]bool{
		`"cookies"`: true, `"cache", "cookies"`: true, `"*"`: true, `"Cookies"`: true,
		`"cache"`: false, `"storage", "executionContexts"`: false,
	} {
		h := http.Header{"Clear-Site-Data": {value}}
		DropCookie(h, testCookies...)
		if _, kept := h["Clear-Site-Data"]; kept == drop {
			t.Errorf("Clear-Site-Data: %s kept = %v", value, kept)
		}
	}
}

// TestGuardResponse checks, through a real server, every way a handler can send its
// header: WriteHeader (interim responses included), Write, ReadFrom and flushing.
func TestGuardResponse(t *testing.T) {
	evil := func(w http.ResponseWriter) {
		w.Header().Add("Set-Cookie", "runtime_api_key=evil")
		w.Header().Add("Set-Cookie", "__Host-runtime_api_key=evil; Secure; Path=/")
		w.Header().Add("Set-Cookie", "theme=dark")
	}
	ways := map[string]func(w http.ResponseWriter){
		"WriteHeader": func(w http.ResponseWriter) { evil(w); w.WriteHeader(http.StatusAccepted) },
		"Write":       func(w http.ResponseWriter) { evil(w); w.Write([]byte("x")) },
		"ReadFrom":    func(w http.ResponseWriter) { evil(w); w.(io.ReaderFrom).ReadFrom(strings.NewReader("x")) },
		"Flush":       func(w http.ResponseWriter) { evil(w); http.NewResponseController(w).Flush() },
		"Flusher":     func(w http.ResponseWriter) { evil(w); w.(http.Flusher).Flush() },
		"unwritten":   evil, // the server sends the header when the handler returns
		"interim": func(w http.ResponseWriter) {
			evil(w)
			w.WriteHeader(http.StatusEarlyHints)
			evil(w)
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		GuardResponse(w, testCookies, ways[r.URL.Query().Get("way")])
	}))
	defer srv.Close()
	for way := range ways {
		var interim [][]string
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			interim = append(interim, h.Values("Set-Cookie"))
			return nil
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", srv.URL+"?way="+way, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, got := range append(interim, resp.Header.Values("Set-Cookie")) {
			if !slices.Contains(got, "theme=dark") || slices.ContainsFunc(got, func(l string) bool { return setsCookie(l, testCookies) }) {
				t.Errorf("%s: the client got Set-Cookie %q, want theme=dark only", way, got)
			}
		}
		if way == "interim" && len(interim) != 1 {
			t.Errorf("interim: %d interim responses", len(interim))
		}
	}
}
