package integration

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "github.com/tursodatabase/libsql-client-go/libsql"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/keystore"
)

// rootKey holds every character that needs escaping in a cookie; rootKeyCookie is its
// percent-encoded cookie value.
const (
	rootKey       = "root;key+with/odd=chars%and-more-0123456789"
	rootKeyCookie = "root%3Bkey%2Bwith%2Fodd%3Dchars%25and-more-0123456789"
)

func startWithRoot(t *testing.T) *harness.Server {
	t.Helper()
	return harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
}

func sessionOf(t *testing.T, s *harness.Server, opts ...harness.Option) (int, api.Principal) {
	t.Helper()
	resp := s.Get(s.API+"/admin/session", opts...)
	var body api.Session
	if resp.Status == 200 {
		if err := resp.JSON(&body); err != nil || !body.Authenticated {
			t.Fatalf("session body %s", resp)
		}
	}
	return resp.Status, body.Principal
}

// cookieFrom returns the runtime_api_key value of a login response.
func cookieFrom(t *testing.T, resp *harness.Response) string {
	t.Helper()
	for _, c := range (&http.Response{Header: resp.Header}).Cookies() {
		if c.Name == "runtime_api_key" {
			return c.Value
		}
	}
	t.Fatalf("no runtime_api_key cookie in %v", resp.Header.Values("Set-Cookie"))
	return ""
}

func login(t *testing.T, s *harness.Server, key string, opts ...harness.Option) *harness.Response {
	t.Helper()
	return s.Do("POST", s.API+"/admin/session", append([]harness.Option{harness.WithOrigin(""), harness.WithJSON(map[string]string{"key": key})}, opts...)...)
}

// TestCredentialChannels checks each channel, the order between them, and the root principal.
func TestCredentialChannels(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	viewer := s.CreateKey(rootKey, map[string]any{"name": "viewer", "role": "viewer"})
	editor := s.CreateKey(rootKey, map[string]any{"name": "editor"})
	cookie := func(k string) harness.Option { return harness.WithCookie("runtime_api_key", k) }

	tests := []struct {
		name   string
		opts   []harness.Option
		status int
		who    string
	}{
		{"no credential", nil, 401, ""},
		{"X-API-Key", []harness.Option{harness.WithKey(viewer.Secret)}, 200, "viewer"},
		{"Bearer", []harness.Option{harness.WithBearer(viewer.Secret)}, 200, "viewer"},
		{"bearer, any case", []harness.Option{harness.WithHeader("Authorization", "bearer "+viewer.Secret)}, 200, "viewer"},
		{"cookie", []harness.Option{cookie(viewer.Secret)}, 200, "viewer"},
		{"root key in X-API-Key", []harness.Option{harness.WithKey(rootKey)}, 200, "root"},
		{"root key as Bearer", []harness.Option{harness.WithBearer(rootKey)}, 200, "root"},
		{"X-API-Key beats Bearer", []harness.Option{harness.WithKey(editor.Secret), harness.WithBearer(viewer.Secret)}, 200, "editor"},
		{"header beats cookie", []harness.Option{harness.WithKey(editor.Secret), cookie(viewer.Secret)}, 200, "editor"},
		{"invalid header beats valid cookie", []harness.Option{harness.WithKey("rtk_bogus"), cookie(viewer.Secret)}, 401, ""},
		{"empty header beats valid cookie", []harness.Option{harness.WithKey(""), cookie(viewer.Secret)}, 401, ""},
		{"invalid Bearer beats valid cookie", []harness.Option{harness.WithBearer("nope"), cookie(viewer.Secret)}, 401, ""},
		{"Basic auth is not a runtime credential", []harness.Option{harness.WithHeader("Authorization", "Basic dXNlcjpwYXNz"), cookie(viewer.Secret)}, 200, "viewer"},
		{"unknown key", []harness.Option{harness.WithKey("rtk_" + strings.Repeat("x", 43))}, 401, ""},
		{"near-miss of the root key", []harness.Option{harness.WithKey(rootKey + "x")}, 401, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, p := sessionOf(t, s, tt.opts...)
			if status != tt.status || p.Name != tt.who {
				t.Fatalf("session = %d as %q, want %d as %q", status, p.Name, tt.status, tt.who)
			}
		})
	}

	resp := s.Get(s.API + "/admin/session")
	if resp.ErrorCode() != "AUTH_REQUIRED" || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("401 = %s, WWW-Authenticate %q", resp, resp.Header.Get("WWW-Authenticate"))
	}
	_, root := sessionOf(t, s, harness.WithKey(rootKey))
	if !root.IsRoot || root.ID != 0 || root.KeyPrefix != "root" || root.Role != "admin" ||
		len(root.Permissions) != len(keystore.AllPermissions) || strings.Join(root.Namespaces, ",") != "*" {
		t.Errorf("root principal = %+v", root)
	}
	_, v := sessionOf(t, s, harness.WithKey(viewer.Secret))
	if v.IsRoot || v.ID != viewer.ID || v.KeyPrefix != viewer.Secret[:12] || v.Role != "viewer" ||
		strings.Join(v.Permissions, ",") != "workers:read,plugins:read,keys:read" {
		t.Errorf("viewer principal = %+v", v)
	}
}

