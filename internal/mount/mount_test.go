package mount

import (
	"context"
	"testing"
)

func TestStripped(t *testing.T) {
	for _, tc := range []struct {
		name, original, current, want string
	}{
		{"not mounted", "/api/health", "/api/health", ""},
		{"handle_path", "/hp/api/health", "/api/health", "/hp"},
		{"root of the mount", "/hp/", "/", "/hp"},
		{"deeper mount", "/a/b/app/", "/app/", "/a/b"},
		{"escaped", "/h%20p/app/x%2Fy", "/app/x%2Fy", "/h%20p"},
		{"slashes collapse", "//evil.example/app/", "/app/", "/evil.example"},
		{"trailing slash of the prefix", "/hp//api", "/api", "/hp"},
		{"rewritten, not stripped", "/old/page", "/new/page", ""},
		{"current not a path", "/hp/api", "api", ""},
		{"empty current", "/hp", "", ""},
		{"only slashes stripped", "//api", "/api", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Stripped(tc.original, tc.current); got != tc.want {
				t.Errorf("Stripped(%q, %q) = %q, want %q", tc.original, tc.current, got, tc.want)
			}
		})
	}
}

func TestContext(t *testing.T) {
	ctx := context.Background()
	if got := Path(ctx); got != "" {
		t.Errorf("Path of a bare context = %q, want \"\"", got)
	}
	if got := Path(With(ctx, "/hp")); got != "/hp" {
		t.Errorf("Path = %q, want /hp", got)
	}
}
