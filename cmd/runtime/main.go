// Command runtime is Caddy with its standard modules, the runtime module and the runtime's
// command-line client.
package main

import (
	"strings"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/caddy-runtime/runtime"
	"github.com/caddy-runtime/runtime/internal/version"
)

func main() {
	setUp()
	caddycmd.Main()
}

// setUp makes this binary the runtime's: `version` names the runtime, and the runtime's
// commands are also offered at the top level (bin/runtime deploy is bin/runtime runtime
// deploy). Only this binary does so: the module changes no other build's identity or command
// names.
func setUp() {
	caddy.CustomVersion = customVersion(caddy.CustomVersion)
	for _, c := range runtime.Commands() {
		// Caddy's own commands of the same name (version, build-info) keep the name.
		if _, taken := caddycmd.Commands()[c.Name]; !taken {
			caddycmd.RegisterCommand(c)
		}
	}
}

// customVersion returns the text `version` prints in front of Caddy's own version: the
// runtime's version, then what a packager set, if anything. It prints as
// "runtime v1.2.3, Caddy v2.11.9 h1:…".
func customVersion(packaged string) string {
	return strings.TrimSpace("runtime " + version.String() + ", Caddy " + packaged)
}
