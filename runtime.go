// Package runtime plugs the runtime module and its command-line client into Caddy:
//
//	xcaddy build --with github.com/caddy-runtime/runtime
package runtime

import (
	_ "github.com/caddy-runtime/runtime/caddymodule"
	_ "github.com/caddy-runtime/runtime/cli"
)
