package caddymodule

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestMountPath checks the mount path read from the request Caddy received and the request a
// rewrite in front of the runtime left.
func TestMountPath(t *testing.T) {
	for _, tc := range []struct {
		name, original, current, want string
	}{
		{"at the root", "/api/health", "/api/health", ""},
		{"prefix stripped", "/hp/api/health", "/api/health", "/hp"},
		{"escaped path", "/hp/%40team/app/", "/%40team/app/", "/hp"},
		{"path replaced", "/old", "/new", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := httptest.NewRequest("GET", tc.original, nil)
			r := httptest.NewRequest("GET", tc.current, nil)
			r = r.WithContext(context.WithValue(r.Context(), caddyhttp.OriginalRequestCtxKey, *orig))
			if got := mountPath(r); got != tc.want {
				t.Errorf("mountPath = %q, want %q", got, tc.want)
			}
		})
	}
	if got := mountPath(httptest.NewRequest("GET", "/x/api", nil)); got != "" {
		t.Errorf("mountPath without Caddy's original request = %q, want \"\"", got)
	}
}

// TestMountAt checks which matchers on the directive mount the runtime.
func TestMountAt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		matchers caddy.ModuleMap
		want     string
	}{
		{"none", nil, ""},
		{"path below a prefix", caddy.ModuleMap{"path": json.RawMessage(`["/rt/*"]`)}, "/rt"},
		{"deeper prefix", caddy.ModuleMap{"path": json.RawMessage(`["/a/b/*"]`)}, "/a/b"},
		{"everything", caddy.ModuleMap{"path": json.RawMessage(`["/*"]`)}, ""},
		{"prefix without a slash", caddy.ModuleMap{"path": json.RawMessage(`["/rt*"]`)}, ""},
		{"wildcard inside", caddy.ModuleMap{"path": json.RawMessage(`["/*/rt/*"]`)}, ""},
		{"two paths", caddy.ModuleMap{"path": json.RawMessage(`["/a/*", "/b/*"]`)}, ""},
		{"path and host", caddy.ModuleMap{"path": json.RawMessage(`["/rt/*"]`), "host": json.RawMessage(`["a.test"]`)}, "/rt"},
		{"host", caddy.ModuleMap{"host": json.RawMessage(`["a.test"]`)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mountAt(tc.matchers)
			if err != nil || got != tc.want {
				t.Errorf("mountAt = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
