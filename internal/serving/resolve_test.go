package serving

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/packages"
)

func TestSplitPath(t *testing.T) {
	tests := []struct {
		path, name, pin, base, rest string
		ok                          bool
	}{
		{"/app", "app", "", "/app", "", true},
		{"/app/", "app", "", "/app", "/", true},
		{"/app/x/y.js", "app", "", "/app", "/x/y.js", true},
		{"/@team/app", "@team/app", "", "/@team/app", "", true},
		{"/@team/app/", "@team/app", "", "/@team/app", "/", true},
		{"/@team/app/a/b", "@team/app", "", "/@team/app", "/a/b", true},
		{"/app@1.2.0/x", "app", "1.2.0", "/app@1.2.0", "/x", true},
		{"/app@^1.2/", "app", "^1.2", "/app@^1.2", "/", true},
		{"/@team/app@latest", "@team/app", "latest", "/@team/app@latest", "", true},
		{"/@team/app@>=1.0.0 <2.0.0/", "@team/app", ">=1.0.0 <2.0.0", "/@team/app@>=1.0.0 <2.0.0", "/", true},
		{"/", "", "", "", "", false},
		{"/@team", "", "", "", "", false},
		{"/@team/", "", "", "", "", false},
		{"/App/", "App", "", "/App", "/", false},
		{"/app@/", "", "", "", "", false},
		{"app", "", "", "", "", false},
	}
	for _, tt := range tests {
		name, pin, base, rest, ok := splitPath(tt.path)
		if ok != tt.ok || ok && (name != tt.name || pin != tt.pin || base != tt.base || rest != tt.rest) {
			t.Errorf("splitPath(%q) = %q %q %q %q %v", tt.path, name, pin, base, rest, ok)
		}
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, manifest string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		os.MkdirAll(p, 0o755)
		os.WriteFile(filepath.Join(p, "manifest.yaml"), []byte(manifest), 0o644)
	}
	write("app/1.0.0", "name: app\n")
	write("app/1.2.0", "name: app\n")
	write("app/2.0.0", "name: app\nenabled: false\n") // disabled newest: rolls back to 1.2.0
	write("app/1.1.0-beta.1", "name: app\n")
	write("@t/tool/latest", "name: '@t/tool'\n")
	write("@t/tool/9.0.0", "name: '@t/tool'\n")
	write("off/1.0.0", "name: off\nenabled: false\n")
	c := packages.NewCatalog(packages.WorkerLayout, []string{dir}, packages.DefaultLimits)
	tests := []struct {
		path, version, base string
		err                 error
	}{
		{"/app/", "1.2.0", "/app", nil},
		{"/app@1.0.0/", "1.0.0", "/app@1.0.0", nil},
		{"/app@^1.0.0/x", "1.2.0", "/app@^1.0.0", nil},
		{"/app@~1.0/x", "1.0.0", "/app@~1.0", nil},
		{"/app@2.0.0/", "", "", ErrNoMatchingPin}, // pinned disabled version
		{"/app@1.1.0-beta.1/", "1.1.0-beta.1", "/app@1.1.0-beta.1", nil},
		{"/app@>=3/", "", "", ErrNoMatchingPin},
		{"/app@not a range/", "", "", ErrNoMatchingPin},
		{"/@t/tool/", "latest", "/@t/tool", nil}, // latest outranks 9.0.0
		{"/@t/tool@9/", "9.0.0", "/@t/tool@9", nil},
		{"/off/", "", "", ErrNoEnabledVersion},
		{"/ghost/", "", "", ErrNoSuchWorker},
		{"/", "", "", ErrNotWorkerPath},
	}
	for round, tt := range append(tests, tests...) { // the second round with the pins parsed
		got, _, err := Resolve(c, nil, tt.path, nil)
		if !errors.Is(err, tt.err) || err == nil && (got.Version.Version != tt.version || got.Base != tt.base) {
			t.Errorf("round %d: Resolve(%q) = %s %s, %v; want %s %s, %v", round/len(tests)+1, tt.path, got.Version.Version, got.Base, err, tt.version, tt.base, tt.err)
		}
	}
}

// TestUnpinnedOrder: an unpinned request gets the split's pick unless this instance holds that
// version back (its check runs or failed) or it is disabled; then the active version.
func TestUnpinnedOrder(t *testing.T) {
	u := packages.Unit{Name: "app", Versions: []packages.Version{
		{Version: "1.0.0", Enabled: true}, {Version: "1.1.0", Enabled: true}, {Version: "1.2.0"}}}
	pick := func(version string) func(packages.Unit) (packages.Version, bool) {
		return func(u packages.Unit) (packages.Version, bool) {
			v, ok := u.Find(version)
			return v, ok && v.Enabled
		}
	}
	failed := []workers.Failure{{Version: "1.1.0", Reason: "no"}}
	for _, tt := range []struct {
		name  string
		split func(packages.Unit) (packages.Version, bool)
		a     workers.Activation
		want  string
	}{
		{"no split: the newest enabled", nil, workers.Activation{}, "1.1.0"},
		{"no split: the active version", nil, workers.Activation{Active: "1.0.0"}, "1.0.0"},
		{"the split's pick before the active version", pick("1.1.0"), workers.Activation{Active: "1.0.0"}, "1.1.0"},
		{"the split's pick, older than the active version", pick("1.0.0"), workers.Activation{Active: "1.1.0"}, "1.0.0"},
		{"a pick being checked: the active version", pick("1.1.0"), workers.Activation{Active: "1.0.0", Checking: []string{"1.1.0"}}, "1.0.0"},
		{"a pick being checked, none active: the newest healthy", pick("1.1.0"), workers.Activation{Checking: []string{"1.1.0"}}, "1.0.0"},
		{"a pick that failed its check: the active version", pick("1.1.0"), workers.Activation{Active: "1.0.0", Failed: failed}, "1.0.0"},
		{"a disabled pick: the active version", pick("1.2.0"), workers.Activation{Active: "1.0.0"}, "1.0.0"},
		{"no pick: the active version", func(packages.Unit) (packages.Version, bool) { return packages.Version{}, false }, workers.Activation{Active: "1.0.0"}, "1.0.0"},
	} {
		v, err := Unpinned(u, tt.a, tt.split)
		if err != nil || v.Version != tt.want {
			t.Errorf("%s: Unpinned = %q, %v; want %q", tt.name, v.Version, err, tt.want)
		}
	}
}
