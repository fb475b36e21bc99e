package caddymodule

import (
	"testing"

	"github.com/caddyserver/caddy/v2"
)

func TestAdminListen(t *testing.T) {
	tests := []struct {
		name  string
		admin *caddy.AdminConfig
		want  string
		tcp   bool
	}{
		{"default", nil, caddy.DefaultAdminListen, true},
		{"tcp", &caddy.AdminConfig{Listen: "127.0.0.1:2999"}, "127.0.0.1:2999", true},
		{"unix socket", &caddy.AdminConfig{Listen: "unix//run/runtime/admin.sock"}, "unix//run/runtime/admin.sock", false},
		{"off", &caddy.AdminConfig{Disabled: true}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, err := caddy.ProvisionContext(&caddy.Config{Admin: tt.admin})
			if err != nil {
				t.Fatal(err)
			}
			got := adminListen(ctx)
			if got != tt.want || adminOnTCP(got) != tt.tcp {
				t.Fatalf("adminListen = %q (tcp %v), want %q (tcp %v)", got, adminOnTCP(got), tt.want, tt.tcp)
			}
		})
	}
}
