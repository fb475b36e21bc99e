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
