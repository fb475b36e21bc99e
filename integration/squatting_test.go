package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestDomainSquatting: a namespace holds at most max_pending_domains (10 by default) claims
// pending at once (the next is refused naming the setting), and a pending claim blocks nobody: another
// namespace's worker gets a token of its own for the name, and whoever's TXT record is found
// first gets the domain, the other claim being dropped. A verified domain still answers
// DOMAIN_TAKEN.
func TestDomainSquatting(t *testing.T) {
	t.Parallel()
	dns := testkit.StartDNS(t)
	s := startHosts(t, "domain_resolvers "+dns.Addr)
	uploadSites(t, s, "@team/app", "the squatter", "@other/app", "the owner")
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "editor", "namespaces": []string{"@team"}})
	other := s.CreateKey(rootKey, map[string]any{"name": "other", "role": "editor", "namespaces": []string{"@other"}})
	attach := func(key, worker, domain string) *harness.Response {
		t.Helper()
		return s.Do("PUT", s.API+"/workers/"+worker+"/domains/"+domain, harness.WithKey(key), harness.WithOrigin(""))
	}
	claim := func(resp *harness.Response) api.WorkerDomain {
		t.Helper()
		var d api.WorkerDomain
		if resp.Status != 200 || resp.JSON(&d) != nil {
			t.Fatalf("PUT domain = %s", resp)
		}
		return d
	}

	var squatted []api.WorkerDomain
	for i := range 10 {
		d := claim(attach(team.Secret, "@team/app", fmt.Sprintf("shop%d.example.org", i)))
		if d.State != "pending" {
			t.Fatalf("a claim without a TXT record = %+v, want pending", d)
		}
		squatted = append(squatted, d)
	}
	resp := attach(team.Secret, "@team/app", "shop10.example.org")
	if resp.Status != 409 || resp.ErrorCode() != "TOO_MANY_PENDING_DOMAINS" || !strings.Contains(string(resp.Body), "max_pending_domains") {
		t.Errorf("a claim past max_pending_domains = %s, want 409 TOO_MANY_PENDING_DOMAINS naming the setting", resp)
	}
	if d := claim(attach(team.Secret, "@team/app", squatted[0].Domain)); d.Token != squatted[0].Token {
		t.Errorf("checking a pending claim again gave the token %q, want %q", d.Token, squatted[0].Token)
	}

	// The owner claims a name the squatter holds pending: it gets a token of its own, and its
	// record wins.
	name := squatted[1].Domain
	mine := claim(attach(other.Secret, "@other/app", name))
	if mine.State != "pending" || mine.Token == "" || mine.Token == squatted[1].Token || mine.Worker != "@other/app" {
		t.Fatalf("the owner's claim of a name pending elsewhere = %+v, want pending with a token of its own", mine)
	}
	dns.SetTXT("_runtime-challenge."+name, mine.Token)
	if d := claim(attach(other.Secret, "@other/app", name)); d.State != "verified" {
		t.Fatalf("the owner's claim with its record in place = %+v, want verified", d)
	}
	if resp := s.Host(name).Get("/"); resp.Status != 200 || body(resp) != "the owner" {
		t.Errorf("GET https://%s/ = %s, want the owner's worker", name, resp)
	}
	var listed []api.WorkerDomain
	if resp := s.Get(s.API+"/workers/@team/app/domains", harness.WithKey(team.Secret)); resp.Status != 200 || resp.JSON(&listed) != nil || len(listed) != 9 {
		t.Errorf("the squatter's domains after the owner verified = %s, want its 9 other claims", resp)
	}
	for _, d := range listed {
		if d.Domain == name {
			t.Errorf("the squatter still lists %s", name)
		}
	}
	if resp := attach(team.Secret, "@team/app", name); resp.Status != 409 || resp.ErrorCode() != "DOMAIN_TAKEN" {
		t.Errorf("claiming a domain verified elsewhere = %s, want 409 DOMAIN_TAKEN", resp)
	}
	// The dropped claim no longer counts against the squatter's cap.
	if d := claim(attach(team.Secret, "@team/app", "shop10.example.org")); d.State != "pending" {
		t.Errorf("a claim after one was dropped = %+v, want pending", d)
	}
}
