package handlers

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/mount"
	"github.com/caddy-runtime/runtime/internal/openapi/openapitest"
	"github.com/caddy-runtime/runtime/internal/trace"
)

// testAPI builds an API and a validator of its own OpenAPI document.
func testAPI(t *testing.T, opts Options) (*API, *openapitest.Validator) {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = "/api"
	}
	if opts.Version == "" {
		opts.Version = "v1.2.3"
	}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(a.docs.spec)
	if err != nil {
		t.Fatal(err)
	}
	v, err := openapitest.New(doc, opts.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	return a, v
}

// serve sends a request through the API and validates the response against the document.
func serve(t *testing.T, a *API, v *openapitest.Validator, req *http.Request) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	resp := rec.Result()
	body, _ := io.ReadAll(resp.Body)
	if err := v.Check(req, resp.StatusCode, resp.Header, body); err != nil {
		t.Errorf("response does not match the OpenAPI document: %v", err)
	}
	resp.Body = io.NopCloser(strings.NewReader(string(body)))
	return resp
}

func bodyOf(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestRoutes(t *testing.T) {
	tests := []struct {
		method, path string
		status       int
		body         string // exact JSON body, or "" to skip
		code         string // error code, or ""
		allow        string
	}{
		{"GET", "/.well-known/runtime", 200, `{"api":"/_/api","version":"v1.2.3"}`, "", ""},
		{"GET", "/.well-known/runtime/", 200, `{"api":"/_/api","version":"v1.2.3"}`, "", ""},
		{"HEAD", "/.well-known/runtime", 200, "", "", ""},
		{"GET", "/_/api/health", 200, `{"ok":true,"status":"healthy","version":"v1.2.3"}`, "", ""},
		{"GET", "/_/api/health/", 200, `{"ok":true,"status":"healthy","version":"v1.2.3"}`, "", ""},
		{"GET", "/_/api/health/ready", 200, `{"ok":true,"status":"ready","version":"v1.2.3"}`, "", ""},
		{"GET", "/_/api/health/live", 200, `{"ok":true,"status":"live","version":"v1.2.3"}`, "", ""},
		{"GET", "/_/api/nothing", 404, "", envelope.CodeNotFound, ""},
		{"GET", "/_/api", 404, "", envelope.CodeNotFound, ""},
		{"GET", "/_/api/", 404, "", envelope.CodeNotFound, ""},
		{"GET", "/_/api//health", 404, "", envelope.CodeNotFound, ""},
		{"GET", "/_/api/x/../health", 404, "", envelope.CodeNotFound, ""},
		{"POST", "/_/api/health", 405, "", envelope.CodeMethodNotAllowed, "GET, HEAD"},
		{"DELETE", "/.well-known/runtime", 405, "", envelope.CodeMethodNotAllowed, "GET, HEAD"},
		{"GET", "/_/api/docs/missing.js", 404, "", envelope.CodeNotFound, ""},
		{"GET", "/_/api/docs/index.html", 404, "", envelope.CodeNotFound, ""},
	}
	a, v := testAPI(t, Options{Prefix: "/_/api"})
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			resp := serve(t, a, v, httptest.NewRequest(tt.method, tt.path, nil))
			body := bodyOf(t, resp)
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tt.status, body)
			}
			if tt.body != "" && strings.TrimSpace(body) != tt.body {
				t.Errorf("body = %s, want %s", body, tt.body)
			}
			if tt.code != "" && !strings.Contains(body, `"code":"`+tt.code+`"`) {
				t.Errorf("body = %s, want code %s", body, tt.code)
			}
			if got := resp.Header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow = %q, want %q", got, tt.allow)
			}
		})
	}
}

func TestOwns(t *testing.T) {
	a, _ := testAPI(t, Options{Prefix: "/_/api"})
	for path, want := range map[string]bool{
		"/_/api": true, "/_/api/": true, "/_/api/health": true, "/.well-known/runtime": true,
		"/.well-known/runtime/": true, "/api/health": false, "/_/apix": false, "/_": false,
		"/.well-known/other": false, "/app/": false,
	} {
		if got := a.Owns(path); got != want {
			t.Errorf("Owns(%q) = %v, want %v", path, got, want)
		}
	}
	// The wire contract names the discovery path; it lies under the segment the runtime keeps
	// for it, which no worker or plugin can take.
	if !strings.HasPrefix(api.DiscoveryPath, "/"+mount.WellKnownSegment+"/") {
		t.Errorf("the discovery path %s is not under /%s/", api.DiscoveryPath, mount.WellKnownSegment)
	}
}

