package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// TestHandleErrors: the data plane's errors reach a site's handle_errors routes, as
// file_server's and reverse_proxy's do, with the status, the envelope's code and message and
// the request id in Caddy's error placeholders; a site without handle_errors, on the same
// server as one with it, answers the envelope; an error the routes do not match gets Caddy's
// own answer, its status and no body.
func TestHandleErrors(t *testing.T) {
	t.Parallel()
	sites := func(port int) string {
		return fmt.Sprintf(`http://localhost:%[1]d {
	runtime
}
http://apps.localhost:%[1]d {
	runtime {
		serve workers
	}
	handle_errors {
		respond "custom {http.error.status_code} [{http.error.message}] id={http.error.id}"
	}
}
http://down.localhost:%[1]d {
	runtime {
		serve workers
	}
	handle_errors 5xx {
		respond "down {http.error.status_code}"
	}
}
`, port)
	}
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, Sites: sites, Hosts: []harness.Host{{Name: "localhost"}}})
	dir := filepath.Join(s.DataDir, "apps", "broken", "1.0.0")
	writeFiles(t, dir, map[string]string{"manifest.yaml": "name: broken\nversion: 1.0.0\ncommand: [./missing]\n"})

	// No handle_errors for this site: the envelope, though another site of the server has one.
	if resp := s.Get("/nobody/"); resp.Status != 404 || resp.ErrorCode() != "WORKER_NOT_FOUND" {
		t.Errorf("a missing worker without handle_errors = %s, want 404 WORKER_NOT_FOUND", resp)
	}
	if resp := s.Get("/broken/"); resp.Status != 503 || resp.ErrorCode() != "WORKER_UNAVAILABLE" {
		t.Errorf("a worker that cannot start without handle_errors = %s, want 503 WORKER_UNAVAILABLE", resp)
	}

	apps := s.Host("apps.localhost")
	resp := apps.Get("/nobody/")
	id := resp.Header.Get("X-Request-Id")
	want := fmt.Sprintf(`custom 404 [404 WORKER_NOT_FOUND: no worker named "nobody"] id=%s`, id)
	if resp.Status != 404 || id == "" || body(resp) != want {
		t.Errorf("a missing worker under handle_errors = %s (X-Request-Id %q), want %q", resp, id, want)
	}
	if resp := apps.Get("/broken/"); resp.Status != 503 || !strings.HasPrefix(body(resp), "custom 503 [503 WORKER_UNAVAILABLE: ") {
		t.Errorf("a worker that cannot start under handle_errors = %s, want the site's own page", resp)
	}

	down := s.Host("down.localhost")
	if resp := down.Get("/broken/"); resp.Status != 503 || body(resp) != "down 503" {
		t.Errorf("a worker that cannot start under handle_errors 5xx = %s, want the site's own page", resp)
	}
	if resp := down.Get("/nobody/"); resp.Status != 404 || len(resp.Body) != 0 {
		t.Errorf("a missing worker under handle_errors 5xx = %s, want Caddy's own 404 without a body", resp)
	}
}
