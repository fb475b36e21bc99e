package hosts

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

func TestCheckCustom(t *testing.T) {
	d := Domain{Name: "apps.example.com", Scheme: "https"}
	own := []string{"example.com", "admin.example.com"}
	tests := []struct {
		raw, want string
		err       error
	}{
		{"Shop.Example.org.", "shop.example.org", nil},
		{"127.0.0.1", "", ErrIPLiteral},
		{"[::1]", "", ErrIPLiteral},
		{"::1", "", ErrIPLiteral},
		{"admin.example.com", "", ErrOwnHost},
		{"app.apps.example.com", "", ErrUnderDomain},
		{"apps.example.com", "", ErrUnderDomain},
		{"localhost", "", ErrNotDomain},
		{"shop_x.example.org", "", ErrNotDomain},
		{"*.example.org", "", ErrNotDomain},
		{"", "", ErrNotDomain},
	}
	for _, tt := range tests {
		got, err := CheckCustom(tt.raw, d, own)
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("CheckCustom(%q) = %q, %v; want %q, %v", tt.raw, got, err, tt.want, tt.err)
		}
	}
}

// TestVerifier asks a DNS server on loopback for the challenge record.
func TestVerifier(t *testing.T) {
	server := testkit.StartDNS(t)
	server.SetTXT("_runtime-challenge.shop.example.org", "something else", "tok-1")
	server.SetTXT("_runtime-challenge.wrong.example.org", "tok-other")
	v := Verifier{Resolvers: []string{server.Addr}}
	tests := []struct {
		domain, token, err string
	}{
		{"shop.example.org", "tok-1", ""},
		{"shop.example.org", "tok-2", "do not hold the token"},
		{"wrong.example.org", "tok-1", "do not hold the token"},
		{"none.example.org", "tok-1", "no TXT record at _runtime-challenge.none.example.org"},
	}
	for _, tt := range tests {
		err := v.Check(context.Background(), tt.domain, tt.token)
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("Check(%s, %s) = %v, want %q", tt.domain, tt.token, err, tt.err)
		}
	}
}
