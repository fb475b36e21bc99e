package handlers

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/publicsuffix"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/mount"
	"github.com/caddy-runtime/runtime/internal/openapi"
	"github.com/caddy-runtime/runtime/internal/trace"
	"github.com/caddy-runtime/runtime/keystore"
)

// SessionCookie carries a browser session: an opaque token (keystore.SessionPrefix), HttpOnly.
// A cookie holding a key itself, percent-encoded, as older clients write it, is still accepted.
const SessionCookie = "runtime_api_key"

// HostSessionCookie carries the same session beside SessionCookie over HTTPS, and is read
// first. Browsers take a __Host- cookie only Secure, with Path=/ and no Domain, from the host
// itself: a page of another host of the site (a worker's) can neither set it nor shadow it, as
// it can SessionCookie with a Domain attribute.
const HostSessionCookie = "__Host-" + SessionCookie

// CodeSessionNotFound answers an end of a session that is not the caller's own or not live.
const CodeSessionNotFound = "SESSION_NOT_FOUND"

// sessionCookieHeaders documents the Set-Cookie lines of signing in and out.
var sessionCookieHeaders = map[string]openapi.Header{"Set-Cookie": {
	Description: SessionCookie + " (Path=/, HttpOnly, SameSite=Strict, Secure over HTTPS), then over HTTPS " + HostSessionCookie +
		" with the same value and attributes; when the request carries " + SessionCookie + " cookies the runtime may not have set " +
		"(another host of the site can set one for a parent domain or a longer path), further lines expire each of them " +
		"for every domain and path it can have on this request's way",
	Schema: &openapi.Schema{Type: "string"},
}}

// sessionsAPI serves the browser sessions: signing in and out, listing and ending them.
type sessionsAPI struct {
	*pipeline
	sessionTTL time.Duration // the lifetime of a session cookie
}

