package integration

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// hostsPermissionLog sends the permission module's debug lines to stderr beside the default
// log, which stays at INFO.
const hostsPermissionLog = `log permission {
		output stderr
		format json
		level DEBUG
		include tls.permission.runtime
	}`

// startHosts starts a runtime with workers_domain apps.localhost: the API on
// https://api.localhost with a certificate of Caddy's internal issuer, and every other name on a catch-all site whose
// certificates are issued on demand, with the runtime's permission module deciding which.
func startHosts(t *testing.T, app string) *harness.Server {
	t.Helper()
	return harness.Start(t, harness.Config{
		Env:   map[string]string{"RUNTIME_ROOT_KEY": rootKey},
		TLS:   true,
		Hosts: []harness.Host{{Name: "api.localhost"}},
		App:   "workers_domain apps.localhost\n" + app,
		Global: `local_certs
	on_demand_tls {
		permission runtime
	}
	` + hostsPermissionLog,
		Sites: func(port int) string {
			return fmt.Sprintf(`https://api.localhost:%d {
	tls internal
	runtime {
		serve api cpanel
	}
}
https://:%d {
	tls internal {
		on_demand
	}
	runtime {
		serve workers
	}
}
`, port, port)
		},
	})
}

// certificateFor makes a TLS handshake with the server for name on loopback and returns the
// certificate it was given, or why the handshake failed.
func certificateFor(s *harness.Server, name string) (*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", s.Port),
		&tls.Config{ServerName: name, InsecureSkipVerify: true}) // the chain is checked by the requests' client
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// uploadSites uploads a static worker at version 1.0.0 for each name and body in namesAndBodies,
// as the root key.
func uploadSites(t *testing.T, s *harness.Server, namesAndBodies ...string) {
	t.Helper()
	for i := 0; i+1 < len(namesAndBodies); i += 2 {
		name := namesAndBodies[i]
		if resp := s.Upload(s.API+"/workers/upload", "w.tgz", siteArchive(t, name, "1.0.0", namesAndBodies[i+1]), harness.WithKey(rootKey)); resp.Status != 200 {
			t.Fatalf("upload %s = %s", name, resp)
		}
	}
}

