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
// client's (its cluster with publish beneath, its secrets with rotate beneath), keystore-migrate
// and backup.
func Commands() []caddycmd.Command {
	cmds := append(cli.Commands(), caddymodule.KeyStoreMigrateCommand(), caddymodule.BackupCommand())
	for i, c := range cmds {
		switch c.Name {
		case "cluster":
			cmds[i] = caddymodule.WithClusterPublish(c)
		case cli.SecretsCommandName:
			cmds[i] = caddymodule.WithSecretsRotate(c)
		}
	}
	return cmds
}