// TestSessionCookie checks login, the cookie's attributes and round trip, and logout.
func TestSessionCookie(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_CPANEL_SESSION_TTL": "2h"}})

	resp := login(t, s, rootKey)
	if resp.Status != 200 {
		t.Fatalf("login with the root key = %s", resp)
	}
	var body api.Session
	if err := resp.JSON(&body); err != nil || !body.Authenticated || !body.Principal.IsRoot {
		t.Fatalf("login body = %s", resp)
	}
	// The cookie holds an opaque token, never the key.
	// Over plain HTTP there is no __Host- twin: the runtime_api_key cookie is all.
	if lines := resp.Header.Values("Set-Cookie"); len(lines) != 1 {
		t.Fatalf("Set-Cookie lines of a sign-in over HTTP = %q, want one", lines)
	}
	set := resp.Header.Get("Set-Cookie")
	if !regexp.MustCompile(`^runtime_api_key=rts_[A-Za-z0-9_-]{43}; Max-Age=7200; Path=/; HttpOnly; SameSite=Strict$`).MatchString(set) {
		t.Fatalf("Set-Cookie = %q, want a session token with Max-Age=7200; Path=/; HttpOnly; SameSite=Strict", set)
	}
	// The browser sends the value back as it got it.
	if status, p := sessionOf(t, s, harness.WithHeader("Cookie", "runtime_api_key="+cookieFrom(t, resp))); status != 200 || !p.IsRoot {
		t.Fatalf("session from the root cookie = %d %+v", status, p)
	}
	// A cookie holding a key itself, percent-encoded as older clients write it, still works.
	if status, p := sessionOf(t, s, harness.WithHeader("Cookie", "runtime_api_key="+rootKeyCookie)); status != 200 || !p.IsRoot {
		t.Fatalf("session from a key-valued root cookie = %d %+v", status, p)
	}
	// A value that does not percent-decode is used as sent.
	raw := s.CreateKey(rootKey, map[string]any{"name": "raw"})
	if status, p := sessionOf(t, s, harness.WithHeader("Cookie", "other=1; runtime_api_key="+raw.Secret)); status != 200 || p.Name != "raw" {
		t.Fatalf("session from a raw cookie = %d %+v", status, p)
	}

	// Login with a generated key, use the cookie, log out.
	k := s.CreateKey(rootKey, map[string]any{"name": "browser", "role": "viewer"})
	resp = login(t, s, k.Secret)
	token := cookieFrom(t, resp)
	if resp.Status != 200 || !strings.HasPrefix(token, "rts_") || strings.Contains(string(resp.Body), k.Secret) {
		t.Fatalf("login with a key = %s, cookie %q", resp, token)
	}
	if status, p := sessionOf(t, s, harness.WithCookie("runtime_api_key", token)); status != 200 || p.Name != "browser" {
		t.Fatalf("session from the cookie = %d %+v", status, p)
	}
	for range 2 { // idempotent
		out := s.Do("DELETE", s.API+"/admin/session", harness.WithOrigin(""), harness.WithCookie("runtime_api_key", token))
		if out.Status != 204 || len(out.Body) != 0 {
			t.Fatalf("logout = %s", out)
		}
		if got := out.Header.Get("Set-Cookie"); got != "runtime_api_key=; Max-Age=0; Path=/; SameSite=Strict" {
			t.Fatalf("logout Set-Cookie = %q", got)
		}
	}
	// Logout ended the session on the server: a copy of the old cookie is worthless.
	if status, _ := sessionOf(t, s, harness.WithCookie("runtime_api_key", token)); status != 401 {
		t.Fatalf("the cookie still works after logout (%d)", status)
	}
}