func TestDiscoveryReportsWorkers(t *testing.T) {
	a, v := testAPI(t, Options{WorkersURL: "https://apps.example.com"})
	resp := serve(t, a, v, httptest.NewRequest("GET", "/.well-known/runtime", nil))
	if body := bodyOf(t, resp); body != `{"api":"/api","version":"v1.2.3","workers":"https://apps.example.com"}`+"\n" {
		t.Fatalf("discovery = %s", body)
	}
}

// TestBelowAMount checks the URLs the API builds when a handler in front stripped a mount
// path: discovery names the API below it and the OpenAPI document names it as its server.
func TestBelowAMount(t *testing.T) {
	a, v := testAPI(t, Options{Prefix: "/_/api", WorkersURL: "https://apps.example.com/hp"})
	at := func(mountPath, target string) *http.Request {
		r := httptest.NewRequest("GET", target, nil)
		return r.WithContext(mount.With(r.Context(), mountPath))
	}
	resp := serve(t, a, v, at("/hp", "/.well-known/runtime"))
	if body := bodyOf(t, resp); body != `{"api":"/hp/_/api","version":"v1.2.3","workers":"https://apps.example.com/hp"}`+"\n" {
		t.Errorf("discovery = %s", body)
	}
	for _, mountPath := range []string{"/hp", "/x", "/hp", ""} {
		var doc struct{ Servers []struct{ URL string } }
		resp := serve(t, a, v, at(mountPath, "/_/api/openapi.json"))
		if err := json.Unmarshal([]byte(bodyOf(t, resp)), &doc); err != nil {
			t.Fatal(err)
		}
		want := mountPath
		if want == "" {
			want = "/"
		}
		if len(doc.Servers) != 1 || doc.Servers[0].URL != want {
			t.Errorf("at %q, servers = %v, want %s", mountPath, doc.Servers, want)
		}
		page := bodyOf(t, serve(t, a, v, at(mountPath, "/_/api/docs")))
		if !strings.Contains(page, `data-spec="`+mountPath+`/_/api/openapi.json"`) {
			t.Errorf("at %q, the docs page loads another document: %s", mountPath, page)
		}
	}
}

func TestReadiness(t *testing.T) {
	notReady := errors.New("the runtime is starting")
	a, v := testAPI(t, Options{Ready: func() error { return notReady }})
	resp := serve(t, a, v, httptest.NewRequest("GET", "/api/health/ready", nil))
	body := bodyOf(t, resp)
	if resp.StatusCode != 503 || !strings.Contains(body, `"code":"NOT_READY"`) || !strings.Contains(body, "starting") {
		t.Fatalf("ready while starting = %d %s, want 503 NOT_READY", resp.StatusCode, body)
	}
	for _, p := range []string{"/api/health", "/api/health/live"} {
		if resp := serve(t, a, v, httptest.NewRequest("GET", p, nil)); resp.StatusCode != 200 {
			t.Errorf("%s while starting = %d, want 200", p, resp.StatusCode)
		}
	}
}

func TestRequestID(t *testing.T) {
	a, v := testAPI(t, Options{})
	tests := []struct {
		name, sent string
		echoed     bool
	}{
		{"echoes a well-formed id", "abc-123_X.y:z", true},
		{"generates when absent", "", false},
		{"replaces one with spaces", "has space", false},
		{"replaces one with control characters", "a\x01b", false},
		{"replaces an overlong one", strings.Repeat("a", 129), false},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, p := range []string{"/api/health", "/api/missing"} {
				req := httptest.NewRequest("GET", p, nil)
				if tt.sent != "" {
					req.Header.Set(trace.RequestIDHeader, tt.sent)
				}
				got := serve(t, a, v, req).Header.Get(trace.RequestIDHeader)
				switch {
				case tt.echoed && got != tt.sent:
					t.Errorf("%s: X-Request-Id = %q, want %q echoed", p, got, tt.sent)
				case !tt.echoed && (got == tt.sent || !trace.ValidRequestID(got) || seen[got]):
					t.Errorf("%s: X-Request-Id = %q, want a fresh well-formed id", p, got)
				}
				seen[got] = true
			}
		})
	}
}

