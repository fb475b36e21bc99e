// Package runtime plugs the runtime module into Caddy:
//
//	xcaddy build --with github.com/caddy-runtime/runtime
package runtime

import _ "github.com/caddy-runtime/runtime/caddymodule"
