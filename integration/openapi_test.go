package integration

import (
	"io"
	"mime"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// TestHeaderTooLarge: a request whose header is over the HTTP server's limit gets 431 in plain
// text from the server, before the API reads it, as the OpenAPI document says of every
// operation, the public probes included.
func TestHeaderTooLarge(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{})
	for _, path := range []string{"/.well-known/runtime", s.API + "/health", s.API + "/workers"} {
		req, err := http.NewRequest("GET", s.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Caddy's default max_header_size is Go's 1 MB.
		req.Header.Set("X-Large", strings.Repeat("a", 1<<20+1))
		resp, err := s.Client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || ct != "text/plain" {
			t.Errorf("GET %s with a large header = %d %s %q, want 431 in plain text", path, resp.StatusCode, ct, body)
		}
		op := s.Validator.Document().Paths.Find(path).Get
		documented := op.Responses.Status(http.StatusRequestHeaderFieldsTooLarge)
		if documented == nil || documented.Value == nil || documented.Value.Content.Get("text/plain") == nil {
			t.Errorf("GET %s does not document 431 in plain text", path)
		}
	}
}
