package caddymodule

import (
	"context"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-runtime/runtime/internal/serving"
)

func init() {
	caddy.RegisterModule(Permission{})
}

// Permission is the tls.permission.runtime module: it allows an on-demand certificate for the
// runtime's own names only, an enabled worker's host under workers_domain or a verified custom
// domain, so no other name can make the server ask an issuer for one. It answers from memory,
// as a handshake waits for it: never from the key store.
//
//	{
//		on_demand_tls {
//			permission runtime
//		}
//	}
type Permission struct {
	app    *App
	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Permission) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "tls.permission.runtime", New: func() caddy.Module { return new(Permission) }}
}

// UnmarshalCaddyfile reads "permission runtime": the module takes no settings.
func (p *Permission) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the module name
	if d.NextArg() || d.NextBlock(0) {
		return d.Errf("the runtime permission takes no settings")
	}
	return nil
}

// Provision finds the runtime app whose names it allows.
func (p *Permission) Provision(ctx caddy.Context) error {
	p.logger = ctx.Logger()
	app, err := ctx.App(appID)
	if err != nil {
		return err
	}
	p.app = app.(*App)
	return nil
}

// CertificateAllowed allows a certificate for name when the runtime serves it now; a refusal
// is logged at debug level with the reason.
func (p *Permission) CertificateAllowed(_ context.Context, name string) error {
	why := "the runtime has not started"
	if st := p.app.live.Load(); st != nil {
		why = serving.HostServed(&st.router, st.workerCatalog, name)
	}
	if why == "" {
		return nil
	}
	if c := p.logger.Check(zapcore.DebugLevel, "refused a certificate"); c != nil {
		c.Write(zap.String("name", name), zap.String("reason", why))
	}
	return fmt.Errorf("%s: %w: %s", name, caddytls.ErrPermissionDenied, why)
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Permission)(nil)
	_ caddyfile.Unmarshaler       = (*Permission)(nil)
	_ caddytls.OnDemandPermission = (*Permission)(nil)
)
