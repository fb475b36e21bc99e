package integration

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// withHeaders adds header lines as written, several of one name included, and keeps a name's
// case as given (the runtime's server canonicalizes it).
func withHeaders(lines ...[2]string) harness.Option {
	return func(r *http.Request) error {
		for _, l := range lines {
			r.Header[l[0]] = append(r.Header[l[0]], l[1])
		}
		return nil
	}
}

// reflected is what a plugin route or hook answers to show what it sees of the runtime's
// credentials, through the placeholders an uploaded plugin may use.
const reflected = "key={http.request.header.X-Api-Key} auth={http.request.header.Authorization} " +
	"cookies={http.request.header.Cookie} session={http.request.cookie.runtime_api_key} " +
	"host={http.request.cookie.__Host-runtime_api_key}"

// TestCredentialsStripped is the attack of uploaded code collecting the runtime's
// credentials from the requests it serves: a process worker echoing its headers, a plugin
// route and an onRequest hook reflecting them through request placeholders. Each credential
// travels next to the app's own in every way a client can send it (a second Authorization
// line, other schemes, several Cookie lines, several session cookies in one line, names in
// another case); none gets through, and the app's own values do. A valid header credential
// still skips the hooks, and the API still reads every credential.
func TestCredentialsStripped(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	processWorker(t, s, "@team/echo", "1.0.0", "")
	plugin(t, s, "reflect", "base: /reflect\n"+respond(reflected), nil)
	plugin(t, s, "spy", "onRequest:\n  - {handler: headers, response: {set: {X-Spy: ['"+reflected+"']}}}\n", nil)
	reload(t, s)
	key := s.CreateKey(rootKey, map[string]any{"name": "user"})
	resp := login(t, s, key.Secret)
	if resp.Status != 200 {
		t.Fatalf("login = %s", resp)
	}
	session := cookieFrom(t, resp)
	secrets := map[string]string{"the key": key.Secret, "the root key": rootKey, "the session": session}
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	own := basic("user", "pass") // the app's own credential: it must arrive

	for _, tt := range []struct {
		name       string
		lines      [][2]string
		auth       string   // the Authorization the worker must receive
		cookies    []string // cookie pairs the worker must receive
		skipsHooks bool
	}{
		{"a second Authorization", [][2]string{{"Authorization", own}, {"Authorization", "Bearer " + key.Secret}}, own, nil, false},
		{"the root key second", [][2]string{{"Authorization", "Bearer app-token"}, {"Authorization", "Bearer " + rootKey}}, "Bearer app-token", nil, false},
		{"a session token as bearer", [][2]string{{"Authorization", "Bearer " + session}}, "", nil, false},
		{"a key in Basic", [][2]string{{"Authorization", basic("ci", key.Secret)}, {"Authorization", own}}, own, nil, false},
		{"the root key in Basic", [][2]string{{"Authorization", basic(rootKey, "")}}, "", nil, false},
		{"a key in another scheme", [][2]string{{"Authorization", "Token " + key.Secret}}, "", nil, false},
		{"a bare key", [][2]string{{"Authorization", key.Secret}}, "", nil, false},
		{"a scheme in another case", [][2]string{{"authorization", "bEaReR " + key.Secret}}, "", nil, true},
		{"two X-API-Key lines", [][2]string{{"X-Api-Key", "rtk_invalid"}, {"x-api-key", key.Secret}}, "", nil, false},
		{"several session cookies in one line", [][2]string{{"Cookie", "theme=dark; runtime_api_key=" + session + "; lang=en; runtime_api_key=" + key.Secret}},
			"", []string{"theme=dark", "lang=en"}, false},
		{"several Cookie lines", [][2]string{{"Cookie", "runtime_api_key=" + session + "; theme=dark"}, {"Cookie", "lang=en; runtime_api_key=" + rootKey}},
			"", []string{"theme=dark", "lang=en"}, false},
		{"cookie names in another case", [][2]string{{"Cookie", "RUNTIME_API_KEY=" + key.Secret + "; theme=dark; Runtime_Api_Key=" + session}},
			"", []string{"theme=dark"}, false},
		{"blanks around the name", [][2]string{{"Cookie", "theme=dark;runtime_api_key =" + session + ";  runtime_api_key\t=" + key.Secret}},
			"", []string{"theme=dark"}, false},
		{"the __Host- session cookie", [][2]string{{"Cookie", "__Host-runtime_api_key=" + session + "; theme=dark"}}, "", []string{"theme=dark"}, false},
		// Odd shapes the API refuses but a lenient server reads (issue 35, point 8).
		{"Bearer and a tab", [][2]string{{"Authorization", "Bearer\t" + key.Secret}}, "", nil, false},
		{"Bearer and a comma", [][2]string{{"Authorization", "Bearer," + key.Secret}}, "", nil, false},
		{"Bearer and a colon", [][2]string{{"Authorization", "Bearer:" + session}}, "", nil, false},
		{"a quoted key", [][2]string{{"Authorization", `Bearer "` + key.Secret + `"`}, {"Authorization", own}}, own, nil, false},
		{"a parenthesised root key", [][2]string{{"Authorization", "Bearer (" + rootKey + ")"}}, "", nil, false},
		{"Basic without padding", [][2]string{{"Authorization", "Basic " + base64.RawStdEncoding.EncodeToString([]byte("ci:"+key.Secret))}}, "", nil, false},
		{"Basic of key: in the url alphabet", [][2]string{{"Authorization", "Basic " + base64.URLEncoding.EncodeToString([]byte(key.Secret+":"))}}, "", nil, false},
		{"Proxy-Authorization", [][2]string{{"Proxy-Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(rootKey))}}, "", nil, false},
		{"an API key header with underscores", [][2]string{{"X_API_KEY", key.Secret}}, "", nil, false},
		{"comma-separated cookies", [][2]string{{"Cookie", "theme=dark, runtime_api_key=" + session + ", lang=en"}}, "", []string{"theme=dark", "lang=en"}, false},
	} {
		opt := withHeaders(tt.lines...)
		e := echoOf(t, s.Get("/@team/echo/", opt))
		if got := e.Headers["Authorization"]; got != tt.auth {
			t.Errorf("%s: the worker got Authorization %q, want %q", tt.name, got, tt.auth)
		}
		for _, c := range tt.cookies {
			if !strings.Contains(e.Headers["Cookie"], c) {
				t.Errorf("%s: the worker got Cookie %q, want %s in it", tt.name, e.Headers["Cookie"], c)
			}
		}
		for name, v := range e.Headers {
			for what, secret := range secrets {
				if strings.Contains(v, secret) {
					t.Errorf("%s: the worker got %s in %s: %q", tt.name, what, name, v)
				}
			}
		}
		if _, ok := e.Headers["X-Api-Key"]; ok {
			t.Errorf("%s: the worker got X-Api-Key", tt.name)
		}
		for _, path := range []string{"/@team/echo/", "/reflect/"} {
			resp := s.Get(path, opt)
			if resp.Status != 200 {
				t.Errorf("%s: GET %s = %s", tt.name, path, resp)
				continue
			}
			if spy := resp.Header.Get("X-Spy"); (spy == "") != tt.skipsHooks {
				t.Errorf("%s: GET %s: hook answer %q, want hooks skipped %v", tt.name, path, spy, tt.skipsHooks)
			}
			seen := body(resp) + " " + resp.Header.Get("X-Spy")
			for what, secret := range secrets {
				if strings.Contains(seen, secret) {
					t.Errorf("%s: GET %s reflects %s: %s", tt.name, path, what, seen)
				}
			}
		}
	}

	// The credentials still work where they belong: the API reads them.
	for _, opt := range []harness.Option{withHeaders([2]string{"Authorization", "Bearer " + key.Secret}), harness.WithCookie("runtime_api_key", session)} {
		if status, p := sessionOf(t, s, opt); status != 200 || p.Name != "user" {
			t.Errorf("the API after stripping elsewhere: %d %+v", status, p)
		}
	}
}

// TestRealIPSetByTheRuntime: X-Real-IP, which many apps take for the visitor's address, is the
// runtime's for workers and plugin routes: the client address Caddy determined (an address
// forwarded in X-Forwarded-For only by a proxy in trusted_proxies), whatever the client sent in
// X-Real-IP under any spelling.
func TestRealIPSetByTheRuntime(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{
		Env:    map[string]string{"RUNTIME_ROOT_KEY": rootKey},
		Global: "servers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}",
	})
	processWorker(t, s, "@team/echo", "1.0.0", "")
	plugin(t, s, "reflect", "base: /reflect\n"+respond("ip={http.request.header.X-Real-Ip}"), nil)
	reload(t, s)
	forged := withHeaders([2]string{"X-Real-Ip", "6.6.6.6"}, [2]string{"x-real-ip", "6.6.6.7"}, [2]string{"X_Real_IP", "6.6.6.8"})
	for _, tt := range []struct {
		name string
		opts []harness.Option
		want string
	}{
		{"from the peer", []harness.Option{forged}, "127.0.0.1"},
		{"through the trusted proxy", []harness.Option{forged, harness.WithHeader("X-Forwarded-For", "203.0.113.7")}, "203.0.113.7"},
	} {
		e := echoOf(t, s.Get("/@team/echo/", tt.opts...))
		if got := e.Headers["X-Real-Ip"]; got != tt.want {
			t.Errorf("%s: the worker got X-Real-Ip %q, want %q", tt.name, got, tt.want)
		}
		for name, v := range e.Headers {
			if strings.Contains(v, "6.6.6.") {
				t.Errorf("%s: the worker got the client's %s: %q", tt.name, name, v)
			}
		}
		if resp := s.Get("/reflect/", tt.opts...); resp.Status != 200 || body(resp) != "ip="+tt.want {
			t.Errorf("%s: the plugin route = %s, want ip=%s", tt.name, resp, tt.want)
		}
	}
}
