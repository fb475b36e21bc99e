package handlers

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/trace"
	"github.com/caddy-runtime/runtime/keystore"
)

// Request headers with a meaning for authentication.
const (
	APIKeyHeader   = "X-API-Key"
	InternalHeader = "X-Runtime-Internal"
)

// Error codes of authentication and authorization.
const (
	CodeAuthRequired     = "AUTH_REQUIRED"
	CodeInvalidKey       = "INVALID_KEY"
	CodePermissionDenied = "PERMISSION_DENIED"
	CodeNamespaceDenied  = "NAMESPACE_DENIED"
	CodeCSRFRejected     = "CSRF_REJECTED"
	// CodeDuplicateSessionCookie refuses a request whose session cookies disagree on which
	// session they mean.
	CodeDuplicateSessionCookie = "DUPLICATE_SESSION_COOKIE"
)

// credential is the key or session token a request presents and the channel it came by.
type credential struct {
	key      string
	fromHead bool // X-API-Key or Authorization: Bearer; else a session cookie
	present  bool
	// duplicate: the request carries more than one runtime_api_key cookie and neither a
	// header credential nor the __Host- cookie, so which session it means cannot be told.
	duplicate bool
}

// credentialOf extracts the request's credential: X-API-Key, then Authorization: Bearer,
// then the session cookie (see cookieCredential). A header credential wins even when it is
// invalid, so a bad header never falls back to a cookie.
func credentialOf(r *http.Request) credential {
	if values, ok := r.Header[http.CanonicalHeaderKey(APIKeyHeader)]; ok {
		return credential{key: strings.TrimSpace(values[0]), fromHead: true, present: true}
	}
	if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		return credential{key: strings.TrimSpace(token), fromHead: true, present: true}
	}
	return cookieCredential(r)
}

// cookieCredential is the request's session cookie, decoded: the __Host- cookie when there is
// one, since only the API's own host can have set it, else the runtime_api_key cookie. Two
// runtime_api_key cookies or more (a page of another host of the site can add one for the
// parent domain, which the browser may send first) are a duplicate, never a guess.
func cookieCredential(r *http.Request) credential {
	if c, err := r.Cookie(HostSessionCookie); err == nil {
		return credential{key: decodeCookieValue(c.Value), present: true}
	}
	cookies := r.CookiesNamed(SessionCookie)
	switch len(cookies) {
	case 0:
		return credential{}
	case 1:
		return credential{key: decodeCookieValue(cookies[0].Value), present: true}
	}
	return credential{present: true, duplicate: true}
}

// callerKey holds a request's *caller in its context.
type callerKey struct{}

// caller is who an authenticated request runs as: one context value for both.
type caller struct {
	principal keystore.Principal
	session   *keystore.SessionRecord // nil unless the credential is a session
}

// principalOf returns the principal an authenticated route runs as.
func principalOf(ctx context.Context) keystore.Principal {
	if c, ok := ctx.Value(callerKey{}).(*caller); ok {
		return c.principal
	}
	return keystore.Principal{}
}

// sessionOf returns the session an authenticated route runs in, if its credential is one.
func sessionOf(ctx context.Context) (keystore.SessionRecord, bool) {
	if c, ok := ctx.Value(callerKey{}).(*caller); ok && c.session != nil {
		return *c.session, true
	}
	return keystore.SessionRecord{}, false
}

// authorize runs the pipeline in front of a route: CSRF on mutating methods, then (unless the
// route is public) the credential, where a cookie must come from the runtime's own pages, the
// root key, the store and the route's permission.
func (a *pipeline) authorize(rt route, r *http.Request) (*http.Request, error) {
	if rt.public && !mutating(r.Method) {
		return r, nil // nothing to check: no credential is read
	}
	cred := credentialOf(r)
	if mutating(r.Method) {
		if err := a.checkCSRF(r, cred); err != nil {
			return r, err
		}
	}
	if rt.public {
		return r, nil
	}
	if cred.present && !cred.fromHead {
		if err := checkFetchSite(r); err != nil {
			return r, err
		}
	}
	p, sess, err := a.authenticate(r.Context(), cred)
	if err != nil {
		return r, err
	}
	logPrincipal(r.Context(), p)
	if rt.permission != "" && !p.Has(rt.permission) {
		return r, envelope.Errorf(http.StatusForbidden, CodePermissionDenied,
			"this key lacks permission %s; ask an admin for a key that holds it", rt.permission)
	}
	c := &caller{principal: p}
	if sess != nil {
		copied := *sess // the request's own copy, whatever the store does with its record
		c.session = &copied
	}
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, c)), nil
}

