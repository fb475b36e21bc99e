package version

import (
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// TestReleaseMatchesVersionFile checks that Release is what the VERSION file says, which a
// release bumps with it.
func TestReleaseMatchesVersionFile(t *testing.T) {
	b, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	file := strings.TrimSpace(string(b))
	if file != Release {
		t.Fatalf("VERSION says %q, version.Release %q: bump both", file, Release)
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(Release) {
		t.Fatalf("Release %q is not a semantic version with a v", Release)
	}
}

func TestCommitOf(t *testing.T) {
	rev := "1cdc84f0123456789abcdef0123456789abcdef0"
	tests := []struct {
		name     string
		settings []debug.BuildSetting
		want     string
	}{
		{"a clean checkout", []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}, "1cdc84f"},
		{"a tree with changes", []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}, "1cdc84f-dirty"},
		{"no VCS information (xcaddy, go install, a worktree)", []debug.BuildSetting{{Key: "-trimpath", Value: "true"}}, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := commitOf(&debug.BuildInfo{Settings: tt.settings}); got != tt.want {
				t.Fatalf("commitOf() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLinePrefersLinkTimeCommit(t *testing.T) {
	old := commit
	t.Cleanup(func() { commit = old })
	commit = "abc1234"
	if got, want := Line(), "runtime "+Release+" (commit abc1234)"; got != want {
		t.Fatalf("Line() = %q, want %q", got, want)
	}
}

func TestInfoOf(t *testing.T) {
	caddy := &debug.Module{Path: caddyModule, Version: "v2.11.9"}
	tests := []struct {
		name string
		info debug.BuildInfo
		want Info
	}{
		{"the runtime's own binary", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: Module, Version: "v1.2.3"}, Deps: []*debug.Module{caddy}},
			Info{Version: Release, Commit: "unknown", Module: Module, Main: Module, Caddy: "v2.11.9", Go: "go1.26.0"}},
		{"a dependency of a caddy build", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "caddy", Version: "(devel)"},
			Deps: []*debug.Module{caddy, {Path: Module, Version: "v0.4.0", Sum: "h1:abc="}}},
			Info{Version: Release, Commit: "unknown", Module: Module, Sum: "h1:abc=", Main: "caddy", Caddy: "v2.11.9", Go: "go1.26.0"}},
		{"replaced by a folder (xcaddy --with …=.)", debug.BuildInfo{Main: debug.Module{Path: "caddy"},
			Deps: []*debug.Module{{Path: Module, Version: "v0.0.0", Replace: &debug.Module{Path: "/src/runtime", Version: "(devel)"}}, caddy}},
			Info{Version: Release, Commit: "unknown", Module: Module, Replace: "/src/runtime", Main: "caddy", Caddy: "v2.11.9"}},
		{"replaced by another module", debug.BuildInfo{Main: debug.Module{Path: "caddy"},
			Deps: []*debug.Module{{Path: Module, Version: "v0.4.0", Sum: "h1:abc=", Replace: &debug.Module{Path: "example.com/fork", Version: "v0.4.1", Sum: "h1:def="}}}},
			Info{Version: Release, Commit: "unknown", Module: Module, Sum: "h1:def=", Replace: "example.com/fork@v0.4.1", Main: "caddy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := infoOf(&tt.info); got != tt.want {
				t.Fatalf("infoOf() = %+v, want %+v", got, tt.want)
			}
		})
	}
}
