package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/envelope"
	"github.com/caddy-runtime/runtime/keystore"
)

// SessionCookie carries a browser session: an opaque token (keystore.SessionPrefix), HttpOnly.
// A cookie holding a key itself, percent-encoded, as older clients write it, is still accepted.
const SessionCookie = "runtime_api_key"

// CodeSessionNotFound answers an end of a session that is not the caller's own or not live.
const CodeSessionNotFound = "SESSION_NOT_FOUND"

// Session is the body of the session endpoints.
type Session struct {
	Authenticated bool                    `json:"authenticated"`
	Principal     keystore.Principal      `json:"principal"`
	Session       *keystore.SessionRecord `json:"session,omitempty" doc:"the cookie session the request came with; absent for a key sent in a header or a key-valued cookie"`
}

// SessionList is the body of GET admin/sessions.
type SessionList struct {
	Sessions []keystore.SessionRecord `json:"sessions"`
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
			handle:      a.getSession,
		},
		{
			method: "POST", path: "/admin/session", id: "login", tag: "session", public: true,
			summary: "Exchange a key for a session cookie",
			description: "Begins a session on the server and sets the HttpOnly cookie runtime_api_key to its token (never the key). " +
				"The session ends at its Max-Age (the session lifetime, or the key's expiry if sooner), at logout, when its key is revoked, " +
				"and, for the root key, when the root key changes. The root key is accepted too. Subject to the CSRF rule.",
			request: &request{contentType: "application/json", body: LoginRequest{}},
			responses: []response{
				{status: http.StatusOK, description: "Logged in; Set-Cookie carries the session", body: Session{}},
				errorResponse(http.StatusBadRequest, "The body or its key is missing or malformed (BAD_REQUEST)"),
				errorResponse(http.StatusUnauthorized, "The key is neither the root key nor an active API key (INVALID_KEY)"),
				errorResponse(http.StatusRequestEntityTooLarge, "Body over 64 KiB (PAYLOAD_TOO_LARGE)"),
				errorResponse(http.StatusServiceUnavailable, "The runtime is starting (NOT_READY), or the key store's primary is unreachable in sync mode (KEY_STORE_UNAVAILABLE)"),
			},
			handle: a.login,
		},
		{
			method: "DELETE", path: "/admin/session", id: "logout", tag: "session", public: true,
			summary:     "End the session and clear its cookie",
			description: "Ends the cookie's session on the server, so a copy of the cookie no longer works, and clears the cookie. Always succeeds (idempotent). Subject to the CSRF rule.",
			responses: []response{
				{status: http.StatusNoContent, description: "Logged out; Set-Cookie clears the session"},
				errorResponse(http.StatusServiceUnavailable, "The runtime is starting (NOT_READY), or the key store's primary is unreachable in sync mode (KEY_STORE_UNAVAILABLE)"),
			},
			handle: a.logout,
		},
		{
			method: "GET", path: "/admin/sessions", id: "listSessions", tag: "session",
			summary:     "The caller's own live sessions",
			description: "The sessions of the key the request authenticates with (for the root key: those begun with the current root key), oldest first; tokens are never shown.",
			responses:   []response{{status: http.StatusOK, description: "The sessions", body: SessionList{}}},
			handle:      a.listSessions,
		},
		{
			method: "DELETE", path: "/admin/sessions/{id}", id: "endSession", tag: "session",
			summary:     "End one of the caller's own sessions",
			description: "Takes effect on the next request. Ending the session the request came with also clears its cookie.",
			responses: []response{
				{status: http.StatusOK, description: "Ended", body: Success{}},
				errorResponse(http.StatusBadRequest, "The id is not a session id (BAD_REQUEST)"),
				errorResponse(http.StatusNotFound, "No live session with this id belongs to the caller (SESSION_NOT_FOUND)"),
			},
			handle: a.endSession,
		},
	}
}

// getSession describes the caller. The answer depends only on the verification the credential
// came from, so it is encoded once per cached verification (the most frequent authenticated
// request: every page of the cpanel asks it).
func (a *API) getSession(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r.Context())
	body := p.Memo().Load()
	if body == nil {
		answer := Session{Authenticated: true, Principal: p}
		if rec, ok := sessionOf(r.Context()); ok {
			rec.Current = true
			answer.Session = &rec
		}
		body = envelope.EncodeJSON(answer)
		p.Memo().Store(body)
	}
	envelope.WriteEncoded(w, http.StatusOK, body)
	return nil
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
	store, err := a.keyStore()
	if err != nil {
		return err
	}
	token, sess, err := store.CreateSession(r.Context(), keystore.NewSession{
		Principal: p, RootKey: a.opts.RootKey, TTL: a.opts.SessionTTL, UserAgent: r.UserAgent()})
	if err != nil {
		return err
	}
	a.audit(r, "session.login", p.Name, "success", &p, zap.Int64("session", sess.ID))
	w.Header().Add("Set-Cookie", a.sessionCookie(r, encodeCookieValue(token), int(sess.ExpiresAt-sess.CreatedAt)))
	sess.Current = true
	writeJSON(w, http.StatusOK, Session{Authenticated: true, Principal: p, Session: &sess})
	return nil
}

func (a *API) logout(w http.ResponseWriter, r *http.Request) error {
	var actor *keystore.Principal
	if cred := credentialOf(r); cred.present {
		if p, _, err := a.resolveCredential(r.Context(), cred); err == nil {
			actor = &p
		}
	}
	if token := cookieCredential(r); strings.HasPrefix(token, keystore.SessionPrefix) {
		store, err := a.keyStore()
		if err != nil {
			return err
		}
		if err := store.EndSessionToken(r.Context(), token); err != nil {
			return err
		}
	}
	a.audit(r, "session.logout", "", "success", actor)
	w.Header().Add("Set-Cookie", a.sessionCookie(r, "", 0))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) listSessions(w http.ResponseWriter, r *http.Request) error {
	store, err := a.keyStore()
	if err != nil {
		return err
	}
	list, err := store.ListSessions(r.Context(), principalOf(r.Context()), a.opts.RootKey)
	if err != nil {
		return err
	}
	if current, ok := sessionOf(r.Context()); ok {
		for i := range list {
			list[i].Current = list[i].ID == current.ID
		}
	}
	writeJSON(w, http.StatusOK, SessionList{Sessions: list})
	return nil
}

func (a *API) endSession(w http.ResponseWriter, r *http.Request) error {
	store, id, err := a.storeAndID(r, "session")
	if err != nil {
		return err
	}
	p := principalOf(r.Context())
	err = store.EndSession(r.Context(), p, a.opts.RootKey, id)
	if errors.Is(err, keystore.ErrSessionNotFound) {
		return Errorf(http.StatusNotFound, CodeSessionNotFound, "no live session %d of yours; GET %s/admin/sessions lists them", id, a.opts.Prefix)
	}
	if err != nil {
		return err
	}
	a.audit(r, "session.end", "session #"+strconv.FormatInt(id, 10), "success", &p)
	if current, ok := sessionOf(r.Context()); ok && current.ID == id {
		w.Header().Add("Set-Cookie", a.sessionCookie(r, "", 0))
	}
	writeJSON(w, http.StatusOK, Success{Success: true})
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