// logPrincipal puts who a request runs as on its access log line: the key's id and prefix,
// id 0 and prefix "root" for the root key. Never the secret.
func logPrincipal(ctx context.Context, p keystore.Principal) {
	trace.LogField(ctx, zap.Int64("key_id", p.ID))
	trace.LogField(ctx, zap.String("key_prefix", p.KeyPrefix))
}

// authenticate resolves a credential to its principal, and its session when it is one.
func (a *pipeline) authenticate(ctx context.Context, cred credential) (keystore.Principal, *keystore.SessionRecord, error) {
	if !cred.present {
		return keystore.Principal{}, nil, refused("missing_credential", envelope.Errorf(http.StatusUnauthorized, CodeAuthRequired,
			"an API key is required: send it in X-API-Key or Authorization: Bearer, or log in with POST %s/admin/session", a.prefix))
	}
	if cred.duplicate {
		return keystore.Principal{}, nil, refused("duplicate_cookie", envelope.Errorf(http.StatusUnauthorized, CodeDuplicateSessionCookie,
			"the request carries more than one %s cookie, so whose session it is cannot be told (a page of another host of this site may have set one); "+
				"sign out, which clears them, or clear this site's cookies in the browser, then sign in again", SessionCookie))
	}
	p, sess, err := a.resolveCredential(ctx, cred)
	switch {
	case errors.Is(err, keystore.ErrInvalidKey) && cred.fromHead:
		return p, nil, refused("invalid_key", envelope.Errorf(http.StatusUnauthorized, CodeAuthRequired, "the API key is unknown, revoked or expired"))
	case errors.Is(err, keystore.ErrInvalidKey):
		return p, nil, refused("invalid_session", envelope.Errorf(http.StatusUnauthorized, CodeAuthRequired,
			"the session has ended or expired, or its key was revoked; log in again with POST %s/admin/session", a.prefix))
	}
	return p, sess, err
}

