package caddymodule

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestHostsCaddyfile adapts the production Caddyfile of docs/hosts.md: on-demand TLS asks the
// runtime's permission module, and the runtime app carries workers_domain.
func TestHostsCaddyfile(t *testing.T) {
	doc, err := os.ReadFile("../docs/hosts.md")
	if err != nil {
		t.Fatal(err)
	}
	var production string
	for _, m := range regexp.MustCompile("(?s)```caddyfile\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		if strings.Contains(m[1], "admin.example.com") {
			production = m[1]
		}
	}
	if production == "" {
		t.Fatal("docs/hosts.md has no production Caddyfile")
	}
	out, err := adapt(t, []byte(production))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"permission":{"module":"runtime"}`, `"workers_domain":"example-apps.com"`, `"on_demand":true`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the adapted config lacks %s:\n%s", want, out)
		}
	}
	// The module takes no settings.
	if _, err := adapt(t, []byte("{\n\ton_demand_tls {\n\t\tpermission runtime extra\n\t}\n}\n")); err == nil {
		t.Error("permission runtime with an argument was accepted")
	}
}
