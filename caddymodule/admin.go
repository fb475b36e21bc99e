package caddymodule

import (
	"net"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// adminOnTCP reports whether something accepts TCP connections at addr, which any local
// process, a worker included, can connect to. The runtime checks Caddy's default admin
// address (localhost:2019, or CADDY_ADMIN), where the admin endpoint listens unless the config
// moves it: Caddy does not tell its modules where a config puts it, so an endpoint moved to
// another TCP address goes unnoticed (docs/security.md says so).
func adminOnTCP(addr string) bool {
	if addr == "" {
		return false
	}
	na, err := caddy.ParseNetworkAddress(addr)
	if err != nil || na.IsUnixNetwork() || na.IsFdNetwork() {
		return false
	}
	conn, err := net.DialTimeout(na.Network, na.JoinHostPort(0), time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}