// TestForwardedProto checks that X-Forwarded-Proto makes the session cookie an HTTPS one
// (Secure, with its __Host- twin) only when Caddy trusts the client as a proxy
// (trusted_proxies): over plain HTTP, anyone else who claims https gets the plain cookie.
func TestForwardedProto(t *testing.T) {
	t.Parallel()
	env := map[string]string{"RUNTIME_ROOT_KEY": rootKey}
	g := harness.StartAll(t,
		harness.Config{Name: "untrusted", Env: env},
		harness.Config{Name: "trusted", Env: env, Global: "\tservers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}"})
	untrusted, trusted := g[0], g[1]
	const plain = `^runtime_api_key=rts_[A-Za-z0-9_-]{43}; Max-Age=\d+; Path=/; HttpOnly; SameSite=Strict$`
	for _, tt := range []struct {
		proto string
		https bool // from a trusted proxy
	}{{"https", true}, {"https, http", true}, {"HTTPS", true}, {"http, https", false}, {"http", false}} {
		lines := login(t, untrusted, rootKey, harness.WithHeader("X-Forwarded-Proto", tt.proto)).Header.Values("Set-Cookie")
		if len(lines) != 1 || !regexp.MustCompile(plain).MatchString(lines[0]) {
			t.Errorf("untrusted client, X-Forwarded-Proto %q: Set-Cookie %q, want the plain-HTTP cookie alone", tt.proto, lines)
		}
		lines = login(t, trusted, rootKey, harness.WithHeader("X-Forwarded-Proto", tt.proto)).Header.Values("Set-Cookie")
		secure := len(lines) == 2 && strings.Contains(lines[0], "; Secure") && strings.HasPrefix(lines[1], "__Host-runtime_api_key=rts_") &&
			strings.Contains(lines[1], "; Secure")
		if tt.https && !secure || !tt.https && (len(lines) != 1 || !regexp.MustCompile(plain).MatchString(lines[0])) {
			t.Errorf("trusted proxy, X-Forwarded-Proto %q: Set-Cookie %q, want the HTTPS cookies %v", tt.proto, lines, tt.https)
		}
	}
	for _, tt := range []struct {
		s      *harness.Server
		secure bool
	}{{untrusted, false}, {trusted, true}} {
		got := tt.s.Do("DELETE", tt.s.API+"/admin/session", harness.WithOrigin(""), harness.WithHeader("X-Forwarded-Proto", "https")).Header.Get("Set-Cookie")
		if strings.Contains(got, "; Secure") != tt.secure {
			t.Errorf("%s: logout with X-Forwarded-Proto https: Set-Cookie %q, want Secure %v", tt.s.Name(), got, tt.secure)
		}
	}
}

// TestLoginErrors checks every status of POST admin/session.
func TestLoginErrors(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	k := s.CreateKey(rootKey, map[string]any{"name": "gone"})
	s.Do("DELETE", fmt.Sprintf("%s/keys/%d", s.API, k.ID), harness.WithKey(rootKey))
	tests := []struct {
		name   string
		body   harness.Option
		status int
		code   string
	}{
		{"no body", harness.WithBody("application/json", nil), 400, "BAD_REQUEST"},
		{"malformed", harness.WithBody("application/json", []byte(`{"key":`)), 400, "BAD_REQUEST"},
		{"not an object", harness.WithBody("application/json", []byte(`"rtk_x"`)), 400, "BAD_REQUEST"},
		{"no key", harness.WithJSON(map[string]any{}), 400, "BAD_REQUEST"},
		{"key not a string", harness.WithJSON(map[string]any{"key": 42}), 400, "BAD_REQUEST"},
		{"empty key", harness.WithJSON(map[string]any{"key": "  "}), 400, "BAD_REQUEST"},
		{"unknown field", harness.WithJSON(map[string]any{"key": rootKey, "remember": true}), 400, "BAD_REQUEST"},
		{"trailing data", harness.WithBody("application/json", []byte(`{"key":"a"} {}`)), 400, "BAD_REQUEST"},
		{"too large", harness.WithJSON(map[string]any{"key": strings.Repeat("k", 70<<10)}), 413, "PAYLOAD_TOO_LARGE"},
		{"unknown key", harness.WithJSON(map[string]any{"key": "rtk_" + strings.Repeat("A", 43)}), 401, "INVALID_KEY"},
		{"revoked key", harness.WithJSON(map[string]any{"key": k.Secret}), 401, "INVALID_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := s.Do("POST", s.API+"/admin/session", harness.WithOrigin(""), tt.body)
			if resp.Status != tt.status || resp.ErrorCode() != tt.code {
				t.Fatalf("login = %s, want %d %s", resp, tt.status, tt.code)
			}
			if resp.Header.Get("Set-Cookie") != "" {
				t.Fatal("a failed login set a cookie")
			}
		})
	}
}

