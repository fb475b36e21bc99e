package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddy-runtime/runtime/keystore"
)

// SessionCookie carries a browser session: the key itself, percent-encoded, HttpOnly.
const SessionCookie = "runtime_api_key"

// Session is the body of the session endpoints.
type Session struct {
	Authenticated bool               `json:"authenticated"`
	Principal     keystore.Principal `json:"principal"`
}

// LoginRequest exchanges a key for a session cookie.
type LoginRequest struct {
	Key *string `json:"key" doc:"the root key or an API key"`
}

func (a *API) sessionRoutes() []route {
	return []route{
		{
			method: "GET", path: "/admin/session", id: "getSession", tag: "session",
			summary:     "The principal of the current credential",
			description: "Any credential channel: X-API-Key, Authorization: Bearer or the session cookie.",
			responses:   []response{{status: http.StatusOK, description: "Authenticated", body: Session{}}},
			handle: func(w http.ResponseWriter, r *http.Request) error {
				writeJSON(w, http.StatusOK, Session{Authenticated: true, Principal: principalOf(r.Context())})
				return nil
			},
		},
		{
			method: "POST", path: "/admin/session", id: "login", tag: "session", public: true,
			summary:     "Exchange a key for a session cookie",
			description: "Sets the HttpOnly cookie runtime_api_key. The root key is accepted too. Subject to the CSRF rule.",
			request:     &request{contentType: "application/json", body: LoginRequest{}},
			responses: []response{
				{status: http.StatusOK, description: "Logged in; Set-Cookie carries the session", body: Session{}},
				errorResponse(http.StatusBadRequest, "The body or its key is missing or malformed (BAD_REQUEST)"),
				errorResponse(http.StatusUnauthorized, "The key is neither the root key nor an active API key (INVALID_KEY)"),
				errorResponse(http.StatusRequestEntityTooLarge, "Body over 64 KiB (PAYLOAD_TOO_LARGE)"),
				errorResponse(http.StatusServiceUnavailable, "The runtime is starting (NOT_READY)"),
			},
			handle: a.login,
		},
		{
			method: "DELETE", path: "/admin/session", id: "logout", tag: "session", public: true,
			summary:     "Clear the session cookie",
			description: "Always succeeds (idempotent). Subject to the CSRF rule.",
			responses:   []response{{status: http.StatusNoContent, description: "Logged out; Set-Cookie clears the session"}},
			handle:      a.logout,
		},
	}
}

func (a *API) login(w http.ResponseWriter, r *http.Request) error {
	var req LoginRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Key == nil || strings.TrimSpace(*req.Key) == "" {
		return Errorf(http.StatusBadRequest, CodeBadRequest, `send the key as {"key": "…"}`)
	}
	p, err := a.resolve(r.Context(), strings.TrimSpace(*req.Key))
	if errors.Is(err, keystore.ErrInvalidKey) {
		a.audit(r, "session.login", "", "denied", nil)
		return Errorf(http.StatusUnauthorized, CodeInvalidKey, "the key is neither the root key nor an active API key")
	}
	if err != nil {
		return err
	}
	a.audit(r, "session.login", p.Name, "success", &p)
	w.Header().Add("Set-Cookie", a.sessionCookie(r, encodeCookieValue(strings.TrimSpace(*req.Key)), int(a.opts.SessionTTL.Seconds())))
	writeJSON(w, http.StatusOK, Session{Authenticated: true, Principal: p})
	return nil
}

func (a *API) logout(w http.ResponseWriter, r *http.Request) error {
	var actor *keystore.Principal
	if cred := credentialOf(r); cred.present {
		if p, err := a.resolve(r.Context(), cred.key); err == nil {
			actor = &p
		}
	}
	a.audit(r, "session.logout", "", "success", actor)
	w.Header().Add("Set-Cookie", a.sessionCookie(r, "", 0))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// sessionCookie renders the Set-Cookie value; maxAge 0 clears the cookie.
func (a *API) sessionCookie(r *http.Request, value string, maxAge int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s=%s; Max-Age=%d; Path=/", SessionCookie, value, maxAge)
	if maxAge > 0 {
		b.WriteString("; HttpOnly")
	}
	if secureRequest(r) {
		b.WriteString("; Secure")
	}
	b.WriteString("; SameSite=Strict")
	return b.String()
}

// secureRequest reports whether the client reached the runtime over HTTPS: the first
// X-Forwarded-Proto value when present (a TLS-terminating proxy in front), else the
// connection itself.
func secureRequest(r *http.Request) bool {
	if proto := r.Header.Get("X-Forwarded-Proto"); proto != "" {
		first, _, _ := strings.Cut(proto, ",")
		return strings.EqualFold(strings.TrimSpace(first), "https")
	}
	return r.TLS != nil
}

// encodeCookieValue percent-encodes everything but the characters encodeURIComponent keeps,
// so any key survives the cookie syntax.
func encodeCookieValue(s string) string {
	const keep = "-_.!~*'()"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// decodeCookieValue reverses encodeCookieValue; a value that does not decode is used as sent.
func decodeCookieValue(s string) string {
	if v, err := url.PathUnescape(s); err == nil {
		return v
	}
	return s
}
