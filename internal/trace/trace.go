// Package trace ties together what one request leaves behind: its correlation id, carried by
// the request, its answer and whatever serves it, and the fields of its access log line.
package trace

import (
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// RequestIDHeader carries the correlation id of a request and its response.
const RequestIDHeader = "X-Request-Id"

// requestKey holds a request's *request in its context.
type requestKey struct{}

// request is what a request's context carries for the package: one value, so that a host
// server adding log fields and the id costs one context.
type request struct {
	id     string
	client string // the client's address as the host judges it; "" for the connection's peer
	// trustedPeer: the host judged the connection's peer a proxy it trusts (in Caddy, one of
	// the server's trusted_proxies), whose X-Forwarded-* headers speak for the client.
	trustedPeer bool
	set         func(zap.Field) // outside Caddy: the host's; nil without an access log line

	// In a host server: the fields, put on the access log line as one inline field when it is written,
	// since each field added to ExtraLogFields costs an allocation of its own. buf holds the
	// usual few (id, principal, unit) in the same allocation as the request's state.
	inHost bool
	mu     sync.Mutex
	fields []zap.Field
	buf    [4]zap.Field
}

// add sets field among the request's own log fields, replacing one of the same key.
func (st *request) add(field zap.Field) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i := range st.fields {
		if st.fields[i].Key == field.Key {
			st.fields[i] = field
			return
		}
	}
	st.fields = append(st.fields, field)
}

// MarshalLogObject writes the request's own log fields, as the access log line is written.
func (st *request) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, f := range st.fields {
		f.AddTo(enc)
	}
	return nil
}

// varsKey holds a request's *request among the host server's per-request vars, which a
// request served by Caddy already carries: attaching there copies no request and makes no
// context.
const varsKey = "runtime.trace"

// hostVars is the context key under which the host server keeps a request's vars
// (map[string]any), nil outside one; see UseHostVars.
var hostVars any

// UseHostVars names the context key of the host server's per-request vars (in Caddy,
// caddyhttp.VarsCtxKey), so the package can keep its state there; call it once, at init.
func UseHostVars(key any) { hostVars = key }

func from(ctx context.Context) *request {
	if hostVars != nil {
		if vars, ok := ctx.Value(hostVars).(map[string]any); ok {
			if st, ok := vars[varsKey].(*request); ok {
				return st
			}
		}
	}
	st, _ := ctx.Value(requestKey{}).(*request)
	return st
}

// RequestID returns the correlation id of the request being served, or "".
func RequestID(ctx context.Context) string {
	if st := from(ctx); st != nil {
		return st.id
	}
	return ""
}

// WithLogFields returns ctx carrying set, which puts a field on the request's access log
// line, replacing one of the same key. The host server fills it (in Caddy, with the
// request's ExtraLogFields), so one line per request says who asked and what served it; the
// runtime writes no access log of its own.
func WithLogFields(ctx context.Context, set func(zap.Field)) context.Context {
	return context.WithValue(ctx, requestKey{}, &request{set: set})
}

// Attach prepares a request served by a host server for the package without copying it: the
// request's state sits among its vars (the value under the key UseHostVars named), and when
// addLineField is set, its log fields go onto the host's access log line as one inline field,
// written with the line (in Caddy, the request's ExtraLogFields.Add, as caddyauth puts the
// user id there); clientAddr is the client's address as the host server judges it ("" for the
// connection's peer), and trustedPeer whether it trusts the peer as a proxy.
func Attach(vars map[string]any, addLineField func(zap.Field), clientAddr string, trustedPeer bool) {
	st := &request{client: clientAddr, trustedPeer: trustedPeer}
	if addLineField != nil {
		st.inHost = true
		st.fields = st.buf[:0]
		addLineField(zap.Inline(st))
	}
	vars[varsKey] = st
}

// LogField puts field on the access log line of the request of ctx, if it has one.
func LogField(ctx context.Context, field zap.Field) {
	st := from(ctx)
	switch {
	case st == nil:
	case st.inHost:
		st.add(field)
	case st.set != nil:
		st.set(field)
	}
}

// WithRequestID echoes a well-formed incoming X-Request-Id, or generates one, on the request
// (header and context) and the response, before anything else can answer.
func WithRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, EnsureRequestID(w, r, nil))
	})
}

// EnsureRequestID gives the request a correlation id, unless an outer layer already did, sets
// it on the response and the access log line, and returns the request carrying it in its
// context. A well-formed incoming X-Request-Id is kept; otherwise the id is newID's (in Caddy,
// the request's {http.request.uuid}), or a random one when newID is nil or gives "".
func EnsureRequestID(w http.ResponseWriter, r *http.Request, newID func() string) *http.Request {
	st := from(r.Context())
	if st != nil && st.id != "" {
		return r
	}
	id := r.Header.Get(RequestIDHeader)
	if !ValidRequestID(id) {
		id = ""
		if newID != nil {
			id = newID()
		}
		if id == "" {
			id = rand.Text()
		}
		r.Header.Set(RequestIDHeader, id)
	}
	w.Header().Set(RequestIDHeader, id)
	if st != nil { // the request's own value, made by WithLogFields: no new context needed
		st.id = id
		LogField(r.Context(), zap.String("request_id", id))
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), requestKey{}, &request{id: id}))
}

// ClientAddr is the address of the client that sent r, without a port: the one the host server
// gave Attach (in Caddy, the request's client IP, which is the address a proxy in the server's
// trusted_proxies forwarded in X-Forwarded-For, and otherwise the connection's peer); else the
// connection's peer.
func ClientAddr(r *http.Request) string {
	if st := from(r.Context()); st != nil && st.client != "" {
		return st.client
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// HTTPS reports whether the client reached the runtime over HTTPS: the connection is TLS, or
// its peer is a proxy the host server trusts (Attach) and the first X-Forwarded-Proto value
// it sent says https. Any other client's X-Forwarded-Proto is its own word and is ignored, so
// a plain-HTTP client cannot ask for what only HTTPS gets (a Secure or __Host- cookie).
func HTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	st := from(r.Context())
	if st == nil || !st.trustedPeer {
		return false
	}
	first, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(first), "https")
}

// ValidRequestID accepts ids of up to 128 characters from a conservative set, so a client
// cannot inject anything odd into logs or downstream headers.
func ValidRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range []byte(id) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == ':' || c == '+' || c == '=' || c == '/'
		if !ok {
			return false
		}
	}
	return true
}

// StatusRecorder is a ResponseWriter that records the status of the answer: 0 until it
// starts.
type StatusRecorder struct {
	http.ResponseWriter
	Status int
}

// WriteHeader records the first status written.
func (w *StatusRecorder) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *StatusRecorder) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// ReadFrom keeps the underlying writer's io.ReaderFrom (sendfile for static files) in reach.
func (w *StatusRecorder) ReadFrom(r io.Reader) (int64, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return io.Copy(w.ResponseWriter, r)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *StatusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