// refusal waits for the permission module's debug line refusing name and returns its reason.
func refusal(t *testing.T, s *harness.Server, name string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, e := range s.LogEntries("refused a certificate") {
			if e["name"] == name {
				reason, _ := e["reason"].(string)
				return reason
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no debug line refusing a certificate for %s; logs:\n%s", name, s.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWorkerHostsOverTLS: with workers_domain and on-demand TLS gated by the runtime's
// permission module, a worker uploaded after start is served over HTTPS at its own host with a
// certificate for that name, a scoped worker at its two-level host; a name the runtime does not
// serve gets no certificate, and the debug log says why; a disabled worker's host answers 404;
// and none of it reloads the config.
func TestWorkerHostsOverTLS(t *testing.T) {
	t.Parallel()
	s := startHosts(t, "")
	root := harness.WithKey(rootKey)
	uploadSites(t, s, "app", "the app", "@team/tool", "the tool", "sleeper", "asleep")
	if resp := s.Do("POST", s.API+"/workers/_/sleeper/1.0.0/disable", root); resp.Status != 200 {
		t.Fatalf("disable sleeper = %s", resp)
	}

	for _, tt := range []struct{ host, body string }{{"app.apps.localhost", "the app"}, {"tool.team.apps.localhost", "the tool"}} {
		cert, err := certificateFor(s, tt.host)
		if err != nil {
			t.Fatalf("handshake for %s: %v", tt.host, err)
		}
		if err := cert.VerifyHostname(tt.host); err != nil {
			t.Errorf("certificate for %s: %v (names %v)", tt.host, err, cert.DNSNames)
		}
		// The client checks the chain against the internal root and the name.
		h := s.Host(tt.host)
		if resp := h.Get("/"); resp.Status != 200 || body(resp) != tt.body {
			t.Errorf("GET https://%s/ = %s", tt.host, resp)
		}
		// The worker's host is the worker's alone: its /api is not the runtime's.
		if resp := h.Get("/api/workers", root); resp.Status != 200 || body(resp) != tt.body {
			t.Errorf("GET https://%s/api/workers = %s, want the worker's page", tt.host, resp)
		}
	}

	for _, tt := range []struct{ name, reason string }{
		{"ghost.apps.localhost", "no worker named ghost"},
		{"sleeper.apps.localhost", "worker sleeper has no enabled version"},
		{"a.b.c.apps.localhost", "not a worker's host"},
		{"elsewhere.example.com", "neither a worker's host nor a verified custom domain"},
	} {
		if cert, err := certificateFor(s, tt.name); err == nil {
			t.Errorf("%s got a certificate for %v", tt.name, cert.DNSNames)
			continue
		}
		if reason := refusal(t, s, tt.name); !strings.Contains(reason, tt.reason) {
			t.Errorf("refused %s because %q, want %q in it", tt.name, reason, tt.reason)
		}
	}

	// Disabled after its certificate was issued: the cached certificate serves the handshake,
	// and the host answers 404 at once.
	if resp := s.Do("POST", s.API+"/workers/_/app/1.0.0/disable", root); resp.Status != 200 {
		t.Fatalf("disable app = %s", resp)
	}
	if resp := s.Host("app.apps.localhost").Get("/"); resp.Status != 404 || resp.ErrorCode() != "WORKER_NOT_FOUND" {
		t.Errorf("GET a disabled worker's host = %s", resp)
	}

	if n := s.LogCount("admin endpoint started", 1); n != 1 || len(s.LogEntries("stopped previous server")) != 0 {
		t.Errorf("the config was loaded %d times, want once", n)
	}
}

// TestCustomDomains: a domain attached to a worker is pending, gets no certificate and is not
// served until a DNS check (a TXT record served by a DNS server on loopback, named by
// domain_resolvers) finds its token; then it is served over HTTPS with a certificate for it.
// IP literals, the API's host and names under workers_domain are refused, a domain attaches to
// one worker, a namespaced key attaches domains to its own workers only, each change is
// audited, and a detached domain is served no more. No config reload happens.
func TestCustomDomains(t *testing.T) {
	t.Parallel()
	dns := testkit.StartDNS(t)
	s := startHosts(t, "domain_resolvers "+dns.Addr)
	root := harness.WithKey(rootKey)
	uploadSites(t, s, "shop", "the shop", "@team/tool", "the tool")
	const domain = "shop.example.org"
	var pending api.WorkerDomain
	resp := s.Do("PUT", s.API+"/workers/_/shop/domains/Shop.Example.ORG", root)
	if resp.Status != 200 || resp.JSON(&pending) != nil || pending.State != "pending" || pending.Domain != domain ||
		pending.Token == "" || pending.Record != "_runtime-challenge."+domain || !strings.Contains(pending.Error, "no TXT record") {
		t.Fatalf("PUT domain = %s", resp)
	}
	if cert, err := certificateFor(s, domain); err == nil {
		t.Errorf("a pending domain got a certificate for %v", cert.DNSNames)
	} else if reason := refusal(t, s, domain); !strings.Contains(reason, "not verified") {
		t.Errorf("refused the pending domain because %q", reason)
	}

	dns.SetTXT("_runtime-challenge."+domain, "unrelated", pending.Token)
	var verified api.WorkerDomain
	resp = s.Do("PUT", s.API+"/workers/_/shop/domains/"+domain, root)
	if resp.Status != 200 || resp.JSON(&verified) != nil || verified.State != "verified" || verified.Token != pending.Token || verified.Error != "" {
		t.Fatalf("PUT again with the record in place = %s", resp)
	}
	cert, err := certificateFor(s, domain)
	if err != nil || cert.VerifyHostname(domain) != nil {
		t.Fatalf("handshake for the verified domain: %v", err)
	}
	if resp := s.Host(domain).Get("/"); resp.Status != 200 || body(resp) != "the shop" {
		t.Errorf("GET https://%s/ = %s", domain, resp)
	}
	var listed []api.WorkerDomain
	if resp := s.Get(s.API+"/workers/_/shop/domains", root); resp.Status != 200 || resp.JSON(&listed) != nil ||
		len(listed) != 1 || listed[0].State != "verified" || listed[0].CheckedAt == "" {
		t.Errorf("GET domains = %s", resp)
	}

	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "editor", "namespaces": []string{"@team"}})
	for _, tt := range []struct {
		name, path, key string
		status          int
		code            string
	}{
		{"an IPv4 literal", "/workers/_/shop/domains/127.0.0.1", rootKey, 400, "INVALID_DOMAIN"},
		{"an IPv6 literal", "/workers/_/shop/domains/" + url.PathEscape("[::1]"), rootKey, 400, "INVALID_DOMAIN"},
		{"the API's host", "/workers/_/shop/domains/api.localhost", rootKey, 400, "DOMAIN_RESERVED"},
		{"a name under workers_domain", "/workers/_/shop/domains/x.apps.localhost", rootKey, 400, "DOMAIN_RESERVED"},
		{"workers_domain itself", "/workers/_/shop/domains/apps.localhost", rootKey, 400, "DOMAIN_RESERVED"},
		{"a domain attached elsewhere", "/workers/@team/tool/domains/" + domain, rootKey, 409, "DOMAIN_TAKEN"},
		{"another namespace's worker", "/workers/_/shop/domains/other.example.org", team.Secret, 403, "NAMESPACE_DENIED"},
		{"no such worker", "/workers/_/ghost/domains/ghost.example.org", rootKey, 404, "WORKER_NOT_FOUND"},
	} {
		if resp := s.Do("PUT", s.API+tt.path, harness.WithKey(tt.key), harness.WithOrigin("")); resp.Status != tt.status || resp.ErrorCode() != tt.code {
			t.Errorf("%s: PUT %s = %s, want %d %s", tt.name, tt.path, resp, tt.status, tt.code)
		}
	}
	if resp := s.Do("PUT", s.API+"/workers/@team/tool/domains/tool.example.org", harness.WithKey(team.Secret), harness.WithOrigin("")); resp.Status != 200 {
		t.Errorf("the team's key attaching a domain to its own worker = %s", resp)
	}
	if resp := s.Get(s.API+"/workers/_/shop/domains", harness.WithKey(team.Secret)); resp.Status != 403 {
		t.Errorf("the team's key listing another namespace's domains = %s", resp)
	}

	if resp := s.Do("DELETE", s.API+"/workers/_/shop/domains/"+domain, root); resp.Status != 200 {
		t.Fatalf("DELETE domain = %s", resp)
	}
	if resp := s.Host(domain).Get("/"); resp.Status != 404 {
		t.Errorf("GET a detached domain = %s", resp)
	}
	if resp := s.Do("DELETE", s.API+"/workers/_/shop/domains/"+domain, root); resp.Status != 404 || resp.ErrorCode() != "DOMAIN_NOT_FOUND" {
		t.Errorf("DELETE it again = %s", resp)
	}

	// Removing a worker whole detaches its domains: uploaded again, it holds none, and the
	// domain is free for another worker.
	if resp := s.Do("DELETE", s.API+"/workers/@team/tool", root); resp.Status != 200 {
		t.Fatalf("DELETE the worker @team/tool = %s", resp)
	}
	if resp := s.Upload(s.API+"/workers/upload", "w.tgz", siteArchive(t, "@team/tool", "1.0.0", "the tool again"), root); resp.Status != 200 {
		t.Fatalf("upload @team/tool again = %s", resp)
	}
	if resp := s.Get(s.API+"/workers/@team/tool/domains", root); resp.Status != 200 || resp.JSON(&listed) != nil || len(listed) != 0 {
		t.Errorf("GET domains of the worker uploaded again = %s, want none", resp)
	}
	if resp := s.Do("PUT", s.API+"/workers/_/shop/domains/tool.example.org", root); resp.Status != 200 {
		t.Errorf("attaching the removed worker's domain to another = %s", resp)
	}

	var trail struct {
		Entries []struct{ Action, Target, Outcome string }
	}
	if resp := s.Get(s.API+"/audit", root); resp.Status != 200 || resp.JSON(&trail) != nil {
		t.Fatalf("GET audit = %s", resp)
	}
	seen := map[string]bool{}
	for _, e := range trail.Entries {
		seen[e.Action+" "+e.Target+" "+e.Outcome] = true
	}
	for _, want := range []string{"worker.domain.attach shop " + domain + " success", "worker.domain.attach @team/tool tool.example.org success",
		"worker.domain.detach shop " + domain + " success", "worker.domain.attach shop 127.0.0.1 failed",
		"worker.domain.detach @team/tool tool.example.org success"} {
		if !seen[want] {
			t.Errorf("the audit trail has no %q", want)
		}
	}
	if n := s.LogCount("admin endpoint started", 1); n != 1 || len(s.LogEntries("stopped previous server")) != 0 {
		t.Errorf("the config was loaded %d times, want once", n)
	}
}

// onHost sends a request with host as its Host, to the server's own address.
func onHost(host string) harness.Option {
	return func(r *http.Request) error {
		r.Host = host
		return nil
	}
}

// servedAt is the condition that GET / on host answers status, and for a 200 body.
func servedAt(host string, status int, body string) func(*harness.Server) error {
	return func(s *harness.Server) error {
		resp, err := s.Send("GET", "/", onHost(host))
		if err != nil {
			return err
		}
		if resp.Status != status || status == 200 && string(resp.Body) != body {
			return fmt.Errorf("GET http://%s/ = %s, want %d %q", host, resp, status, body)
		}
		return nil
	}
}

// TestClusterHosts: in a cluster, a worker uploaded on one instance is served at its host by
// every instance, and a custom domain verified on one is served by every instance from the
// replicated table, until it is detached on another.
func TestClusterHosts(t *testing.T) {
	t.Parallel()
	dns := testkit.StartDNS(t)
	c := startCluster(t, 0)
	var cfgs []harness.Config
	for _, name := range []string{"A", "B"} {
		cfg := c.Config(name)
		cfg.App += "\n\t\tworkers_domain apps.example.test\n\t\tdomain_resolvers " + dns.Addr
		cfgs = append(cfgs, cfg)
	}
	g := harness.StartAll(t, cfgs...).In(t)
	a, b := g[0], g[1]
	uploadOK(t, a, "workers", "shop.tgz", siteArchive(t, "shop", "1.0.0", "the shop"), rootKey)
	g.Each(t, converge, servedAt("shop.apps.example.test", 200, "the shop"))

	const domain = "shop.example.org"
	var d api.WorkerDomain
	if resp := a.Do("PUT", a.API+"/workers/_/shop/domains/"+domain, harness.WithKey(rootKey)); resp.Status != 200 || resp.JSON(&d) != nil {
		t.Fatalf("PUT domain on A = %s", resp)
	}
	dns.SetTXT("_runtime-challenge."+domain, d.Token)
	if resp := a.Do("PUT", a.API+"/workers/_/shop/domains/"+domain, harness.WithKey(rootKey)); resp.Status != 200 || resp.JSON(&d) != nil || d.State != "verified" {
		t.Fatalf("PUT domain on A with the record in place = %s", resp)
	}
	g.Each(t, converge, servedAt(domain, 200, "the shop"))

	if resp := b.Do("DELETE", b.API+"/workers/_/shop/domains/"+domain, harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("DELETE domain on B = %s", resp)
	}
	// Detached, the domain is only a host of the site serving everything: its / says where the
	// cpanel and the API are, and the shop is not served there.
	g.Each(t, converge, func(s *harness.Server) error {
		resp, err := s.Send("GET", "/", onHost(domain))
		if err != nil {
			return err
		}
		if string(resp.Body) == "the shop" || !strings.HasPrefix(string(resp.Body), "This is a runtime") {
			return fmt.Errorf("GET http://%s/ after the detach = %s, want the runtime's index, not the shop", domain, resp)
		}
		return nil
	})
}
