package integration

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// hostsPermissionLog sends the permission module's debug lines to stderr beside the default
// log, which stays at INFO.
const hostsPermissionLog = `log permission {
		output stderr
		format json
		level DEBUG
		include tls.permission.runtime
	}`

// startHosts starts a runtime with workers_domain apps.localhost: the API on https://localhost
// with a certificate of Caddy's internal issuer, and every other name on a catch-all site whose
// certificates are issued on demand, with the runtime's permission module deciding which.
func startHosts(t *testing.T, app string) *harness.Server {
	t.Helper()
	return harness.Start(t, harness.Config{
		Env:   map[string]string{"RUNTIME_ROOT_KEY": rootKey},
		TLS:   true,
		Hosts: []harness.Host{{Name: "localhost"}},
		App:   "workers_domain apps.localhost\n" + app,
		Global: `local_certs
	on_demand_tls {
		permission runtime
	}
	` + hostsPermissionLog,
		Sites: func(port int) string {
			return fmt.Sprintf(`https://localhost:%d {
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
	for _, w := range []struct{ name, body string }{{"app", "the app"}, {"@team/tool", "the tool"}, {"sleeper", "asleep"}} {
		if resp := s.Upload(s.API+"/workers/upload", "w.tgz", siteArchive(t, w.name, "1.0.0", w.body), root); resp.Status != 200 {
			t.Fatalf("upload %s = %s", w.name, resp)
		}
	}
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
