package caddymodule

import (
	"reflect"

	"github.com/caddyserver/caddy/v2"
)

// adminListen returns the address of Caddy's admin endpoint in the config being loaded, and
// "" when it is off or cannot be read. Caddy keeps the config unexported, so reflection reads
// it; should that change, the answer is "" and only a start-up warning is lost.
func adminListen(ctx caddy.Context) (addr string) {
	defer func() {
		if recover() != nil {
			addr = ""
		}
	}()
	cfg := reflect.ValueOf(ctx).FieldByName("cfg")
	if !cfg.IsValid() || cfg.IsNil() {
		return ""
	}
	admin := cfg.Elem().FieldByName("Admin")
	if admin.IsNil() {
		return caddy.DefaultAdminListen
	}
	if admin.Elem().FieldByName("Disabled").Bool() {
		return ""
	}
	if listen := admin.Elem().FieldByName("Listen").String(); listen != "" {
		return listen
	}
	return caddy.DefaultAdminListen
}

// adminOnTCP reports whether the admin endpoint listens on a TCP address, which any local
// process, a worker included, can connect to.
func adminOnTCP(addr string) bool {
	if addr == "" {
		return false
	}
	na, err := caddy.ParseNetworkAddress(addr)
	return err == nil && !na.IsUnixNetwork() && !na.IsFdNetwork()
}