// refusal is a refused credential, with the reason the metrics count it under.
type refusal struct {
	err    *envelope.Error
	reason string
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// refused marks err, a refused credential, with the reason the metrics count it under.
func refused(reason string, err *envelope.Error) error { return &refusal{err: err, reason: reason} }

// refusalReason is the reason err refused a request for its credential or its reach, or ""
// for any other error; apiErr is the answer it gives.
func refusalReason(err error, apiErr *envelope.Error) string {
	if r, ok := err.(*refusal); ok {
		return r.reason
	}
	switch apiErr.Code {
	case CodeAuthRequired:
		return "invalid_key"
	case CodeCSRFRejected:
		return "csrf"
	case CodePermissionDenied:
		return "permission"
	case CodeNamespaceDenied:
		return "namespace"
	}
	return ""
}

// resolveCredential turns a credential into its principal: a cookie is looked up as a
// session token first, then (as older clients store the key itself) as a key. Unknown
// credentials give keystore.ErrInvalidKey.
func (a *pipeline) resolveCredential(ctx context.Context, cred credential) (keystore.Principal, *keystore.SessionRecord, error) {
	if !cred.fromHead && strings.HasPrefix(cred.key, keystore.SessionPrefix) {
		store, err := a.keyStore()
		if err != nil {
			return keystore.Principal{}, nil, err
		}
		p, sess, err := store.Sessions.Verify(ctx, cred.key, a.rootKey)
		if err == nil {
			return p, &sess, nil
		}
		if !errors.Is(err, keystore.ErrInvalidSession) {
			return p, nil, err
		}
	}
	p, err := a.resolve(ctx, cred.key)
	return p, nil, err
}

// resolve turns a key into its principal: the root key first, in constant time, then the
// store. Unknown keys give keystore.ErrInvalidKey.
func (a *pipeline) resolve(ctx context.Context, key string) (keystore.Principal, error) {
	if a.isRoot(key) {
		return keystore.Root(), nil
	}
	store, err := a.keyStore()
	if err != nil {
		return keystore.Principal{}, err
	}
	return store.Verify(ctx, key)
}

// isRoot compares key with the root key in constant time; hashing first hides the length.
func (a *pipeline) isRoot(key string) bool {
	if a.rootHash == nil || key == "" {
		return false
	}
	sum := sha256.Sum256([]byte(key))
	return subtle.ConstantTimeCompare(sum[:], a.rootHash) == 1
}

func mutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// checkCSRF requires a mutating request to carry an Origin naming this host. Exempt: requests
// marked X-Runtime-Internal (a browser cannot send that header cross-site without a CORS
// preflight, which the runtime never grants) and requests whose header credential is the root
// key (never held by a browser).
func (a *pipeline) checkCSRF(r *http.Request, cred credential) error {
	if strings.EqualFold(r.Header.Get(InternalHeader), "true") || cred.fromHead && a.isRoot(cred.key) {
		return nil
	}
	origins := r.Header.Values("Origin")
	reject := func(format string, args ...any) error {
		return envelope.Errorf(http.StatusForbidden, CodeCSRFRejected, format, args...)
	}
	switch {
	case len(origins) == 0:
		return reject("%s needs an Origin header naming this server (e.g. Origin: http://%s); browsers send it themselves", r.Method, r.Host)
	case len(origins) > 1:
		return reject("more than one Origin header")
	case origins[0] == "null":
		return reject("Origin null is refused")
	}
	u, err := url.Parse(origins[0])
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return reject("Origin %q is not an http(s) origin", origins[0])
	}
	if !sameHost(u.Scheme, u.Host, r.Host) {
		return reject("Origin %s does not match the host %s", origins[0], r.Host)
	}
	return nil
}

// checkFetchSite refuses a cookie session on a request that a browser marks as coming from
// anywhere but a page of the API's own origin: a worker page on another host of the same
// site, another site, or a URL typed in. Browsers set Sec-Fetch-Site themselves and pages
// cannot forge it; clients that send none (curl, scripts) are not browsers riding a session.
func checkFetchSite(r *http.Request) error {
	for _, site := range r.Header.Values("Sec-Fetch-Site") {
		if site != "same-origin" {
			return envelope.Errorf(http.StatusForbidden, CodeCSRFRejected,
				"the session cookie is accepted only from pages of this origin, and the browser says this request comes from elsewhere (Sec-Fetch-Site: %s); "+
					"use the cpanel, or send a key in X-API-Key or Authorization: Bearer", site)
		}
	}
	return nil
}

// sameHost compares an origin's host[:port] with the Host header, treating the scheme's
// default port as absent.
func sameHost(scheme, originHost, host string) bool {
	return strings.EqualFold(withoutDefaultPort(scheme, originHost), withoutDefaultPort(scheme, host))
}

func withoutDefaultPort(scheme, hostport string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return hostport
}

// HoldsCredential reports whether s holds one of the runtime's credentials (a key, a session
// token or the root key, valid or not) anywhere in it, which must not reach uploaded code
// whatever header carries it: a key's or a token's prefix, or the whole root key.
func (a *API) HoldsCredential(s string) bool {
	return strings.Contains(s, keystore.KeyPrefix) || strings.Contains(s, keystore.SessionPrefix) ||
		a.rootKey != "" && strings.Contains(s, a.rootKey)
}

// SkipsHooks reports whether a request carries a valid header credential (X-API-Key or
// Authorization: Bearer, the root key included), which exempts it from plugin onRequest hooks.
// A cookie session does not, so browser traffic keeps going through them.
func (a *API) SkipsHooks(r *http.Request) bool {
	cred := credentialOf(r)
	if !cred.fromHead || cred.key == "" {
		return false
	}
	_, err := a.resolve(r.Context(), cred.key)
	return err == nil
}

