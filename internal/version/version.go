// Package version reports the version of the runtime build.
package version

import "runtime/debug"

// Module is the Go module path of the runtime.
const Module = "github.com/caddy-runtime/runtime"

// value is set at link time: -ldflags "-X github.com/caddy-runtime/runtime/internal/version.value=v1.2.3".
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

// caddyModule is Caddy's Go module path.
const caddyModule = "github.com/caddyserver/caddy/v2"

// Info is what a binary records of the runtime module it was built with.
type Info struct {
	Version string `json:"version"`           // as String reports it
	Module  string `json:"module"`            // the runtime's module path
	Sum     string `json:"sum,omitempty"`     // the module's checksum, when the binary took it as a dependency
	Replace string `json:"replace,omitempty"` // what replaced the module in the build (xcaddy --with MODULE=DIR)
	Main    string `json:"main"`              // the binary's main module: the runtime's own, or the host's (caddy for an xcaddy build)
	Caddy   string `json:"caddy,omitempty"`   // Caddy's module version
	Go      string `json:"go,omitempty"`      // the Go version of the build
}

// Build returns what the running binary records of the runtime module.
func Build() Info {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: String(), Module: Module}
	}
	i := infoOf(info)
	i.Version = String()
	return i
}

func infoOf(info *debug.BuildInfo) Info {
	i := Info{Version: fromBuildInfo(info), Module: Module, Main: info.Main.Path, Go: info.GoVersion}
	for _, dep := range info.Deps {
		switch dep.Path {
		case Module:
			i.Sum = dep.Sum
			if r := dep.Replace; r != nil {
				i.Replace = r.Path
				if usable(r.Version) { // a folder's is "(devel)"
					i.Replace += "@" + r.Version
				}
				i.Sum = r.Sum
			}
		case caddyModule:
			i.Caddy = dep.Version
		}
	}
	return i
}