func (a *sessionsAPI) sessionRoutes() []route {
	return []route{
		{
			method: "GET", path: "/admin/session", id: "getSession", tag: "session",
			summary: "The principal of the current credential",
			description: "Any credential channel: X-API-Key, Authorization: Bearer or the session cookie (" + HostSessionCookie + " before " + SessionCookie +
				"; two " + SessionCookie + " cookies without the other are refused with DUPLICATE_SESSION_COOKIE).",
			responses: []response{{status: http.StatusOK, description: "Authenticated", body: api.Session{}}},
			handle:    a.getSession,
		},
		{
			method: "POST", path: "/admin/session", id: "login", tag: "session", public: true,
			summary: "Exchange a key for a session cookie",
			description: "Begins a session on the server and sets the HttpOnly cookie runtime_api_key to its token (never the key), " +
				"over HTTPS also " + HostSessionCookie + ", which only this host can set. " +
				"The session ends at its Max-Age (the session lifetime, or the key's expiry if sooner), at logout, when its key is revoked, " +
				"and, for the root key, when the root key changes. The root key is accepted too. Subject to the CSRF rule. " +
				"A refused key is answered at once; refusals are audited once per client address and minute, with their count.",
			request: &request{contentType: "application/json", body: api.LoginRequest{}},
			responses: []response{
				{status: http.StatusOK, description: "Logged in; Set-Cookie carries the session", body: api.Session{}, headers: sessionCookieHeaders},
				errorResponse(http.StatusBadRequest, "The body or its key is missing or malformed (BAD_REQUEST)"),
				errorResponse(http.StatusUnauthorized, "The key is neither the root key nor an active API key (INVALID_KEY)"),
				errorResponse(http.StatusRequestEntityTooLarge, "Body over 64 KiB (PAYLOAD_TOO_LARGE)"),
				errorResponse(http.StatusServiceUnavailable, "The runtime is starting (NOT_READY), or the key store's primary is unreachable in sync mode (KEY_STORE_UNAVAILABLE)"),
			},
			handle: a.login,
		},
		{
			method: "DELETE", path: "/admin/session", id: "logout", tag: "session", public: true,
			summary: "End the session and clear its cookie",
			description: "Ends the session of every session cookie the request carries on the server, so a copy of a cookie no longer works, and clears the cookies. " +
				"Always succeeds (idempotent). Subject to the CSRF rule.",
			responses: []response{
				{status: http.StatusNoContent, description: "Logged out; Set-Cookie clears the session", headers: sessionCookieHeaders},
				errorResponse(http.StatusServiceUnavailable, "The runtime is starting (NOT_READY), or the key store's primary is unreachable in sync mode (KEY_STORE_UNAVAILABLE)"),
			},
			handle: a.logout,
		},
		{
			method: "GET", path: "/admin/sessions", id: "listSessions", tag: "session",
			summary:     "The caller's own live sessions",
			description: "The sessions of the key the request authenticates with (for the root key: those begun with the current root key), oldest first; tokens are never shown.",
			responses:   []response{{status: http.StatusOK, description: "The sessions", body: api.SessionList{}}},
			handle:      a.listSessions,
		},
		{
			method: "DELETE", path: "/admin/sessions", id: "endOtherSessions", tag: "session",
			summary: "End all of the caller's other sessions",
			description: "Ends every live session of the key the request authenticates with (for the root key: those begun with the current root key) " +
				"except the session the request came with, which goes on; through a header credential, which has no session, it ends them all. " +
				"Takes effect on the next request of each (in sync mode, on other instances within the sync interval). Audited as session.end_others with the count.",
			responses: []response{
				{status: http.StatusOK, description: "Ended; ended is how many (0 when there was none)", body: api.SessionsEnded{}},
			},
			handle: a.endOtherSessions,
		},
		{
			method: "DELETE", path: "/admin/sessions/{id}", id: "endSession", tag: "session",
			summary:     "End one of the caller's own sessions",
			description: "Takes effect on the next request. Ending the session the request came with also clears its cookies.",
			responses: []response{
				{status: http.StatusOK, description: "Ended", body: api.Success{}, headers: sessionCookieHeaders},
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
func (a *sessionsAPI) getSession(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r.Context())
	body := p.Memo().Load()
	if body == nil {
		answer := api.Session{Authenticated: true, Principal: principal(p)}
		if rec, ok := sessionOf(r.Context()); ok {
			answer.Session = sessionRecord(rec, rec.ID)
		}
		body = envelope.EncodeJSON(answer)
		p.Memo().Store(body)
	}
	envelope.WriteEncoded(w, http.StatusOK, body)
	return nil
}

func (a *sessionsAPI) login(w http.ResponseWriter, r *http.Request) error {
	var req api.LoginRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Key == nil || strings.TrimSpace(*req.Key) == "" {
		return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, `send the key as {"key": "…"}`)
	}
	p, err := a.resolve(r.Context(), strings.TrimSpace(*req.Key))
	if errors.Is(err, keystore.ErrInvalidKey) {
		a.refusedLogins.add(r)
		return refused("login", envelope.Errorf(http.StatusUnauthorized, CodeInvalidKey, "the key is neither the root key nor an active API key"))
	}
	if err != nil {
		return err
	}
	store, err := a.keyStore()
	if err != nil {
		return err
	}
	var entry keystore.AuditEntry
	token, sess, err := store.Sessions.Create(r.Context(), keystore.NewSession{
		Principal: p, RootKey: a.rootKey, TTL: a.sessionTTL, UserAgent: r.UserAgent(),
		Audit: func(s keystore.SessionRecord) keystore.AuditEntry {
			entry = successEntry(r, "session.login", p.Name, &p, zap.Int64("session", s.ID))
			return entry
		}})
	if err != nil {
		return err
	}
	a.logAudit(entry, zap.Int64("session", sess.ID))
	setSessionCookies(w, r, encodeCookieValue(token), int(sess.ExpiresAt-sess.CreatedAt))
	envelope.WriteJSON(w, http.StatusOK, api.Session{Authenticated: true, Principal: principal(p), Session: sessionRecord(sess, sess.ID)})
	return nil
}

func (a *sessionsAPI) logout(w http.ResponseWriter, r *http.Request) error {
	var actor *keystore.Principal
	if cred := credentialOf(r); cred.present && !cred.duplicate {
		if p, _, err := a.resolveCredential(r.Context(), cred); err == nil {
			actor = &p
		}
	}
	// Every session a cookie of the request names ends: the request's own, and one another
	// host's page planted, which is then worthless wherever it is left.
	for _, token := range sessionTokens(r) {
		store, err := a.keyStore()
		if err != nil {
			return err
		}
		if err := store.Sessions.EndToken(r.Context(), token); err != nil {
			return err
		}
	}
	a.audit(r, "session.logout", "", "success", actor)
	setSessionCookies(w, r, "", 0)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// sessionTokens are the session tokens among the request's session cookies.
func sessionTokens(r *http.Request) []string {
	var tokens []string
	for _, c := range r.Cookies() {
		if c.Name != SessionCookie && c.Name != HostSessionCookie {
			continue
		}
		if token := decodeCookieValue(c.Value); strings.HasPrefix(token, keystore.SessionPrefix) && !slices.Contains(tokens, token) {
			tokens = append(tokens, token)
		}
	}
	return tokens
}

func (a *sessionsAPI) listSessions(w http.ResponseWriter, r *http.Request) error {
	store, err := a.keyStore()
	if err != nil {
		return err
	}
	list, err := store.Sessions.List(r.Context(), principalOf(r.Context()), a.rootKey)
	if err != nil {
		return err
	}
	var current int64 // no session: the credential came in a header
	if rec, ok := sessionOf(r.Context()); ok {
		current = rec.ID
	}
	out := api.SessionList{Sessions: make([]api.SessionRecord, len(list))}
	for i, rec := range list {
		out.Sessions[i] = *sessionRecord(rec, current)
	}
	envelope.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (a *sessionsAPI) endSession(w http.ResponseWriter, r *http.Request) error {
	store, id, err := a.storeAndID(r, "session")
	if err != nil {
		return err
	}
	p := principalOf(r.Context())
	err = store.Sessions.End(r.Context(), p, a.rootKey, id)
	if errors.Is(err, keystore.ErrSessionNotFound) {
		return envelope.Errorf(http.StatusNotFound, CodeSessionNotFound, "no live session %d of yours; GET %s/admin/sessions lists them", id, a.prefix)
	}
	if err != nil {
		return err
	}
	a.audit(r, "session.end", "session #"+strconv.FormatInt(id, 10), "success", &p)
	if current, ok := sessionOf(r.Context()); ok && current.ID == id {
		setSessionCookies(w, r, "", 0)
	}
	envelope.WriteJSON(w, http.StatusOK, api.Success{Success: true})
	return nil
}

func (a *sessionsAPI) endOtherSessions(w http.ResponseWriter, r *http.Request) error {
	store, err := a.keyStore()
	if err != nil {
		return err
	}
	var keep int64 // a header credential has no session to keep
	if current, ok := sessionOf(r.Context()); ok {
		keep = current.ID
	}
	p := principalOf(r.Context())
	n, err := store.Sessions.EndOthers(r.Context(), p, a.rootKey, keep)
	if err != nil {
		return err
	}
	a.audit(r, "session.end_others", p.Name, "success", &p, zap.Int("ended", n))
	answer := api.SessionsEnded{Success: true}
	answer.Data.Ended = n
	envelope.WriteJSON(w, http.StatusOK, answer)
	return nil
}

// setSessionCookies sets the session cookies to value for maxAge seconds, or clears them
// (maxAge 0): SessionCookie as the spec has it, and over HTTPS HostSessionCookie too. When the
// request carries runtime_api_key cookies that the runtime may not have set, it also expires
// every one of them it can name (see tossedCookieClears).
func setSessionCookies(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	secure := trace.HTTPS(r)
	h := w.Header()
	h.Add("Set-Cookie", cookieLine(SessionCookie, value, maxAge, "/", "", secure))
	if secure {
		h.Add("Set-Cookie", cookieLine(HostSessionCookie, value, maxAge, "/", "", true))
	}
	if mayBeTossed(r) {
		h["Set-Cookie"] = append(h["Set-Cookie"], tossedCookieClears(r, secure)...)
	}
}

// cookieLine renders a Set-Cookie value of a session cookie for path and domain ("" for the
// host only); maxAge 0 clears it.
func cookieLine(name, value string, maxAge int, path, domain string, secure bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s=%s; Max-Age=%d; Path=%s", name, value, maxAge, path)
	if domain != "" {
		b.WriteString("; Domain=" + domain)
	}
	if maxAge > 0 {
		b.WriteString("; HttpOnly")
	}
	if secure {
		b.WriteString("; Secure")
	}
	b.WriteString("; SameSite=Strict")
	return b.String()
}

// mayBeTossed reports whether the request carries a runtime_api_key cookie that the runtime
// may not have set: more than one, or one that is not the copy of the __Host- cookie. Over
// plain HTTP, where no __Host- cookie exists, any one may be.
func mayBeTossed(r *http.Request) bool {
	cookies := r.CookiesNamed(SessionCookie)
	if len(cookies) != 1 {
		return len(cookies) > 1
	}
	own, err := r.Cookie(HostSessionCookie)
	return err != nil || own.Value != cookies[0].Value
}

// tossedCookieClears returns Set-Cookie lines that expire every runtime_api_key cookie this
// request could carry other than the runtime's own (host-only, Path=/): one set by a page of
// another host for a parent domain down to the registrable one (public suffix list), or by
// any page for a path the request's path lies under. A browser sends neither the domain nor
// the path of a cookie, and clears one only when both are named, so every pair is named.
// Cookies on paths the request does not reach stay; the DUPLICATE_SESSION_COOKIE message
// says to clear the site's cookies then.
func tossedCookieClears(r *http.Request, secure bool) []string {
	domains := []string{""} // host-only
	host := strings.TrimSuffix(strings.ToLower(hostWithoutPort(r.Host)), ".")
	if site, err := publicsuffix.EffectiveTLDPlusOne(host); err == nil && net.ParseIP(host) == nil {
		for d := host; ; {
			domains = append(domains, d)
			if d == site {
				break
			}
			_, d, _ = strings.Cut(d, ".")
		}
	}
	var lines []string
	for _, domain := range domains {
		for _, path := range cookiePaths(mount.Path(r.Context()) + r.URL.EscapedPath()) {
			if domain == "" && path == "/" {
				continue // the runtime's own, which the caller sets or clears
			}
			lines = append(lines, cookieLine(SessionCookie, "", 0, path, domain, secure))
		}
	}
	return lines
}

// cookiePaths are the cookie paths whose cookies a browser sends with a request for p: "/",
// each leading part of p ending before or at a slash, and p itself.
func cookiePaths(p string) []string {
	paths := []string{"/"}
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			paths = append(paths, p[:i], p[:i+1])
		}
	}
	if p != "/" && !strings.HasSuffix(p, "/") {
		paths = append(paths, p)
	}
	return paths
}

// hostWithoutPort is a Host header's host name.
func hostWithoutPort(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return strings.Trim(host, "[]")
	}
	return strings.Trim(hostport, "[]")
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

// principal is the API's record of p.
func principal(p keystore.Principal) api.Principal {
	return api.Principal{ID: p.ID, Name: p.Name, KeyPrefix: p.KeyPrefix, Role: p.Role, Permissions: p.Permissions,
		Namespaces: p.Namespaces, IsRoot: p.IsRoot, ExpiresAt: p.ExpiresAt}
}

// sessionRecord is the API's record of s, current when it is the session with id current.
func sessionRecord(s keystore.SessionRecord, current int64) *api.SessionRecord {
	return &api.SessionRecord{ID: s.ID, CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt, LastSeenAt: s.LastSeenAt,
		UserAgent: s.UserAgent, Current: s.ID == current}
}
