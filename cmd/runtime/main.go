// Command runtime is Caddy with its standard modules, the runtime module and the runtime's
// command-line client.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/caddy-runtime/runtime"
	"github.com/caddy-runtime/runtime/internal/version"
)

func main() {
	caddys := setUp()
	// Caddy's version command prints caddy.Version() on one line; this binary's first line is
	// the runtime's own, as caddy runtime version prints it, then Caddy's.
	if len(os.Args) == 2 && os.Args[1] == "version" {
		fmt.Print(versionText(caddys))
		return
	}
	caddycmd.Main()
}

// setUp makes this binary the runtime's: `version` names the runtime, and the runtime's
// commands are also offered at the top level (bin/runtime deploy is bin/runtime runtime
// deploy). Only this binary does so: the module changes no other build's identity or command
// names. It returns Caddy's own full version.
func setUp() string {
	_, caddys := caddy.Version()
	caddy.CustomVersion = customVersion(caddy.CustomVersion)
	for _, c := range runtime.Commands() {
		// Caddy's own commands of the same name (version, build-info) keep the name.
		if _, taken := caddycmd.Commands()[c.Name]; !taken {
			caddycmd.RegisterCommand(c)
		}
	}
	return caddys
}

// customVersion returns what caddy.Version() reports (in --version, metrics and traces): the
// runtime's version line, then what a packager set, if anything. It reads as
// "runtime v1.2.3 (commit abc1234), Caddy v2.11.9-debian".
func customVersion(packaged string) string {
	return strings.TrimSpace(version.Line() + ", Caddy " + packaged)
}

// versionText is what `version` prints: the runtime's version line, then Caddy's.
func versionText(caddys string) string {
	return version.Line() + "\nCaddy " + caddys + "\n"
}
