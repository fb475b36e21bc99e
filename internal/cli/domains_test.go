package cli

import (
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/handlers"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestDomains: add prints the TXT record to create and is run again to check it; list shows
// the state; remove detaches; refusals exit 1 with the server's code.
func TestDomains(t *testing.T) {
	t.Parallel()
	dns := testkit.StartDNS(t)
	rt := newRuntimeWith(t, func(o *handlers.Options) { o.DomainResolvers = []string{dns.Addr} })
	u := ciUser(t, rt)
	u.ok("deploy", site(t, "@team/shop", "1.0.0"))

	out := u.ok("domains", "add", "@team/shop", "Shop.Example.COM")
	pending := u.json("domains", "list", "@team/shop").([]any)
	if len(pending) != 1 {
		t.Fatalf("domains list --json = %v", pending)
	}
	token := pending[0].(map[string]any)["token"].(string)
	for _, want := range []string{"shop.example.com is pending", `_runtime-challenge.shop.example.com  TXT  "` + token + `"`,
		"then run again: caddy runtime domains add @team/shop shop.example.com", "Last check: "} {
		if !strings.Contains(out, want) {
			t.Errorf("domains add of a pending domain printed\n%s\nwant %q", out, want)
		}
	}
	if out := u.ok("domains", "list", "@team/shop"); !strings.Contains(out, "DOMAIN") || !strings.Contains(out, "shop.example.com  pending") {
		t.Errorf("domains list printed\n%s", out)
	}

	dns.SetTXT("_runtime-challenge.shop.example.com", token)
	if out := u.ok("domains", "add", "@team/shop", "shop.example.com"); out != "shop.example.com is verified: https://shop.example.com/ serves @team/shop once the domain points at the runtime\n" {
		t.Errorf("domains add once the record is in place printed %q", out)
	}
	if out := u.ok("domains", "list", "@team/shop"); !strings.Contains(out, "shop.example.com  verified") {
		t.Errorf("domains list after the check printed\n%s", out)
	}

	u.ok("deploy", site(t, "other", "1.0.0"))
	u.checkExits([]exits{
		{"taken", []string{"domains", "add", "other", "shop.example.com"}, 1, "DOMAIN_TAKEN"},
		{"an address", []string{"domains", "add", "other", "127.0.0.1"}, 1, "INVALID_DOMAIN"},
		{"no such worker", []string{"domains", "add", "ghost", "ghost.example.com"}, 1, "WORKER_NOT_FOUND"},
		{"no domain", []string{"domains", "add", "other"}, 1, "accepts 2 arg"},
		{"not attached", []string{"domains", "remove", "other", "shop.example.com"}, 1, "DOMAIN_NOT_FOUND"},
		{"unknown subcommand", []string{"domains", "verify", "other"}, 1, `domains has no command "verify"`},
	})
	if out := u.ok("domains", "remove", "@team/shop", "shop.example.com"); out != "Detached shop.example.com from @team/shop\n" {
		t.Errorf("domains remove printed %q", out)
	}
	if got := u.json("domains", "list", "@team/shop").([]any); len(got) != 0 {
		t.Errorf("domains list after remove = %v", got)
	}
}
