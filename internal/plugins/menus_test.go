package plugins

import (
	"strings"
	"testing"
)

func TestMenuPath(t *testing.T) {
	tests := []menuPathCase{
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
	checkMenuPaths(t, "/hello", tests)
}

// TestMenuPathWithoutBase: a plugin without a base links to any path of the workers' site
// written from its root, which the panel renders as a same-origin link; the dangerous shapes
// stay refused, and a relative path, which has nothing to be relative to, too.
func TestMenuPathWithoutBase(t *testing.T) {
	tests := []menuPathCase{
		{"/", "/", ""},
		{"/docs/", "/docs/", ""},
		{"/@team/shop/admin?tab=1#top", "/@team/shop/admin?tab=1#top", ""},
		{"/a%20b/c", "/a%20b/c", ""},
		{"docs/", "", "relative"},
		{"?tab=1", "", "relative"},
		{"#top", "", "relative"},
		{"@evil.example/", "", "relative"},
		{".evil.example/", "", "relative"},
		{"https://evil.example/", "", "scheme (https:)"},
		{"javascript:alert(1)", "", "scheme (javascript:)"},
		{"JavaScript:alert(1)", "", "scheme (javascript:)"},
		{"data:text/html,x", "", "scheme (data:)"},
		{"//evil.example/", "", "names a host"},
		{"///evil.example", "", "names a host"},
		{`/\evil.example`, "", "backslash"},
		{"/%5cevil.example", "", "backslash"},
		{"/%2F/evil.example", "", "not clean"},
		{" /docs/", "", "blank"},
		{"/docs/\x00", "", "control"},
		{"/docs/%0a", "", "control"},
		{"/docs/../api", "", "not clean"},
		{"/%2e%2e/api", "", "not clean"},
		{"/docs//x", "", "not clean"},
	}
	checkMenuPaths(t, "", tests)
}

// menuPathCase is a menu path and what menuPath makes of it.
type menuPathCase struct {
	path, want string // want "" for a refusal
	why        string // part of the refusal's message
}

// checkMenuPaths checks menuPath on each case for a plugin served under base.
func checkMenuPaths(t *testing.T, base string, tests []menuPathCase) {
	t.Helper()
	for _, tt := range tests {
		got, err := menuPath(base, tt.path)
		switch {
		case tt.want != "" && (err != nil || got != tt.want):
			t.Errorf("%q = %q, %v; want %q", tt.path, got, err, tt.want)
		case tt.want == "" && (err == nil || !strings.Contains(err.Error(), tt.why)):
			t.Errorf("%q = %q, %v; want a refusal naming %q", tt.path, got, err, tt.why)
		}
	}
}