// TestCSRF checks the Origin rule on mutating API requests and its two exemptions.
func TestCSRF(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	admin := s.CreateKey(rootKey, map[string]any{"name": "admin", "role": "admin"})
	self := "http://" + strings.TrimPrefix(s.URL, "http://")
	cookie := harness.WithCookie("runtime_api_key", admin.Secret)
	newKey := harness.WithJSON(map[string]any{"name": "csrf"})
	tests := []struct {
		name string
		opts []harness.Option
		ok   bool
	}{
		{"API key without Origin", []harness.Option{harness.WithKey(admin.Secret)}, false},
		{"API key with own Origin", []harness.Option{harness.WithKey(admin.Secret), harness.WithOrigin(self)}, true},
		{"Origin with a trailing slash", []harness.Option{harness.WithKey(admin.Secret), harness.WithOrigin(self + "/")}, true},
		{"foreign Origin", []harness.Option{harness.WithKey(admin.Secret), harness.WithOrigin("http://evil.example")}, false},
		{"same host, other port", []harness.Option{harness.WithKey(admin.Secret), harness.WithOrigin("http://127.0.0.1:1")}, false},
		{"Origin null", []harness.Option{harness.WithKey(admin.Secret), harness.WithOrigin("null")}, false},
		{"Origin with userinfo", []harness.Option{harness.WithKey(admin.Secret), harness.WithOrigin("http://user@" + strings.TrimPrefix(s.URL, "http://"))}, false},
		{"Origin with a path", []harness.Option{harness.WithKey(admin.Secret), harness.WithOrigin(self + "/api")}, false},
		{"not http(s)", []harness.Option{harness.WithKey(admin.Secret), harness.WithOrigin("ftp://" + strings.TrimPrefix(s.URL, "http://"))}, false},
		{"cookie session without Origin", []harness.Option{cookie}, false},
		{"cookie session with foreign Origin", []harness.Option{cookie, harness.WithOrigin("http://evil.example")}, false},
		{"cookie session with own Origin", []harness.Option{cookie, harness.WithOrigin(self)}, true},
		{"internal header", []harness.Option{harness.WithKey(admin.Secret), harness.WithHeader("X-Runtime-Internal", "true")}, true},
		{"internal header with another value", []harness.Option{harness.WithKey(admin.Secret), harness.WithHeader("X-Runtime-Internal", "1")}, false},
		{"root key in X-API-Key", []harness.Option{harness.WithKey(rootKey)}, true},
		{"root key as Bearer", []harness.Option{harness.WithBearer(rootKey)}, true},
		{"root key in a cookie", []harness.Option{harness.WithHeader("Cookie", "runtime_api_key="+rootKeyCookie)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := s.Do("POST", s.API+"/keys", append(tt.opts, newKey)...)
			if tt.ok && resp.Status != 200 || !tt.ok && (resp.Status != 403 || resp.ErrorCode() != "CSRF_REJECTED") {
				t.Fatalf("POST keys = %s, want %v", resp, map[bool]string{true: "accepted", false: "403 CSRF_REJECTED"}[tt.ok])
			}
		})
	}
	// Login and logout are mutating too; a root key in the login body is no exemption.
	if resp := s.Do("POST", s.API+"/admin/session", harness.WithJSON(map[string]string{"key": rootKey})); resp.ErrorCode() != "CSRF_REJECTED" {
		t.Errorf("login without Origin = %s", resp)
	}
	if resp := s.Do("DELETE", s.API+"/admin/session"); resp.ErrorCode() != "CSRF_REJECTED" {
		t.Errorf("logout without Origin = %s", resp)
	}
	if resp := s.Do("DELETE", fmt.Sprintf("%s/keys/%d", s.API, admin.ID), cookie); resp.ErrorCode() != "CSRF_REJECTED" {
		t.Errorf("revoke by cookie without Origin = %s", resp)
	}
	// GET needs no Origin.
	if resp := s.Get(s.API+"/keys", cookie); resp.Status != 200 {
		t.Errorf("GET keys by cookie = %s", resp)
	}
}

// TestRoles checks each role's allowed and refused calls on the key routes.
func TestRoles(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	keys := map[string]harness.Key{}
	for _, role := range []string{"admin", "editor", "viewer"} {
		keys[role] = s.CreateKey(rootKey, map[string]any{"name": role, "role": role})
	}
	keys["creator"] = s.CreateKey(rootKey, map[string]any{"name": "creator", "role": "custom", "permissions": []string{"keys:create", "keys:read", "workers:read"}})
	keys["revoker"] = s.CreateKey(rootKey, map[string]any{"name": "revoker", "role": "custom", "permissions": []string{"keys:revoke"}})

	type call struct {
		method, path string
		body         map[string]any
	}
	// A target the revoker may revoke: it holds no permission the revoker lacks.
	target := func() string {
		return fmt.Sprintf("%s/keys/%d", s.API, s.CreateKey(rootKey, map[string]any{"name": "target", "role": "custom", "permissions": []string{"keys:revoke"}}).ID)
	}
	calls := map[string]func() call{
		"list":    func() call { return call{"GET", s.API + "/keys", nil} },
		"meta":    func() call { return call{"GET", s.API + "/keys/meta", nil} },
		"session": func() call { return call{"GET", s.API + "/admin/session", nil} },
		"create": func() call {
			return call{"POST", s.API + "/keys", map[string]any{"name": "n", "role": "custom", "permissions": []string{"workers:read"}}}
		},
		"revoke": func() call { return call{"DELETE", target(), nil} },
	}
	allowed := map[string][]string{
		"admin":   {"list", "meta", "session", "create", "revoke"},
		"editor":  {"session"},
		"viewer":  {"list", "meta", "session"},
		"creator": {"list", "meta", "session", "create"},
		"revoker": {"session", "revoke"},
	}
	for who, may := range allowed {
		for name, mk := range calls {
			c := mk()
			t.Run(who+" "+name, func(t *testing.T) {
				opts := []harness.Option{harness.WithKey(keys[who].Secret), harness.WithOrigin("")}
				if c.body != nil {
					opts = append(opts, harness.WithJSON(c.body))
				}
				resp := s.Do(c.method, c.path, opts...)
				ok := strings.Contains(strings.Join(may, " "), name)
				if ok && resp.Status != 200 || !ok && (resp.Status != 403 || resp.ErrorCode() != "PERMISSION_DENIED") {
					t.Fatalf("%s %s as %s = %s; allowed %v", c.method, c.path, who, resp, ok)
				}
				if !ok && !strings.Contains(string(resp.Body), "keys:") {
					t.Errorf("403 does not name the permission: %s", resp)
				}
			})
		}
	}
}

