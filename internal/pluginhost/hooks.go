package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/envelope"
)

// hookRun is one request's pass through the hooks; it lives in the request's context, so the
// hooks' handler chains, compiled once, can go on to the next hook.
type hookRun struct {
	t      *pluginTable
	final  caddyhttp.Handler
	passed []bool // passed[i]: hook i handed the request on
	logger *zap.Logger
}

type hookRunKey struct{}

// hookNext ends hook i's handler chain: the hook handed the request on, so the next one runs.
type hookNext struct{ i int }

func (n hookNext) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	run := r.Context().Value(hookRunKey{}).(*hookRun)
	run.passed[n.i] = true
	return run.from(w, r, n.i+1)
}

// hookError is an error a hook itself returned, as opposed to one from what it wraps.
type hookError struct {
	plugin string
	err    error
}

func (e *hookError) Error() string { return fmt.Sprintf("plugin %s: onRequest: %v", e.plugin, e.err) }

// runHooks runs the hooks in load order, then final. A hook that answers ends the request
// there; one that fails ends it with a hookError, unless its plugin chose to fail open.
func (t *pluginTable) runHooks(w http.ResponseWriter, r *http.Request, final caddyhttp.Handler, logger *zap.Logger) error {
	run := &hookRun{t: t, final: final, passed: make([]bool, len(t.hooks)), logger: logger}
	return run.from(w, r.WithContext(context.WithValue(r.Context(), hookRunKey{}, run)), 0)
}

func (run *hookRun) from(w http.ResponseWriter, r *http.Request, i int) error {
	for ; i < len(run.t.hooks); i++ {
		h := run.t.hooks[i]
		err := h.handler.ServeHTTP(w, r)
		if err == nil || run.passed[i] {
			return err // answered by the hook, or by what came after it
		}
		if !h.failOpen {
			return &hookError{plugin: h.plugin, err: err}
		}
		run.logger.Warn("onRequest hook failed; going on (fail open)", zap.String("plugin", h.plugin), zap.Error(err))
	}
	return run.final.ServeHTTP(w, r)
}

// pluginError is the answer to an error a plugin route returned: its status and a message
// without the error's text, which for Caddy's handlers names a Go source line and the
// server's own file paths; the log has the text.
func pluginError(err error, requestID string) *envelope.Error {
	var he caddyhttp.HandlerError
	status := http.StatusInternalServerError
	if errors.As(err, &he) && he.StatusCode != 0 {
		status = he.StatusCode
	}
	if status >= 500 {
		return envelope.Errorf(status, "PLUGIN_ERROR", "the plugin route failed; report request id %s to the operator", requestID)
	}
	return envelope.Errorf(status, "PLUGIN_ERROR", "the plugin route answered %d %s", status, http.StatusText(status))
}
