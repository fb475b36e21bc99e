// Command runtime is Caddy with its standard modules, the runtime module and the runtime's
// command-line client.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-runtime/runtime"
)

func main() {
	caddycmd.Main()
}