// TestKeyLifecycle covers listing, meta, creation rules and revocation.
func TestKeyLifecycle(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	var meta struct {
		Roles, Permissions, ExpiresIn []string
		RolePermissions               map[string][]string
	}
	if err := s.Get(s.API+"/keys/meta", harness.WithKey(rootKey)).JSON(&meta); err != nil {
		t.Fatal(err)
	}
	if strings.Join(meta.Roles, ",") != "admin,editor,viewer,custom" || len(meta.Permissions) != 12 ||
		strings.Join(meta.ExpiresIn, ",") != "never,30d,90d,1y" || len(meta.RolePermissions["admin"]) != 12 || len(meta.RolePermissions["custom"]) != 0 {
		t.Errorf("meta = %+v", meta)
	}

	k := s.CreateKey(rootKey, map[string]any{"name": "deploy", "description": "CI", "expiresIn": "90d", "namespaces": []string{"@team"}})
	if k.Role != "editor" || len(k.Secret) != 47 || !strings.HasPrefix(k.Secret, "rtk_") || k.KeyPrefix != k.Secret[:12] {
		t.Fatalf("created = %+v", k)
	}
	var list api.KeyList
	if err := s.Get(s.API+"/keys", harness.WithKey(rootKey)).JSON(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Keys) != 1 {
		t.Fatalf("keys = %+v", list.Keys)
	}
	got := list.Keys[0]
	now := time.Now().Unix()
	if got.ID != k.ID || got.Name != "deploy" || got.Description != "CI" || got.KeyPrefix != k.KeyPrefix ||
		got.CreatedAt < now-60 || got.CreatedAt > now+1 || got.ExpiresAt-got.CreatedAt != 90*86400 ||
		strings.Join(got.Namespaces, ",") != "@team" || got.LastUsedAt != 0 {
		t.Errorf("listed = %+v", got)
	}
	if strings.Contains(string(s.Get(s.API+"/keys", harness.WithKey(rootKey)).Body), k.Secret) {
		t.Fatal("the listing contains a secret")
	}

	// lastUsedAt appears after use, written in the background.
	sessionOf(t, s, harness.WithKey(k.Secret))
	harness.Eventually(t, "lastUsedAt to be recorded", 5*time.Second, func() bool {
		s.Get(s.API+"/keys", harness.WithKey(rootKey)).JSON(&list)
		return list.Keys[0].LastUsedAt >= got.CreatedAt
	})

	// Validation errors.
	for _, tt := range []struct {
		body map[string]any
		code string
	}{
		{map[string]any{}, "MISSING_KEY_NAME"},
		{map[string]any{"name": " "}, "MISSING_KEY_NAME"},
		{map[string]any{"name": "n", "role": "owner"}, "INVALID_KEY_ROLE"},
		{map[string]any{"name": "n", "role": "custom"}, "MISSING_PERMISSIONS"},
		{map[string]any{"name": "n", "role": "custom", "permissions": []string{}}, "MISSING_PERMISSIONS"},
		{map[string]any{"name": "n", "role": "custom", "permissions": []string{"apps:read"}}, "INVALID_PERMISSION"},
		{map[string]any{"name": "n", "role": "viewer", "permissions": []string{"keys:create"}}, "INVALID_PERMISSION"},
		{map[string]any{"name": "n", "namespaces": []string{}}, "INVALID_NAMESPACE"},
		{map[string]any{"name": "n", "namespaces": []string{"team"}}, "INVALID_NAMESPACE"},
		{map[string]any{"name": "n", "namespaces": []string{"*", "@a"}}, "INVALID_NAMESPACE"},
		{map[string]any{"name": "n", "expiresIn": "forever"}, "INVALID_EXPIRATION"},
		{map[string]any{"name": "n", "expiresIn": "12h"}, "INVALID_EXPIRATION"},
		{map[string]any{"name": "n", "expires": "30d"}, "BAD_REQUEST"},
		{map[string]any{"name": 7}, "BAD_REQUEST"},
		{map[string]any{"name": "n", "namespaces": "@a"}, "BAD_REQUEST"},
	} {
		resp := s.Do("POST", s.API+"/keys", harness.WithKey(rootKey), harness.WithJSON(tt.body))
		if resp.Status != 400 || resp.ErrorCode() != tt.code {
			t.Errorf("POST keys %v = %s, want 400 %s", tt.body, resp, tt.code)
		}
	}
	if resp := s.Do("POST", s.API+"/keys", harness.WithKey(rootKey), harness.WithJSON(map[string]any{"name": strings.Repeat("n", 70<<10)})); resp.Status != 413 {
		t.Errorf("huge body = %s", resp)
	}
	for _, expiresIn := range []string{"never", "30d", "90d", "1y", "7d", "2w", "6m"} {
		s.CreateKey(rootKey, map[string]any{"name": "exp-" + expiresIn, "expiresIn": expiresIn})
	}

	// Revocation takes effect on the very next request.
	admin := s.CreateKey(rootKey, map[string]any{"name": "admin", "role": "admin"})
	victim := s.CreateKey(rootKey, map[string]any{"name": "victim", "role": "viewer"})
	if status, _ := sessionOf(t, s, harness.WithKey(victim.Secret)); status != 200 {
		t.Fatal("victim key does not work")
	}
	if resp := s.Do("DELETE", fmt.Sprintf("%s/keys/%d", s.API, victim.ID), harness.WithKey(admin.Secret), harness.WithOrigin("")); resp.Status != 200 || strings.TrimSpace(string(resp.Body)) != `{"success":true}` {
		t.Fatalf("revoke = %s", resp)
	}
	if status, _ := sessionOf(t, s, harness.WithKey(victim.Secret)); status != 401 {
		t.Fatalf("revoked key still works (%d)", status)
	}
	if resp := login(t, s, victim.Secret); resp.Status != 401 {
		t.Fatalf("revoked key logs in: %s", resp)
	}
	s.Get(s.API+"/keys", harness.WithKey(rootKey)).JSON(&list)
	for _, key := range list.Keys {
		if key.ID == victim.ID {
			t.Fatal("revoked key is listed")
		}
	}
	for path, want := range map[string]string{
		fmt.Sprintf("/keys/%d", victim.ID): "404 API_KEY_NOT_FOUND",
		"/keys/999999":                     "404 API_KEY_NOT_FOUND",
		"/keys/abc":                        "400 BAD_REQUEST",
		"/keys/0":                          "400 BAD_REQUEST",
		"/keys/-3":                         "400 BAD_REQUEST",
		// A live key's id spelt another way is refused, not taken for the key.
		fmt.Sprintf("/keys/0%d", admin.ID): "400 BAD_REQUEST",
		fmt.Sprintf("/keys/+%d", admin.ID): "400 BAD_REQUEST",
	} {
		resp := s.Do("DELETE", s.API+path, harness.WithKey(rootKey))
		if got := fmt.Sprintf("%d %s", resp.Status, resp.ErrorCode()); got != want {
			t.Errorf("DELETE %s = %s, want %s", path, resp, want)
		}
	}
	// A key cannot revoke itself.
	resp := s.Do("DELETE", fmt.Sprintf("%s/keys/%d", s.API, admin.ID), harness.WithKey(admin.Secret), harness.WithOrigin(""))
	if resp.Status != 403 || resp.ErrorCode() != "SELF_REVOKE_FORBIDDEN" {
		t.Fatalf("self-revoke = %s", resp)
	}
	if status, _ := sessionOf(t, s, harness.WithKey(admin.Secret)); status != 200 {
		t.Fatal("a refused self-revoke revoked the key")
	}
	// The same through a cookie session.
	resp = s.Do("DELETE", fmt.Sprintf("%s/keys/%d", s.API, admin.ID), harness.WithCookie("runtime_api_key", admin.Secret), harness.WithOrigin(""))
	if resp.ErrorCode() != "SELF_REVOKE_FORBIDDEN" {
		t.Fatalf("self-revoke by cookie = %s", resp)
	}
}

