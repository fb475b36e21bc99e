package openapitest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const doc = `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{
 "/api/things/{id}":{"get":{"operationId":"thing","parameters":[{"name":"id","in":"path","required":true,"schema":{"type":"string"}}],"responses":{
  "200":{"description":"ok","content":{"application/json":{"schema":{"type":"object","required":["ok"],"properties":{"ok":{"type":"boolean"}}}}}},
  "304":{"description":"not modified"},
  "404":{"description":"missing","content":{"application/json":{"schema":{"$ref":"#/components/schemas/Envelope"}}}}}}},
 "/api/things/special":{"get":{"operationId":"special","responses":{"204":{"description":"none"}}}},
 "/api/page":{"get":{"operationId":"page","responses":{"200":{"description":"html","content":{"text/html":{"schema":{"type":"string"}}}}}}}},
 "components":{"schemas":{"Envelope":{"type":"object","required":["error"],"properties":{"error":{"type":"object","required":["code","message"],"properties":{"code":{"type":"string"},"message":{"type":"string"}}}}}}}}`

func TestCheck(t *testing.T) {
	v, err := New([]byte(doc), "/api")
	if err != nil {
		t.Fatal(err)
	}
	json := "application/json"
	tests := []struct {
		name, method, path string
		status             int
		ctype, body, rid   string
		wantErr            string
	}{
		{"valid", "GET", "/api/things/1", 200, json, `{"ok":true}`, "r", ""},
		{"head without body", "HEAD", "/api/things/1", 200, json, ``, "r", ""},
		{"not modified", "GET", "/api/things/1", 304, "", ``, "r", ""},
		{"documented error", "GET", "/api/things/1", 404, json, `{"error":{"code":"X","message":"m"}}`, "r", ""},
		{"most specific path wins", "GET", "/api/things/special", 204, "", ``, "r", ""},
		{"html page", "GET", "/api/page", 200, "text/html; charset=utf-8", `<p>`, "r", ""},
		{"outside the API is not checked", "GET", "/app/x", 200, "text/plain", `hi`, "r", ""},
		{"missing request id", "GET", "/api/things/1", 200, json, `{"ok":true}`, "", "X-Request-Id"},
		{"body off schema", "GET", "/api/things/1", 200, json, `{"ok":"yes"}`, "r", "schema"},
		{"undocumented status", "GET", "/api/things/1", 418, json, `{"error":{"code":"X","message":"m"}}`, "r", "not documented"},
		{"body where none is documented", "GET", "/api/things/special", 204, "", `x`, "r", "without a body"},
		{"undocumented content type", "GET", "/api/page", 200, "text/plain", `x`, "r", "content type"},
		{"unknown API path must be an envelope", "GET", "/api/nope", 404, json, `{"message":"m"}`, "r", "envelope"},
		{"unknown API path must not succeed", "GET", "/api/nope", 200, json, `{}`, "r", "undocumented"},
		{"envelope with extra data", "GET", "/api/nope", 404, json, `{"error":{"code":"X","message":"m"}}{}`, "r", "after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.ctype != "" {
				h.Set("Content-Type", tt.ctype)
			}
			if tt.rid != "" {
				h.Set("X-Request-Id", tt.rid)
			}
			err := v.Check(httptest.NewRequest(tt.method, tt.path, nil), tt.status, h, []byte(tt.body))
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Check() = %v, want nil", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Check() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewRefusesInvalidDocuments(t *testing.T) {
	for name, d := range map[string]string{
		"not 3.1":                   `{"openapi":"3.0.3","info":{"title":"t","version":"1"},"paths":{}}`,
		"no info":                   `{"openapi":"3.1.0","paths":{}}`,
		"broken ref":                `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{"/a":{"get":{"responses":{"200":{"description":"x","content":{"application/json":{"schema":{"$ref":"#/components/schemas/Nope"}}}}}}}}}`,
		"not json":                  `{`,
		"undeclared path parameter": `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{"/a/{id}":{"get":{"responses":{"200":{"description":"x"}}}}}}`,
	} {
		if _, err := New([]byte(d), "/api"); err == nil {
			t.Errorf("%s: New() accepted an invalid document", name)
		}
	}
}

// TestServerPath checks that documented paths are below the server URL's path, as for a
// runtime mounted at /hp.
func TestServerPath(t *testing.T) {
	mounted := strings.Replace(doc, `"paths":{`, `"servers":[{"url":"/hp"}],"paths":{`, 1)
	v, err := New([]byte(mounted), "/hp/api")
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r"}}
	if err := v.Check(httptest.NewRequest("GET", "/hp/api/things/1", nil), 200, h, []byte(`{"ok":"yes"}`)); err == nil || !strings.Contains(err.Error(), "schema") {
		t.Errorf("a path below the server URL was not checked against its operation: %v", err)
	}
	if err := v.Check(httptest.NewRequest("GET", "/hp/api/nope", nil), 200, h, []byte(`{}`)); err == nil {
		t.Error("an undocumented API path below the server URL answered 200 unnoticed")
	}
	if err := v.Check(httptest.NewRequest("GET", "/api/things/1", nil), 200, h, []byte(`{"ok":"yes"}`)); err != nil {
		t.Errorf("a path outside the server URL was checked: %v", err)
	}
	if err := v.Check(httptest.NewRequest("GET", "/hpx/api/things/1", nil), 200, h, []byte(`{"ok":"yes"}`)); err != nil {
		t.Errorf("a path that only starts with the server URL's text was checked: %v", err)
	}
}
