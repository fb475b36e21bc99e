// Package version reports the version of the runtime build.
package version

import "runtime/debug"

// Module is the Go module path of the runtime.
const Module = "github.com/caddy-runtime/runtime"

// value is set at link time: -ldflags "-X github.com/caddy-runtime/runtime/version.value=v1.2.3".
var value string

// String returns the runtime version: the link-time value when the build set one, else the
// module version recorded in the build info (a dependency version when built with xcaddy),
// else "devel".
func String() string {
	if value != "" {
		return value
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return fromBuildInfo(info)
}

func fromBuildInfo(info *debug.BuildInfo) string {
	if info.Main.Path == Module && usable(info.Main.Version) {
		return info.Main.Version
	}
	for _, dep := range info.Deps {
		if dep.Path == Module && usable(dep.Version) {
			return dep.Version
		}
	}
	return "devel"
}

func usable(v string) bool { return v != "" && v != "(devel)" }