func TestPanicIsLoggedAndAnswered(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	h := trace.WithRequestID(withRecover(zap.New(core), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("boom")
	})))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/api/x", nil)
	req.Header.Set(trace.RequestIDHeader, "req-1")
	h.ServeHTTP(rec, req)
	if rec.Code != 500 {
		t.Fatalf("status = %d, want 500", rec.Code)
	}
	if err := openapitest.CheckEnvelope(rec.Header(), rec.Body.Bytes()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rec.Body.String(), "req-1") || rec.Header().Get(trace.RequestIDHeader) != "req-1" {
		t.Errorf("500 = %s (X-Request-Id %q), want the request id in both", rec.Body, rec.Header().Get(trace.RequestIDHeader))
	}
	panics := logs.FilterMessage("panic serving API request").All()
	if len(panics) != 1 || !strings.Contains(panics[0].ContextMap()["stack"].(string), "handlers.TestPanicIsLoggedAndAnswered") {
		t.Fatalf("panic log lines = %+v, want one with the stack", panics)
	}
}

func TestAbortPanicPropagates(t *testing.T) {
	h := withRecover(zap.NewNop(), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler)
	}))
	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Fatalf("recovered %v, want http.ErrAbortHandler re-panicked", v)
		}
	}()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
}

// TestAccessLogFields checks what the API puts on the host's access log line of a request:
// its id, and who it runs as once authenticated; never the key itself. The runtime writes
// no access log of its own.
func TestAccessLogFields(t *testing.T) {
	const root = "a-root-key-for-this-test"
	core, logs := observer.New(zapcore.DebugLevel)
	a, v := testAPI(t, Options{RootKey: root, Logger: zap.New(core)})
	tests := []struct {
		name, path, key string
		want            map[string]any
	}{
		{"public route", "/api/health", "", map[string]any{"request_id": "log-me"}},
		{"root key", "/api/admin/session", root,
			map[string]any{"request_id": "log-me", "key_id": int64(0), "key_prefix": "root"}},
		{"unknown key", "/api/admin/session", "not-a-key", map[string]any{"request_id": "log-me"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]any{}
			req := httptest.NewRequest("GET", tt.path, nil)
			req = req.WithContext(trace.WithLogFields(req.Context(), func(f zap.Field) {
				enc := zapcore.NewMapObjectEncoder()
				f.AddTo(enc)
				got[f.Key] = enc.Fields[f.Key]
			}))
			req.Header.Set(trace.RequestIDHeader, "log-me")
			if tt.key != "" {
				req.Header.Set(APIKeyHeader, tt.key)
			}
			serve(t, a, v, req)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("access log fields = %v, want %v", got, tt.want)
			}
		})
	}
	if n := logs.Len(); n != 0 {
		t.Errorf("the API logged %d lines of its own, want none: %v", n, logs.All())
	}
}

// TestRequestIDFromHost checks that a request without a usable id gets the host's (Caddy's
// {http.request.uuid}), and that a well-formed incoming one wins over it.
func TestRequestIDFromHost(t *testing.T) {
	for _, tt := range []struct{ sent, want string }{
		{"", "host-id"},
		{"bad id <x>", "host-id"},
		{"client-id", "client-id"},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		if tt.sent != "" {
			req.Header.Set(trace.RequestIDHeader, tt.sent)
		}
		r := trace.EnsureRequestID(rec, req, func() string { return "host-id" })
		if trace.RequestID(r.Context()) != tt.want || rec.Header().Get(trace.RequestIDHeader) != tt.want || r.Header.Get(trace.RequestIDHeader) != tt.want {
			t.Errorf("sent %q: id %q, response %q, request header %q, want %q", tt.sent,
				trace.RequestID(r.Context()), rec.Header().Get(trace.RequestIDHeader), r.Header.Get(trace.RequestIDHeader), tt.want)
		}
	}
}

