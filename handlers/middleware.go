package handlers

import (
	"errors"
	"net/http"
	"runtime/debug"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/trace"
)

// withRecover turns a panic into a logged 500 envelope, unless the response had started.
func withRecover(logger *zap.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &trace.StatusRecorder{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v)
			}
			logger.Error("panic serving API request",
				zap.String("request_id", trace.RequestID(r.Context())),
				zap.Any("panic", v),
				zap.ByteString("stack", debug.Stack()))
			if sw.Status == 0 {
				envelope.Write(sw, envelope.Internal(trace.RequestID(r.Context())))
			}
		}()
		next.ServeHTTP(sw, r)
	})
}
