package pluginhost

import (
	"errors"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/serving"
	"github.com/caddy-runtime/runtime/internal/trace"
)

// Exemptions is what the data plane asks of the runtime's authentication (the management API)
// before the hooks: whether a request carries a valid header credential (X-API-Key or
// Authorization: Bearer, the root key included), which exempts it from onRequest hooks. A
// cookie session does not, so browser traffic keeps going through them.
type Exemptions interface {
	SkipsHooks(r *http.Request) bool
}

// Chain is the path of a request for uploaded code.
type Chain struct {
	Plugins *Host
	Workers *serving.Server
	Exempt  Exemptions
	Logger  *zap.Logger
}

// Serve serves a request with what was uploaded: it goes through the plugins' onRequest hooks
// (unless it carries a valid header credential) and then to the plugin whose base is its
// first path segment, else to a worker. None of them sees the runtime's credentials: once the
// header credential has decided on the hooks, they are stripped from the request itself, since
// Caddy's placeholders read the request the server received; X-Real-IP is the runtime's (see
// serving.Server.Prepare). None of them sets or clears a session cookie either: they all answer
// through the guarded writer (serving.Server.Guard), so a request walks one way, from here to
// serving, which never calls back.
//
// An error answer (no such worker, a worker down, a failing hook or plugin route) is returned,
// not written, for the Caddy glue to write or to hand to the site's error routes.
func (c *Chain) Serve(w http.ResponseWriter, r *http.Request) *envelope.Error {
	t := c.Plugins.acquire()
	if t != nil {
		defer t.release()
	}
	hooks := t != nil && len(t.hooks) > 0 && !c.Exempt.SkipsHooks(r)
	c.Workers.Prepare(r)
	w, done := c.Workers.Guard(w)
	defer done()
	return c.serve(w, r, t, hooks)
}

// serve is Serve past the preparation, w the guarded writer: through the hooks of t if hooks,
// then a plugin route of t, else a worker.
func (c *Chain) serve(w http.ResponseWriter, r *http.Request, t *pluginTable, hooks bool) *envelope.Error {
	if t == nil {
		return c.Workers.Serve(w, r)
	}
	dispatch := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if routes, ok := t.bases[first]; ok && !c.Workers.Hosted(r) {
			return routes.ServeHTTP(w, r)
		}
		if answer := c.Workers.Serve(w, r); answer != nil {
			return answer
		}
		return nil
	})
	var err error
	if hooks {
		err = t.runHooks(w, r, dispatch, c.Logger)
	} else {
		err = dispatch.ServeHTTP(w, r)
	}
	var (
		answer *envelope.Error
		he     *hookError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &answer):
		return answer
	case errors.As(err, &he):
		c.Logger.Warn("onRequest hook failed", zap.String("plugin", he.plugin), zap.String("request_id", trace.RequestID(r.Context())), zap.Error(he.err))
		return envelope.Errorf(http.StatusServiceUnavailable, "PLUGIN_ONREQUEST_FAILED",
			"plugin %s could not handle the request before it was served; try again later", he.plugin)
	}
	id := trace.RequestID(r.Context())
	answer = pluginError(err, id)
	level := zap.DebugLevel // a 404 of a file_server is routine
	if answer.Status >= 500 {
		level = zap.WarnLevel
	}
	c.Logger.Log(level, "plugin route error", zap.Int("status", answer.Status), zap.String("request_id", id), zap.Error(err))
	return answer
}
