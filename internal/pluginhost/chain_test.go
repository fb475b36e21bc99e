package pluginhost

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/serving"
)

// headerCredential exempts the requests that carry X-Api-Key from the hooks, as the API does
// for a header credential.
type headerCredential struct{}

func (headerCredential) SkipsHooks(r *http.Request) bool { return r.Header.Get("X-Api-Key") != "" }

// settingCookies is a handler of uploaded code that sets the session cookie beside one of its
// own, then goes on to next, if any, or answers.
func settingCookies(who string, next caddyhttp.Handler) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Add("Set-Cookie", "sess="+who+"; Path=/")
		w.Header().Add("Set-Cookie", "theme="+who)
		if next != nil {
			return next.ServeHTTP(w, r)
		}
		if r.URL.Query().Has("fail") {
			return caddyhttp.Error(http.StatusNotFound, nil) // no answer written: the glue writes one
		}
		w.Write([]byte("answered by " + who))
		return nil
	})
}

// TestChainGuardsEveryAnswer: the chain itself keeps uploaded code from setting the session
// cookie, on every way through it (a plugin route, a hook that answers, a hook that hands on
// to a route, a route that fails and leaves the answer to the glue) while the code's own
// cookies pass, and the code does not see the runtime's credentials.
func TestChainGuardsEveryAnswer(t *testing.T) {
	host := &Host{}
	table := &pluginTable{bases: map[string]caddyhttp.Handler{}}
	table.bases["route"] = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if r.Header.Get("X-Api-Key") != "" || r.Header.Get("Cookie") != "" {
			t.Errorf("the plugin route saw the runtime's credentials: %v", r.Header)
		}
		return settingCookies("route", nil).ServeHTTP(w, r)
	})
	table.hooks = []hook{{plugin: "hook", handler: caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if r.URL.Query().Has("answer") {
			return settingCookies("hook", nil).ServeHTTP(w, r)
		}
		return settingCookies("hook", hookNext{i: 0}).ServeHTTP(w, r)
	})}}
	host.table.Store(table)
	chain := &Chain{Plugins: host, Exempt: headerCredential{}, Logger: zap.NewNop(),
		Workers: serving.New(serving.Options{Credentials: serving.Credentials{Header: "X-Api-Key", Cookies: []string{"sess"}}})}

	for _, tc := range []struct {
		name, target string
		key          bool
		status       int
		theirs       []string // the code's own cookies that must pass
	}{
		{"plugin route", "/route/x", true, http.StatusOK, []string{"theme=route"}},
		{"hook answers", "/route/x?answer", false, http.StatusOK, []string{"theme=hook"}},
		{"hook hands on to the route", "/route/x", false, http.StatusOK, []string{"theme=hook", "theme=route"}},
		{"route fails", "/route/x?fail", true, http.StatusNotFound, []string{"theme=route"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tc.target, nil)
			r.Header.Set("Cookie", "sess=the-users-session")
			if tc.key {
				r.Header.Set("X-Api-Key", "rtk_the-users-key")
			}
			rec := httptest.NewRecorder()
			answer := chain.Serve(rec, r)
			status := rec.Code
			if answer != nil {
				status = answer.Status
			}
			if status != tc.status {
				t.Fatalf("status %d (answer %v), want %d", status, answer, tc.status)
			}
			for _, h := range []http.Header{rec.Header(), rec.Result().Header} {
				got := h.Values("Set-Cookie")
				if slices.ContainsFunc(got, func(c string) bool { return len(c) > 5 && c[:5] == "sess=" }) {
					t.Errorf("the session cookie reached the answer: Set-Cookie %q", got)
				}
				for _, c := range tc.theirs {
					if !slices.Contains(got, c) {
						t.Errorf("the code's own cookie %s was dropped: Set-Cookie %q", c, got)
					}
				}
			}
		})
	}
}
