package serving

import (
	"encoding/base64"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// testCredentials recognise keys (rtk_), session tokens (rts_) and a root key with the
// characters a root key may hold.
var testCredentials = Credentials{Header: "X-API-Key", Cookies: testCookies, Issuer: testIssuer{}}

type testIssuer struct{}

func (testIssuer) HoldsCredential(s string) bool {
	return strings.Contains(s, "rtk_") || strings.Contains(s, "rts_") || strings.Contains(s, testRoot)
}

const testRoot = "root;key, with=odd chars"

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func TestStrip(t *testing.T) {
	tests := []struct {
		name     string
		in, want http.Header
	}{
		{"nothing of the runtime's", http.Header{"Authorization": {"Bearer app"}, "Cookie": {"a=1;b=2"}, "X-Other": {"rtk_x"}},
			http.Header{"Authorization": {"Bearer app"}, "Cookie": {"a=1;b=2"}, "X-Other": {"rtk_x"}}},
		{"every API key line, any case", http.Header{"X-Api-Key": {"a", "b"}, "x-api-key": {"c"}, "X-Keep": {"1"}}, http.Header{"X-Keep": {"1"}}},
		{"a second Authorization", http.Header{"Authorization": {"Bearer app", "Bearer rtk_k"}}, http.Header{"Authorization": {"Bearer app"}}},
		{"the first Authorization", http.Header{"Authorization": {"Bearer rtk_k", "Basic x"}}, http.Header{"Authorization": {"Basic x"}}},
		{"Authorization written in another case", http.Header{"authorization": {"bearer rtk_k"}}, http.Header{}},
		{"a session token", http.Header{"Authorization": {"Bearer rts_s"}}, http.Header{}},
		{"the root key", http.Header{"Authorization": {"Bearer " + testRoot}}, http.Header{}},
		{"a bare key", http.Header{"Authorization": {"  rtk_k "}}, http.Header{}},
		{"a bare root key", http.Header{"Authorization": {testRoot}}, http.Header{}},
		{"another scheme", http.Header{"Authorization": {"Token rtk_k"}}, http.Header{}},
		{"an auth-param", http.Header{"Authorization": {`Token realm="x", token="rtk_k"`}}, http.Header{}},
		{"Basic with a key as password", http.Header{"Authorization": {basic("ci", "rtk_k")}}, http.Header{}},
		{"Basic with the root key as user", http.Header{"Authorization": {basic(testRoot, "")}}, http.Header{}},
		{"the app's own Basic", http.Header{"Authorization": {basic("user", "pass")}}, http.Header{"Authorization": {basic("user", "pass")}}},
		{"the app's Basic naming rtk_ in its realm", http.Header{"Authorization": {"Basic bm90OmFrZXk="}}, http.Header{"Authorization": {"Basic bm90OmFrZXk="}}},
		{"a session cookie among others", http.Header{"Cookie": {"a=1; runtime_api_key=rts_s;b=2"}}, http.Header{"Cookie": {"a=1; b=2"}}},
		{"several in one line", http.Header{"Cookie": {"runtime_api_key=x; a=1; runtime_api_key=y"}}, http.Header{"Cookie": {"a=1"}}},
		{"several lines", http.Header{"Cookie": {"runtime_api_key=x", "a=1", "b=2; __Host-runtime_api_key=y"}}, http.Header{"Cookie": {"a=1", "b=2"}}},
		{"names in another case or with blanks", http.Header{"Cookie": {"RUNTIME_API_KEY=x;  runtime_api_key\t=y; __host-RUNTIME_api_key=z; a=1"}},
			http.Header{"Cookie": {"a=1"}}},
		{"a nameless pair", http.Header{"Cookie": {"runtime_api_key; a=1"}}, http.Header{"Cookie": {"a=1"}}},
		{"only session cookies", http.Header{"cookie": {"runtime_api_key=x"}}, http.Header{}},
		{"Bearer and a tab", http.Header{"Authorization": {"Bearer\trtk_k"}}, http.Header{}},
		{"Bearer and a comma", http.Header{"Authorization": {"Bearer,rtk_k"}}, http.Header{}},
		{"Bearer and a colon", http.Header{"Authorization": {"Bearer:rtk_k"}}, http.Header{}},
		{"a quoted key", http.Header{"Authorization": {`Bearer "rtk_k"`}}, http.Header{}},
		{"a parenthesised key", http.Header{"Authorization": {"Bearer (rtk_k)"}}, http.Header{}},
		{"a key glued to its scheme", http.Header{"Authorization": {"Bearerrtk_k"}}, http.Header{}},
		{"a percent-encoded key", http.Header{"Authorization": {"Bearer rtk%5Fk %zz"}}, http.Header{}},
		{"a quoted root key", http.Header{"Authorization": {`"` + testRoot + `"`}}, http.Header{}},
		{"Basic without padding", http.Header{"Authorization": {"Basic " + strings.TrimRight(base64.StdEncoding.EncodeToString([]byte("ci:rtk_k")), "=")}}, http.Header{}},
		{"Basic of key: alone", http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("rtk_key:"))}}, http.Header{}},
		{"Basic of a key without a colon", http.Header{"Authorization": {"basic " + base64.RawStdEncoding.EncodeToString([]byte("rtk_key"))}}, http.Header{}},
		{"Basic in the url alphabet", http.Header{"Authorization": {"Basic " + base64.URLEncoding.EncodeToString([]byte("\xfb\xff:rts_s?>"))}}, http.Header{}},
		{"Basic glued to its scheme", http.Header{"Authorization": {"Basic" + base64.StdEncoding.EncodeToString([]byte("u:rtk_k"))}}, http.Header{}},
		{"base64 in an auth-param", http.Header{"Authorization": {`Digest response="` + base64.StdEncoding.EncodeToString([]byte(testRoot)) + `"`}}, http.Header{}},
		{"Proxy-Authorization", http.Header{"Proxy-Authorization": {"Bearer rtk_k"}, "Proxy-Authorization2": {"Bearer rtk_k"}},
			http.Header{"Proxy-Authorization2": {"Bearer rtk_k"}}},
		{"header names with underscores", http.Header{"X_api_key": {"a"}, "AUTHORIZATION": {"Bearer rtk_k"}, "Cookie_": {"runtime_api_key=x"}, "cookie": {"runtime_api_key=x"}},
			http.Header{"Cookie_": {"runtime_api_key=x"}}},
		{"comma-separated cookies", http.Header{"Cookie": {"x=1, runtime_api_key=rts_s,y=2; z=3"}}, http.Header{"Cookie": {"x=1,y=2; z=3"}}},
		{"a comma in an app's value", http.Header{"Cookie": {"prefs=a,b; runtime_api_key=x; list=1, 2"}}, http.Header{"Cookie": {"prefs=a,b; list=1, 2"}}},
		{"a comma-separated session cookie last", http.Header{"Cookie": {"x=1 , Runtime_Api_Key=x"}}, http.Header{"Cookie": {"x=1"}}},
		{"a comma-separated session cookie first", http.Header{"Cookie": {"__Host-runtime_api_key=rts_s,x=1"}}, http.Header{"Cookie": {"x=1"}}},
		{"the app's own odd lines pass", http.Header{"Authorization": {"Bearer\tapp-token", "Basic " + base64.RawStdEncoding.EncodeToString([]byte("user:rtk"))}},
			http.Header{"Authorization": {"Bearer\tapp-token", "Basic " + base64.RawStdEncoding.EncodeToString([]byte("user:rtk"))}}},
		{"longer or prefixed names pass", http.Header{"Cookie": {"runtime_api_key2=1; my_runtime_api_key=2; __Secure-runtime_api_key=3; a=runtime_api_key"}},
			http.Header{"Cookie": {"runtime_api_key2=1; my_runtime_api_key=2; __Secure-runtime_api_key=3; a=runtime_api_key"}}},
	}
	for _, tt := range tests {
		h := tt.in.Clone()
		testCredentials.Strip(h)
		if !reflect.DeepEqual(h, tt.want) {
			t.Errorf("%s: %q left %q, want %q", tt.name, tt.in, h, tt.want)
		}
	}
}

// TestStripAllocations checks that a request carrying nothing of the runtime's costs no
// allocation.
func TestStripAllocations(t *testing.T) {
	h := http.Header{"Accept": {"*/*"}, "Cookie": {"theme=dark; lang=en"}, "User-Agent": {"test"}}
	if n := testing.AllocsPerRun(100, func() { testCredentials.Strip(h) }); n > 0 {
		t.Errorf("Strip allocated %v times", n)
	}
}