// TestExpiredKeys checks that an expired key is listed with expiresAt and never accepted.
func TestExpiredKeys(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	k := s.CreateKey(rootKey, map[string]any{"name": "old", "expiresIn": "30d"})
	db, err := sql.Open("libsql", "file:"+filepath.Join(s.DataDir, "state", "api-keys.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	past := time.Now().Add(-time.Hour).Unix()
	if _, err := db.ExecContext(context.Background(), `UPDATE api_keys SET expires_at = ? WHERE id = ?`, past, k.ID); err != nil {
		t.Fatal(err)
	}
	if status, _ := sessionOf(t, s, harness.WithKey(k.Secret)); status != 401 {
		t.Fatalf("expired key accepted (%d)", status)
	}
	if resp := login(t, s, k.Secret); resp.Status != 401 || resp.ErrorCode() != "INVALID_KEY" {
		t.Fatalf("expired key logs in: %s", resp)
	}
	var list api.KeyList
	s.Get(s.API+"/keys", harness.WithKey(rootKey)).JSON(&list)
	if len(list.Keys) != 1 || list.Keys[0].ExpiresAt != past {
		t.Fatalf("expired key listing = %+v", list.Keys)
	}
}

// TestPrivilegeEscalation checks that no key can create a key with more rights than its own.
func TestPrivilegeEscalation(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	creator := s.CreateKey(rootKey, map[string]any{"name": "creator", "role": "custom", "permissions": []string{"keys:create", "keys:read", "workers:read"}})
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "admin", "namespaces": []string{"@team", "@ops"}})
	tests := []struct {
		name string
		as   string
		body map[string]any
		ok   bool
	}{
		{"custom creates admin", creator.Secret, map[string]any{"name": "x", "role": "admin"}, false},
		{"custom creates editor", creator.Secret, map[string]any{"name": "x", "role": "editor"}, false},
		{"custom creates viewer (plugins:read lacking)", creator.Secret, map[string]any{"name": "x", "role": "viewer"}, false},
		{"custom creates a wider custom", creator.Secret, map[string]any{"name": "x", "role": "custom", "permissions": []string{"keys:create", "keys:revoke"}}, false},
		{"custom creates a subset", creator.Secret, map[string]any{"name": "x", "role": "custom", "permissions": []string{"workers:read"}}, true},
		{"restricted creates unrestricted", team.Secret, map[string]any{"name": "x", "namespaces": []string{"*"}}, false},
		{"restricted creates another namespace", team.Secret, map[string]any{"name": "x", "namespaces": []string{"@team", "@other"}}, false},
		{"restricted creates within", team.Secret, map[string]any{"name": "x", "namespaces": []string{"@ops"}}, true},
		{"root creates anything", rootKey, map[string]any{"name": "x", "role": "admin"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := s.Do("POST", s.API+"/keys", harness.WithKey(tt.as), harness.WithOrigin(""), harness.WithJSON(tt.body))
			if tt.ok && resp.Status != 200 || !tt.ok && (resp.Status != 403 || resp.ErrorCode() != "PRIVILEGE_ESCALATION") {
				t.Fatalf("create = %s, want ok=%v", resp, tt.ok)
			}
		})
	}
	// Omitted namespaces inherit the restricted creator's.
	inherited := s.CreateKey(team.Secret, map[string]any{"name": "inherits"})
	_, p := sessionOf(t, s, harness.WithKey(inherited.Secret))
	if strings.Join(p.Namespaces, ",") != "@team,@ops" {
		t.Fatalf("inherited namespaces = %v", p.Namespaces)
	}
}

