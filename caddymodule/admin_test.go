package caddymodule

import (
	"net"
	"testing"
)

func TestAdminOnTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	tests := []struct {
		name, addr string
		want       bool
	}{
		{"listening", ln.Addr().String(), true},
		{"listening, with the network", "tcp/" + ln.Addr().String(), true},
		{"nothing listens", closed.Addr().String(), false},
		{"unix socket", "unix//run/runtime/admin.sock", false},
		{"off", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := adminOnTCP(tt.addr); got != tt.want {
				t.Fatalf("adminOnTCP(%q) = %v, want %v", tt.addr, got, tt.want)
			}
		})
	}
}
