// Package runtime plugs the runtime module and its commands into Caddy:
//
//	xcaddy build --with github.com/caddy-runtime/runtime
//
// The commands live under one Caddy command, caddy runtime (caddy runtime deploy …), so
// that they cannot clash with another module's; the module leaves the host's version alone.
package runtime

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/caddy-runtime/runtime/caddymodule"
	"github.com/caddy-runtime/runtime/internal/cli"
)

func init() {
	caddycmd.RegisterCommand(cli.Group(Commands()))
}

// Commands returns the runtime's commands, the subcommands of caddy runtime: the command-line
// client's and the module's own, which work on the local state (caddymodule.Commands), each
// hung where it says (cluster publish, secrets rotate) by cli.Tree.
func Commands() []caddycmd.Command {
	return cli.Tree(caddymodule.Commands()...)
}
