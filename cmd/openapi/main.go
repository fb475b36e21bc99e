// Command openapi writes the management API's OpenAPI document, as a runtime serves it at
// /api/openapi.json, to the file its argument names: make ui generates the cpanel's TypeScript
// types from it. The document's version is the release's (internal/version.Release), so that
// it changes with the API and with a release, not with each commit.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/caddy-runtime/runtime/handlers"
	"github.com/caddy-runtime/runtime/internal/version"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: openapi FILE")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		os.Exit(1)
	}
}

func write(file string) error {
	a, err := handlers.New(handlers.Options{Prefix: "/api", Version: version.Release})
	if err != nil {
		return err
	}
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/openapi.json", nil))
	if rec.Code != http.StatusOK {
		return fmt.Errorf("GET /api/openapi.json answered %d: %s", rec.Code, rec.Body)
	}
	// Indented, so that a change of the API reads as a change of a few lines.
	var doc bytes.Buffer
	if err := json.Indent(&doc, rec.Body.Bytes(), "", "  "); err != nil {
		return err
	}
	doc.WriteByte('\n')
	return os.WriteFile(file, doc.Bytes(), 0o644)
}
