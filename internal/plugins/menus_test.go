package plugins

import (
	"strings"
	"testing"
)

func TestMenuPath(t *testing.T) {
	tests := []struct {
		path, want string // want "" for a refusal
		why        string // part of the refusal's message
	}{
		{"/hello", "/hello", ""},
		{"/hello/", "/hello/", ""},
		{"/hello/a/b/?tab=1#top", "/hello/a/b/?tab=1#top", ""},
		{"/hello/a%20b", "/hello/a%20b", ""},
		{"/hello/a%2Fb", "/hello/a%2Fb", ""},
		{"docs/", "/hello/docs/", ""},
		{"docs", "/hello/docs", ""},
		{"?tab=1", "/hello/?tab=1", ""},
		{"https://evil.example/", "", "scheme (https:)"},
		{"HTTPS://evil.example/", "", "scheme (https:)"},
		{"https:/evil.example", "", "scheme"},
		{"javascript:alert(1)", "", "scheme (javascript:)"},
		{"data:text/html,x", "", "scheme (data:)"},
		{"x:y", "", "scheme (x:)"},
		{"//evil.example/", "", "names a host"},
		{"///evil.example", "", "names a host"},
		{`/\evil.example`, "", "backslash"},
		{`\\evil.example`, "", "backslash"},
		{"/hello/%5c", "", "backslash"},
		{" /hello/", "", "blank"},
		{"/hello/\tx", "", "control"},
		{"java\nscript:x", "", "control"},
		{"/hello/%00", "", "control"},
		{"/", "", "outside the plugin's base"},
		{"/other/", "", "outside the plugin's base"},
		{"/hello-other/", "", "outside the plugin's base"},
		{"/HELLO/", "", "outside the plugin's base"},
		{"/hello/../api", "", "not clean"},
		{"/hello/%2e%2e/api", "", "not clean"},
		{"/hello/%2F..%2Fapi", "", "not clean"},
		{"/hello//x", "", "not clean"},
		{"..", "", "not clean"},
		{"x/../../api", "", "not clean"},
		{"./x", "", "not clean"},
		{"/hello/%zz", "", "not a URL path"},
	}
	for _, tt := range tests {
		got, err := menuPath("/hello", tt.path)
		switch {
		case tt.want != "" && (err != nil || got != tt.want):
			t.Errorf("%q = %q, %v; want %q", tt.path, got, err, tt.want)
		case tt.want == "" && (err == nil || !strings.Contains(err.Error(), tt.why)):
			t.Errorf("%q = %q, %v; want a refusal naming %q", tt.path, got, err, tt.why)
		}
	}
}
