package handlers

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"runtime/debug"
	"time"

	"go.uber.org/zap"
)

// RequestIDHeader carries the correlation id of a request and its response.
const RequestIDHeader = "X-Request-Id"

type requestIDKey struct{}

// RequestID returns the correlation id of the request being served, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// WithRequestID echoes a well-formed incoming X-Request-Id, or generates one, on the request
// (header and context) and the response, before anything else can answer.
func WithRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, EnsureRequestID(w, r))
	})
}

// EnsureRequestID gives the request a correlation id, unless an outer layer already did, and
// sets it on the response; it returns the request carrying the id in its context.
func EnsureRequestID(w http.ResponseWriter, r *http.Request) *http.Request {
	if RequestID(r.Context()) != "" {
		return r
	}
	id := r.Header.Get(RequestIDHeader)
	if !validRequestID(id) {
		id = rand.Text()
		r.Header.Set(RequestIDHeader, id)
	}
	w.Header().Set(RequestIDHeader, id)
	return r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
}

// validRequestID accepts ids of up to 128 characters from a conservative set, so a client
// cannot inject anything odd into logs or downstream headers.
func validRequestID(id string) bool {
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

// statusWriter records the status and size of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// withAccessLog logs one line per request, and turns a panic into a logged 500 envelope.
func withAccessLog(logger *zap.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(v)
				}
				logger.Error("panic serving API request",
					zap.String("request_id", RequestID(r.Context())),
					zap.Any("panic", v),
					zap.ByteString("stack", debug.Stack()))
				if sw.status == 0 {
					WriteError(sw, Errorf(http.StatusInternalServerError, CodeInternal,
						"internal error; report request id %s to the operator", RequestID(r.Context())))
				}
			}
			fields := []zap.Field{
				zap.String("request_id", RequestID(r.Context())),
				zap.String("method", r.Method),
				zap.String("path", r.URL.Path),
				zap.Int("status", sw.status),
				zap.Duration("duration", time.Since(start)),
				zap.Int64("bytes", sw.bytes),
				zap.String("remote", r.RemoteAddr),
			}
			if sw.status >= 500 {
				logger.Error("api request", fields...)
			} else {
				logger.Info("api request", fields...)
			}
		}()
		next.ServeHTTP(sw, r)
	})
}
