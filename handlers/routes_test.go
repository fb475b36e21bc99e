package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/internal/mount"
	"github.com/caddy-runtime/runtime/internal/openapi"
)

// TestDocumentLintRules checks, for every route of the table, the rules of the linters make ui
// runs (Redocly's recommended, Spectral's oas) that a route can break, so that a new route
// breaking one fails here too, with the route's name: a server, a license and a contact; an
// operationId, a summary, a description and a declared tag on every operation; a 4xx answer
// on every operation, and 401 and 403 in the envelope on every one that needs a credential.
func TestDocumentLintRules(t *testing.T) {
	a, v := testAPI(t, Options{Prefix: "/_/api"})
	for _, mountPath := range []string{"", "/hp"} {
		t.Run("at "+mountPath, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/_/api/openapi.json", nil)
			resp := serve(t, a, v, r.WithContext(mount.With(r.Context(), mountPath)))
			var doc openapi.Document
			if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
				t.Fatal(err)
			}
			checkDocument(t, a, mountPath, doc)
		})
	}
}

var operationID = regexp.MustCompile(`^[a-z][A-Za-z0-9]*$`)

func checkDocument(t *testing.T, a *API, mountPath string, doc openapi.Document) {
	t.Helper()
	if len(doc.Servers) == 0 {
		t.Errorf("at %q: no server", mountPath)
	}
	for _, s := range doc.Servers {
		// A relative URL, so that the document is true whatever the host; no trailing slash
		// but the root's.
		if !strings.HasPrefix(s.URL, "/") || (s.URL != "/" && strings.HasSuffix(s.URL, "/")) || s.Description == "" {
			t.Errorf("at %q: server %+v", mountPath, s)
		}
	}
	if l := doc.Info.License; l == nil || l.Name == "" || l.Identifier != "Apache-2.0" {
		t.Errorf("license = %+v, want Apache-2.0", l)
	}
	if c := doc.Info.Contact; c == nil || c.URL != RepositoryURL {
		t.Errorf("contact = %+v, want the repository %s", c, RepositoryURL)
	}
	tags := map[string]bool{}
	for _, tag := range doc.Tags {
		if tag.Description == "" {
			t.Errorf("tag %s has no description", tag.Name)
		}
		tags[tag.Name] = true
	}
	ids := map[string]string{}
	for _, rt := range a.routes() {
		name := rt.method + " " + rt.path
		item := doc.Paths[wildcard.ReplaceAllString(a.fullPath(rt.path), "{$1}")]
		if item == nil || (*item)[strings.ToLower(rt.method)] == nil {
			t.Errorf("%s is not documented", name)
			continue
		}
		op := (*item)[strings.ToLower(rt.method)]
		if !operationID.MatchString(op.OperationID) {
			t.Errorf("%s: operationId %q is not lowerCamelCase", name, op.OperationID)
		}
		if other, ok := ids[op.OperationID]; ok {
			t.Errorf("%s: operationId %q is %s's too", name, op.OperationID, other)
		}
		ids[op.OperationID] = name
		if op.Summary == "" || op.Description == "" {
			t.Errorf("%s: summary %q, description %q: both must be set", name, op.Summary, op.Description)
		}
		if len(op.Tags) != 1 || !tags[op.Tags[0]] {
			t.Errorf("%s: tags %v, want one of the document's tags", name, op.Tags)
		}
		clientError := false
		for status, resp := range op.Responses {
			code, err := strconv.Atoi(status)
			if err != nil {
				t.Errorf("%s: status %q", name, status)
			}
			clientError = clientError || code/100 == 4
			if resp.Ref == "" && resp.Description == "" {
				t.Errorf("%s: %s has no description", name, status)
			}
		}
		if !clientError {
			t.Errorf("%s documents no 4xx answer", name)
		}
		if rt.public {
			continue
		}
		// The auth middleware's answers, in front of every authenticated route.
		for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
			resp, ok := op.Responses[strconv.Itoa(status)]
			if !ok || resp.Content["application/json"].Schema == nil ||
				resp.Content["application/json"].Schema.Ref != "#/components/schemas/Envelope" {
				t.Errorf("%s does not document %d with the envelope: %+v", name, status, resp)
			}
		}
		if rt.permission != "" && (op.Permission != rt.permission ||
			!strings.Contains(op.Responses["403"].Description, "permission "+rt.permission+" (PERMISSION_DENIED)")) {
			t.Errorf("%s: x-permission %q, 403 %q: want permission %s", name, op.Permission, op.Responses["403"].Description, rt.permission)
		}
	}
	if _, ok := doc.Components.Responses[headerTooLarge]; !ok {
		t.Errorf("components.responses has no %s", headerTooLarge)
	}
}

// TestFileAnswers checks that the routes answered with a file answer conditional and range
// requests as their documentation says (serve fails on an undocumented status).
func TestFileAnswers(t *testing.T) {
	a, v := testAPI(t, Options{Prefix: "/api"})
	for _, rt := range a.routes() {
		if !rt.file || strings.Contains(rt.path, "{") {
			continue
		}
		target := a.fullPath(rt.path)
		etag := serve(t, a, v, httptest.NewRequest("GET", target, nil)).Header.Get("ETag")
		for _, tc := range []struct {
			header, value string
			want          int
		}{
			{"Range", "bytes=0-9", http.StatusPartialContent},
			{"Range", "bytes=100000000-", http.StatusRequestedRangeNotSatisfiable},
			{"If-None-Match", etag, http.StatusNotModified},
			{"If-Match", `"another"`, http.StatusPreconditionFailed},
		} {
			req := httptest.NewRequest("GET", target, nil)
			req.Header.Set(tc.header, tc.value)
			if got := serve(t, a, v, req).StatusCode; got != tc.want {
				t.Errorf("GET %s with %s: %s answered %d, want %d", target, tc.header, tc.value, got, tc.want)
			}
		}
	}
}