func TestOpenAPIDocument(t *testing.T) {
	for _, prefix := range []string{"/api", "/_/api", "/a/b/api"} {
		t.Run(prefix, func(t *testing.T) {
			a, v := testAPI(t, Options{Prefix: prefix})
			doc := v.Document()
			if doc.OpenAPI != "3.1.0" || doc.Info.Version != "v1.2.3" {
				t.Fatalf("openapi %q version %q", doc.OpenAPI, doc.Info.Version)
			}
			for _, rt := range a.routes() {
				p := wildcard.ReplaceAllString(a.fullPath(rt.path), "{$1}")
				item := doc.Paths.Find(p)
				if item == nil || item.GetOperation(rt.method) == nil {
					t.Errorf("route %s %s is not documented at %s", rt.method, rt.path, p)
					continue
				}
				op := item.GetOperation(rt.method)
				if op.Responses.Status(500) == nil {
					t.Errorf("%s %s does not document 500", rt.method, p)
				}
			}
			if doc.Components.Schemas["Envelope"] == nil {
				t.Error("the error envelope is not a component schema")
			}
			resp := serve(t, a, v, httptest.NewRequest("GET", prefix+"/openapi.json", nil))
			var served map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&served); err != nil || served["openapi"] != "3.1.0" {
				t.Fatalf("served document: %v %v", err, served["openapi"])
			}
		})
	}
}

func TestDocsUI(t *testing.T) {
	a, v := testAPI(t, Options{Prefix: "/_/api"})
	resp := serve(t, a, v, httptest.NewRequest("GET", "/_/api/docs", nil))
	page := bodyOf(t, resp)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("docs page = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("docs CSP = %q", csp)
	}
	if !strings.Contains(page, `/_/api/openapi.json`) {
		t.Errorf("docs page does not reference the document")
	}
	for ext, ctype := range map[string]string{".js": "text/javascript", ".css": "text/css"} {
		// The page names each asset under the API path, by a name that carries its hash.
		m := regexp.MustCompile(`"/_/api/docs/(docs-[A-Za-z0-9_-]+\` + ext + `)"`).FindStringSubmatch(page)
		if m == nil {
			t.Errorf("docs page references no hashed %s asset:\n%s", ext, page)
			continue
		}
		name := m[1]
		resp := serve(t, a, v, httptest.NewRequest("GET", "/_/api/docs/"+name, nil))
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) ||
			resp.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
			t.Errorf("%s = %d %s", name, resp.StatusCode, resp.Header)
		}
		req := httptest.NewRequest("GET", "/_/api/docs/"+name, nil)
		req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
		if resp := serve(t, a, v, req); resp.StatusCode != http.StatusNotModified {
			t.Errorf("%s revalidation = %d, want 304", name, resp.StatusCode)
		}
	}
}

// TestAnswerHeaders checks the headers that guard API answers: every answer carries its
// request id; all but the health probes (a fixed public body) also forbid sniffing and caching.
func TestAnswerHeaders(t *testing.T) {
	a, v := testAPI(t, Options{Prefix: "/_/api", Ready: func() error { return nil }})
	for _, tt := range []struct {
		path    string
		status  int
		guarded bool
	}{
		{"/_/api/health", 200, false},
		{"/_/api/health/ready", 200, false},
		{"/_/api/health/live", 200, false},
		{"/_/api/health/", 200, false}, // the probe under its other name
		{"/.well-known/runtime", 200, true},
		{"/_/api/workers", 401, true},
		{"/_/api/nope", 404, true},
	} {
		t.Run(tt.path, func(t *testing.T) {
			resp := serve(t, a, v, httptest.NewRequest("GET", tt.path, nil))
			h := resp.Header
			if resp.StatusCode != tt.status || h.Get("X-Request-Id") == "" {
				t.Fatalf("GET %s = %d with request id %q, want %d and an id", tt.path, resp.StatusCode, h.Get("X-Request-Id"), tt.status)
			}
			guarded := h.Get("X-Content-Type-Options") == "nosniff" && h.Get("Cache-Control") == "no-store"
			if guarded != tt.guarded {
				t.Errorf("GET %s: nosniff and no-store = %v, want %v (headers %v)", tt.path, guarded, tt.guarded, h)
			}
		})
	}
}