// TestNamespaceRestrictedKeys checks listing and revocation by a namespace-restricted key.
func TestNamespaceRestrictedKeys(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	team := s.CreateKey(rootKey, map[string]any{"name": "team-admin", "role": "admin", "namespaces": []string{"@team", "@ops"}})
	teamKey := s.CreateKey(rootKey, map[string]any{"name": "team-only", "namespaces": []string{"@team"}})
	both := s.CreateKey(rootKey, map[string]any{"name": "team-ops", "namespaces": []string{"@ops", "@team"}})
	other := s.CreateKey(rootKey, map[string]any{"name": "other", "namespaces": []string{"@other"}})
	mixed := s.CreateKey(rootKey, map[string]any{"name": "mixed", "namespaces": []string{"@team", "@other"}})
	global := s.CreateKey(rootKey, map[string]any{"name": "global"})

	var list api.KeyList
	if err := s.Get(s.API+"/keys", harness.WithKey(team.Secret)).JSON(&list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range list.Keys {
		names = append(names, k.Name)
	}
	if got := strings.Join(names, ","); got != "team-admin,team-only,team-ops" {
		t.Fatalf("restricted listing = %s", got)
	}
	s.Get(s.API+"/keys", harness.WithKey(rootKey)).JSON(&list)
	if len(list.Keys) != 6 {
		t.Fatalf("unrestricted listing has %d keys, want 6", len(list.Keys))
	}
	for _, k := range []harness.Key{other, mixed, global} {
		resp := s.Do("DELETE", fmt.Sprintf("%s/keys/%d", s.API, k.ID), harness.WithKey(team.Secret), harness.WithOrigin(""))
		if resp.Status != 403 || resp.ErrorCode() != "NAMESPACE_DENIED" {
			t.Errorf("restricted revoke of %s = %s", k.Name, resp)
		}
	}
	for _, k := range []harness.Key{teamKey, both} {
		if resp := s.Do("DELETE", fmt.Sprintf("%s/keys/%d", s.API, k.ID), harness.WithKey(team.Secret), harness.WithOrigin("")); resp.Status != 200 {
			t.Errorf("restricted revoke of %s = %s", k.Name, resp)
		}
	}
}

// TestEveryManagementRouteNeedsACredential walks the OpenAPI document: every operation that is
// not public answers 401 without a credential.
func TestEveryManagementRouteNeedsACredential(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	doc := s.Validator.Document()
	checked := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Security != nil && len(*op.Security) == 0 {
				continue // public
			}
			concrete := strings.NewReplacer("{id}", "1", "{scope}", "_", "{name}", "x", "{version}", "1.0.0").Replace(path)
			resp := s.Do(method, concrete, harness.WithOrigin(""))
			if resp.Status != 401 || resp.ErrorCode() != "AUTH_REQUIRED" {
				t.Errorf("%s %s without a credential = %s", method, concrete, resp)
			}
			checked++
		}
	}
	if checked < 5 {
		t.Fatalf("only %d protected operations found", checked)
	}
}

