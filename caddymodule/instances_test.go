package caddymodule

import (
	"errors"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func TestInstanceAddress(t *testing.T) {
	named := func() (string, error) { return "node-1", nil }
	unnamed := func() (string, error) { return "", errors.New("no name") }
	servers := func(listens ...[]string) map[string]*caddyhttp.Server {
		out := map[string]*caddyhttp.Server{}
		for i, l := range listens {
			out["srv"+string(rune('0'+i))] = &caddyhttp.Server{Listen: l}
		}
		return out
	}
	for _, tt := range []struct {
		name     string
		servers  map[string]*caddyhttp.Server
		hostname func() (string, error)
		want     string
	}{
		{"every interface", servers([]string{":443"}), named, "node-1:443"},
		{"unspecified IPv4", servers([]string{"tcp/0.0.0.0:8080"}), named, "node-1:8080"},
		{"unspecified IPv6", servers([]string{"[::]:8080"}), named, "node-1:8080"},
		{"bound", servers([]string{"tcp/127.0.0.1:2015"}), named, "127.0.0.1:2015"},
		{"bound IPv6", servers([]string{"tcp6/[fd00::1]:2015"}), named, "[fd00::1]:2015"},
		{"first server by name, first listener", servers([]string{"10.0.0.5:80", ":81"}, []string{":9"}), named, "10.0.0.5:80"},
		{"port range", servers([]string{":8000-8003"}), named, "node-1:8000"},
		{"sockets skipped", servers([]string{"unix//run/runtime.sock", "fd/3", "udp/:443"}, []string{":444"}), named, "node-1:444"},
		{"no listener", servers([]string{"unix//run/runtime.sock"}), named, "node-1"},
		{"no http app", nil, named, "node-1"},
		{"no host name", servers([]string{":443"}), unnamed, "localhost:443"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := instanceAddress(tt.servers, tt.hostname); got != tt.want {
				t.Errorf("instanceAddress = %q, want %q", got, tt.want)
			}
		})
	}
}
