package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	tests := []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"main module tagged", debug.BuildInfo{Main: debug.Module{Path: Module, Version: "v1.2.3"}}, "v1.2.3"},
		{"main module untagged", debug.BuildInfo{Main: debug.Module{Path: Module, Version: "(devel)"}}, "devel"},
		{"dependency of a caddy build", debug.BuildInfo{
			Main: debug.Module{Path: "caddy", Version: "(devel)"},
			Deps: []*debug.Module{{Path: "other", Version: "v9"}, {Path: Module, Version: "v0.4.0"}},
		}, "v0.4.0"},
		{"absent", debug.BuildInfo{Main: debug.Module{Path: "caddy"}}, "devel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromBuildInfo(&tt.info); got != tt.want {
				t.Fatalf("fromBuildInfo() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStringPrefersLinkTimeValue(t *testing.T) {
	old := value
	t.Cleanup(func() { value = old })
	value = "v9.9.9"
	if got := String(); got != "v9.9.9" {
		t.Fatalf("String() = %q, want v9.9.9", got)
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
			Info{Version: "v1.2.3", Module: Module, Main: Module, Caddy: "v2.11.9", Go: "go1.26.0"}},
		{"a dependency of a caddy build", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "caddy", Version: "(devel)"},
			Deps: []*debug.Module{caddy, {Path: Module, Version: "v0.4.0", Sum: "h1:abc="}}},
			Info{Version: "v0.4.0", Module: Module, Sum: "h1:abc=", Main: "caddy", Caddy: "v2.11.9", Go: "go1.26.0"}},
		{"replaced by a folder (xcaddy --with …=.)", debug.BuildInfo{Main: debug.Module{Path: "caddy"},
			Deps: []*debug.Module{{Path: Module, Version: "v0.0.0", Replace: &debug.Module{Path: "/src/runtime", Version: "(devel)"}}, caddy}},
			Info{Version: "v0.0.0", Module: Module, Replace: "/src/runtime", Main: "caddy", Caddy: "v2.11.9"}},
		{"replaced by another module", debug.BuildInfo{Main: debug.Module{Path: "caddy"},
			Deps: []*debug.Module{{Path: Module, Version: "v0.4.0", Sum: "h1:abc=", Replace: &debug.Module{Path: "example.com/fork", Version: "v0.4.1", Sum: "h1:def="}}}},
			Info{Version: "v0.4.0", Module: Module, Sum: "h1:def=", Replace: "example.com/fork@v0.4.1", Main: "caddy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := infoOf(&tt.info); got != tt.want {
				t.Fatalf("infoOf() = %+v, want %+v", got, tt.want)
			}
		})
	}
}