// TestBootstrapKey checks the first-run key: created without a root key, never with one.
func TestBootstrapKey(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{HTTP2: true}) // HTTP/2: it requests right after a reload
	path := filepath.Join(s.DataDir, "state", "bootstrap-key")
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("bootstrap-key: %v, mode %v", err, info.Mode().Perm())
	}
	key := s.BootstrapKey()
	status, p := sessionOf(t, s, harness.WithKey(key))
	if status != 200 || p.Name != "bootstrap" || p.Role != "admin" || p.IsRoot {
		t.Fatalf("bootstrap principal = %d %+v", status, p)
	}
	entry, err := s.WaitLog("no root key and no API key: created the bootstrap admin key; read it from the file, create your own keys, then revoke it", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if entry["file"] != path || entry["key_prefix"] != key[:12] {
		t.Errorf("bootstrap log = %v", entry)
	}
	if strings.Contains(s.Logs(), key) || strings.Contains(s.Logs(), key[12:]) {
		t.Fatal("the logs contain the bootstrap secret")
	}
	// With keys present, a reload creates no second bootstrap key.
	if err := s.Reload(harness.Config{HTTP2: true}); err != nil {
		t.Fatal(err)
	}
	var list api.KeyList
	s.Get(s.API+"/keys", harness.WithKey(key)).JSON(&list)
	if len(list.Keys) != 1 {
		t.Fatalf("keys after reload = %+v", list.Keys)
	}

	withRoot := startWithRoot(t)
	if _, err := os.Stat(filepath.Join(withRoot.DataDir, "state", "bootstrap-key")); !os.IsNotExist(err) {
		t.Fatal("a bootstrap key was created although a root key is configured")
	}
	var none api.KeyList
	withRoot.Get(withRoot.API+"/keys", harness.WithKey(rootKey)).JSON(&none)
	if len(none.Keys) != 0 {
		t.Fatalf("keys with a root key configured = %+v", none.Keys)
	}
}

// TestAuditLog checks one audit line per key creation, revocation, login and logout, naming
// the actor and never a secret, and one for the refused logins of the minute, counting them.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	admin := s.CreateKey(rootKey, map[string]any{"name": "auditor", "role": "admin"})
	k := s.CreateKey(admin.Secret, map[string]any{"name": "audited"})
	s.Do("DELETE", fmt.Sprintf("%s/keys/%d", s.API, k.ID), harness.WithKey(admin.Secret), harness.WithOrigin(""), harness.WithHeader("X-Request-Id", "audit-revoke"))
	login(t, s, admin.Secret, harness.WithHeader("X-Request-Id", "audit-login"))
	login(t, s, "rtk_"+strings.Repeat("Z", 43), harness.WithHeader("X-Request-Id", "audit-refused"))
	s.Do("DELETE", s.API+"/admin/session", harness.WithOrigin(""), harness.WithCookie("runtime_api_key", admin.Secret))
	s.Do("POST", s.API+"/keys", harness.WithKey(k.Secret), harness.WithOrigin(""), harness.WithJSON(map[string]any{"name": "x"}))
	s.Stop() // audits the refused login, if its minute has not ended yet

	want := []struct{ action, outcome, actor, requestID string }{
		{"key.create", "success", "root", ""},
		{"key.create", "success", "auditor", ""},
		{"key.revoke", "success", "auditor", "audit-revoke"},
		{"session.login", "success", "auditor", "audit-login"},
		{"session.logout", "success", "auditor", ""},
	}
	var entries []map[string]any
	for _, e := range s.LogEntries("audit") {
		if e["outcome"] != "denied" {
			entries = append(entries, e)
			continue
		}
		if e["action"] != "session.login" || e["actor"] != nil || e["request_id"] != "audit-refused" || e["count"] != float64(1) {
			t.Errorf("the refused login's audit line = %v", e)
		}
	}
	if len(entries) != len(want) {
		t.Fatalf("%d audit lines besides the refused login's, want %d: %v", len(entries), len(want), entries)
	}
	for i, w := range want {
		e := entries[i]
		actor, _ := e["actor"].(map[string]any)
		name, _ := actor["name"].(string)
		if e["action"] != w.action || e["outcome"] != w.outcome || name != w.actor || e["request_id"] == "" ||
			w.requestID != "" && e["request_id"] != w.requestID {
			t.Errorf("audit line %d = %v, want %+v", i, e, w)
		}
		if w.actor == "auditor" && (actor["key_prefix"] != admin.KeyPrefix || actor["id"] != float64(admin.ID)) {
			t.Errorf("audit actor = %v", actor)
		}
	}
	for _, secret := range []string{rootKey, admin.Secret, k.Secret, admin.Secret[12:]} {
		if strings.Contains(s.Logs(), secret) {
			t.Fatalf("the logs contain a secret (%s…)", secret[:6])
		}
	}
}
