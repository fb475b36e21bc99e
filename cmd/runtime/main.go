// Command runtime is Caddy with its standard modules and the runtime module.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-runtime/runtime/caddymodule"
)

func main() {
	caddycmd.Main()
}
