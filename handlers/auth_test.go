package handlers

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/keystore"
)

func TestCookieValueRoundTrip(t *testing.T) {
	for _, key := range []string{
		"rtk_abc-_DEF", "root;key+with/odd=chars%and-more", "a b,c\"d\\e", "ünïcode", "%%%", "100%25",
	} {
		enc := encodeCookieValue(key)
		for _, c := range enc {
			if c <= ' ' || c == ';' || c == ',' || c == '"' || c == '\\' || c > '~' {
				t.Fatalf("encoded %q = %q holds %q, which a cookie value cannot", key, enc, c)
			}
		}
		if got := decodeCookieValue(enc); got != key {
			t.Errorf("round trip of %q = %q", key, got)
		}
	}
	for raw, want := range map[string]string{
		"abc%zz":    "abc%zz", // not percent-encoding: used as sent
		"50%":       "50%",
		"plain":     "plain",
		"a%2Bb":     "a+b",
		"keep+plus": "keep+plus", // "+" is not a space in a cookie
	} {
		if got := decodeCookieValue(raw); got != want {
			t.Errorf("decodeCookieValue(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestSameHost(t *testing.T) {
	tests := []struct {
		scheme, origin, host string
		want                 bool
	}{
		{"http", "example.com", "example.com", true},
		{"http", "Example.COM", "example.com", true},
		{"http", "example.com:80", "example.com", true},
		{"https", "example.com", "example.com:443", true},
		{"https", "example.com:8443", "example.com:8443", true},
		{"http", "example.com:8080", "example.com", false},
		{"https", "example.com:80", "example.com", false},
		{"http", "[::1]:80", "[::1]", true},
		{"http", "evil.com", "example.com", false},
	}
	for _, tt := range tests {
		if got := sameHost(tt.scheme, tt.origin, tt.host); got != tt.want {
			t.Errorf("sameHost(%s, %s, %s) = %v", tt.scheme, tt.origin, tt.host, got)
		}
	}
}

func TestCredentialOf(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string]string
		cookie  string // the Cookie header
		want    credential
	}{
		{"none", nil, "", credential{}},
		{"X-API-Key", map[string]string{"X-API-Key": " k1 "}, "runtime_api_key=c", credential{key: "k1", fromHead: true, present: true}},
		{"empty X-API-Key still wins", map[string]string{"X-API-Key": ""}, "runtime_api_key=c", credential{fromHead: true, present: true}},
		{"Bearer", map[string]string{"Authorization": "Bearer k2"}, "runtime_api_key=c", credential{key: "k2", fromHead: true, present: true}},
		{"X-API-Key before Bearer", map[string]string{"X-API-Key": "k1", "Authorization": "Bearer k2"}, "", credential{key: "k1", fromHead: true, present: true}},
		{"Basic is ignored", map[string]string{"Authorization": "Basic abc"}, "runtime_api_key=k3", credential{key: "k3", present: true}},
		{"cookie decoded", nil, "runtime_api_key=a%3Bb", credential{key: "a;b", present: true}},
		{"other cookies around", nil, "theme=dark; runtime_api_key=k; lang=en", credential{key: "k", present: true}},
		{"__Host- cookie alone", nil, "__Host-runtime_api_key=h%3B1", credential{key: "h;1", present: true}},
		{"__Host- cookie before the plain one", nil, "runtime_api_key=planted; runtime_api_key=own; __Host-runtime_api_key=own", credential{key: "own", present: true}},
		{"two plain cookies", nil, "runtime_api_key=planted; runtime_api_key=own", credential{present: true, duplicate: true}},
		{"two plain cookies in two headers", nil, "runtime_api_key=planted\nruntime_api_key=own", credential{present: true, duplicate: true}},
		{"a header beats two cookies", map[string]string{"X-API-Key": "k1"}, "runtime_api_key=a; runtime_api_key=b", credential{key: "k1", fromHead: true, present: true}},
		{"a differently written name is another cookie", nil, "Runtime_Api_Key=planted; runtime_api_key=own", credential{key: "own", present: true}},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		for k, v := range tt.headers {
			r.Header[http.CanonicalHeaderKey(k)] = []string{v}
		}
		for line := range strings.SplitSeq(tt.cookie, "\n") {
			if line != "" {
				r.Header.Add("Cookie", line)
			}
		}
		if got := credentialOf(r); got != tt.want {
			t.Errorf("%s: credentialOf = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestAuthorizeUnit(t *testing.T) {
	team := keystore.Principal{Namespaces: []string{"@team"}}
	for unit, ok := range map[string]bool{"@team/app": true, "@other/app": false, "app": false} {
		err := authorizeUnit(team, unit)
		var apiErr *envelope.Error
		if ok && err != nil || !ok && (!errors.As(err, &apiErr) || apiErr.Status != 403 || apiErr.Code != CodeNamespaceDenied) {
			t.Errorf("authorizeUnit(@team, %q) = %v", unit, err)
		}
	}
	if err := authorizeUnit(keystore.Root(), "anything"); err != nil {
		t.Errorf("root refused: %v", err)
	}
}

// TestKeyRoutesWhileStarting checks that key routes answer 503 until the store is open, while
// the root key still authenticates.
func TestKeyRoutesWhileStarting(t *testing.T) {
	const root = "a-root-key-for-this-test"
	a, v := testAPI(t, Options{RootKey: root, Keys: func() (*keystore.Store, error) { return nil, errors.New("the runtime is starting") }})
	req := httptest.NewRequest("GET", "/api/keys", nil)
	req.Header.Set(APIKeyHeader, root)
	if resp := serve(t, a, v, req); resp.StatusCode != 503 || !strings.Contains(bodyOf(t, resp), envelope.CodeNotReady) {
		t.Fatalf("GET keys while starting = %d", resp.StatusCode)
	}
	req = httptest.NewRequest("GET", "/api/admin/session", nil)
	req.Header.Set(APIKeyHeader, "rtk_"+strings.Repeat("a", 43))
	if resp := serve(t, a, v, req); resp.StatusCode != 503 {
		t.Fatalf("session with a store key while starting = %d", resp.StatusCode)
	}
	req = httptest.NewRequest("GET", "/api/admin/session", nil)
	req.Header.Set(APIKeyHeader, root)
	if resp := serve(t, a, v, req); resp.StatusCode != 200 {
		t.Fatalf("session with the root key while starting = %d", resp.StatusCode)
	}
}

// TestSessionCookieFromAnotherSite checks that a cookie session is refused when the browser
// says the request comes from a page of another origin, on every method, while header
// credentials and requests without Sec-Fetch-Site (non-browser clients, old browsers) pass.
func TestSessionCookieFromAnotherSite(t *testing.T) {
	const root = "a-root-key-for-this-test"
	a, v := testAPI(t, Options{RootKey: root})
	tests := []struct {
		name      string
		method    string
		fetchSite []string
		cookie    bool
		want      int
	}{
		{"cookie, same-origin", "GET", []string{"same-origin"}, true, 200},
		{"cookie, no Sec-Fetch-Site", "GET", nil, true, 200},
		{"cookie, same-site", "GET", []string{"same-site"}, true, 403},
		{"cookie, cross-site", "GET", []string{"cross-site"}, true, 403},
		{"cookie, none (typed in the address bar)", "GET", []string{"none"}, true, 403},
		{"cookie, Same-Origin in capitals", "GET", []string{"Same-Origin"}, true, 403},
		{"cookie, one header foreign", "GET", []string{"same-origin", "cross-site"}, true, 403},
		{"cookie, cross-site POST with a matching Origin", "POST", []string{"cross-site"}, true, 403},
		{"cookie, same-origin POST", "POST", []string{"same-origin"}, true, 201},
		{"header key, cross-site", "GET", []string{"cross-site"}, false, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, body := "/api/admin/session", ""
			if tt.method == "POST" {
				path, body = "/api/keys", `{"name":"k"}`
			}
			req := httptest.NewRequest(tt.method, path, strings.NewReader(body))
			req.Header.Set("Origin", "http://"+req.Host)
			req.Header.Set("Content-Type", "application/json")
			req.Header["Sec-Fetch-Site"] = tt.fetchSite
			if tt.cookie {
				req.AddCookie(&http.Cookie{Name: SessionCookie, Value: encodeCookieValue(root)})
			} else {
				req.Header.Set(APIKeyHeader, root)
			}
			resp := serve(t, a, v, req)
			got := bodyOf(t, resp)
			if tt.want == 403 && (resp.StatusCode != 403 || !strings.Contains(got, CodeCSRFRejected) || !strings.Contains(got, "Sec-Fetch-Site")) {
				t.Fatalf("= %d %s, want 403 %s naming Sec-Fetch-Site", resp.StatusCode, got, CodeCSRFRejected)
			}
			if tt.want != 403 && resp.StatusCode == 403 {
				t.Fatalf("= %d %s, want it let through", resp.StatusCode, got)
			}
		})
	}
}
