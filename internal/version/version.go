// Package version reports the version of the runtime build.
package version

import "runtime/debug"

// Module is the Go module path of the runtime.
const Module = "github.com/caddy-runtime/runtime"

// Release is the runtime's version, which a release bumps together with the VERSION file at
// the repository's root (a test checks they agree). It is the source's, so every build of a
// checkout reports it: bin/runtime, xcaddy's (which record the module as v0.0.0 when
// replaced by a folder) and a go install of a published version alike.
const Release = "v0.4.0"

// commit is set at link time when the build knows it better than the build info does:
// make build passes -ldflags "-X github.com/caddy-runtime/runtime/internal/version.commit=abc1234",
// since Go records no VCS information for a git worktree.
var commit string

// String returns the runtime version, Release.
func String() string { return Release }

// Commit returns the short revision the binary was built from: the link-time value, else
// the build info's vcs.revision with "-dirty" when the tree had changes, else "unknown" (xcaddy
// and go install builds, whose main module is not this checkout, record none).
func Commit() string {
	if commit != "" {
		return commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return commitOf(info)
}

func commitOf(info *debug.BuildInfo) string {
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	rev = rev[:min(len(rev), 7)]
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// Line is the runtime's version line: "runtime v0.4.0 (commit abc1234)".
func Line() string { return "runtime " + String() + " (commit " + Commit() + ")" }

func usable(v string) bool { return v != "" && v != "(devel)" }

// caddyModule is Caddy's Go module path.
const caddyModule = "github.com/caddyserver/caddy/v2"

// Info is what a binary records of the runtime module it was built with.
type Info struct {
	Version string `json:"version"`           // as String reports it
	Commit  string `json:"commit"`            // as Commit reports it
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
		return Info{Version: String(), Commit: Commit(), Module: Module}
	}
	i := infoOf(info)
	i.Commit = Commit()
	return i
}

func infoOf(info *debug.BuildInfo) Info {
	i := Info{Version: String(), Commit: commitOf(info), Module: Module, Main: info.Main.Path, Go: info.GoVersion}
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