// authorizeUnit refuses a restricted key access to a unit outside its namespaces; routes call
// it with the worker or plugin name they act on.
func authorizeUnit(p keystore.Principal, unit string) error {
	if p.CanAccess(unit) {
		return nil
	}
	return envelope.Errorf(http.StatusForbidden, CodeNamespaceDenied,
		"this key may only act in namespaces %s; %q is outside them", strings.Join(p.Namespaces, ", "), unit)
}

// audit logs one security-relevant action with who did it, and stores it in the audit trail;
// it never records a secret. Its scope is the namespace of the unit target names, if any.
func (a *pipeline) audit(r *http.Request, action, target, outcome string, actor *keystore.Principal, extra ...zap.Field) {
	a.auditScoped(r, action, target, keystore.NamespaceOf(target), outcome, actor, extra...)
}

// auditScoped audits an action about the namespace scope ("" for none).
func (a *pipeline) auditScoped(r *http.Request, action, target, scope, outcome string, actor *keystore.Principal, extra ...zap.Field) {
	a.record(r.Context(), auditEntry(r, action, target, scope, outcome), actor, extra...)
}

// auditEntry is the entry of an action of r, without its actor and details (record adds them).
func auditEntry(r *http.Request, action, target, scope, outcome string) keystore.AuditEntry {
	return keystore.AuditEntry{Action: action, Target: target, Scope: scope, Outcome: outcome,
		RequestID: trace.RequestID(r.Context()), RemoteAddr: trace.ClientAddr(r)}
}

// record logs an audit line for e, with extra as its details, and stores e in the audit
// trail; ctx is the context of the request it is about, if any.
func (a *pipeline) record(ctx context.Context, e keystore.AuditEntry, actor *keystore.Principal, extra ...zap.Field) {
	e = audited(e, actor, extra...)
	a.logAudit(e, extra...)
	a.storeAudit(ctx, e)
}

// audited is e with its actor and details (extra as JSON values): an entry ready to store,
// by storeAudit or by the key store in the transaction of the change it records.
func audited(e keystore.AuditEntry, actor *keystore.Principal, extra ...zap.Field) keystore.AuditEntry {
	if actor != nil {
		e.Actor = &keystore.AuditActor{ID: actor.ID, Name: actor.Name, KeyPrefix: actor.KeyPrefix}
	}
	e.Details = details(extra)
	return e
}

// successEntry is the entry of r's successful action on target (scoped as audit scopes it),
// for the key store to write in the transaction of the change itself; logAudit logs it once
// that committed.
func successEntry(r *http.Request, action, target string, actor *keystore.Principal, extra ...zap.Field) keystore.AuditEntry {
	return audited(auditEntry(r, action, target, keystore.NamespaceOf(target), "success"), actor, extra...)
}

// logAudit logs the audit line of e, with extra as its details.
func (a *pipeline) logAudit(e keystore.AuditEntry, extra ...zap.Field) {
	fields := []zap.Field{
		zap.String("action", e.Action),
		zap.String("target", e.Target),
		zap.String("outcome", e.Outcome),
		zap.String("request_id", e.RequestID),
	}
	if e.Actor != nil {
		fields = append(fields, zap.Dict("actor",
			zap.Int64("id", e.Actor.ID), zap.String("name", e.Actor.Name), zap.String("key_prefix", e.Actor.KeyPrefix)))
	}
	a.auditLog.Info("audit", append(fields, extra...)...)
}

// storeAudit writes an entry to the audit trail. A failure is logged and never fails the
// request: the action has happened.
func (a *pipeline) storeAudit(ctx context.Context, e keystore.AuditEntry) {
	store, err := a.keyStore()
	if err == nil {
		// Detached from the request: a client that leaves does not unwrite the action.
		err = store.Audit.Append(context.WithoutCancel(ctx), e)
	}
	if err != nil {
		a.logger.Error("storing an audit entry", zap.String("action", e.Action), zap.String("request_id", e.RequestID), zap.Error(err))
	}
}

// details are an audit line's extra fields as JSON values.
func details(fields []zap.Field) map[string]any {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	return enc.Fields
}
