package handlers

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/metrics"
	"github.com/caddy-runtime/runtime/internal/mount"
	"github.com/caddy-runtime/runtime/internal/trace"
	"github.com/caddy-runtime/runtime/keystore"
)

// pipeline is the request pipeline every route goes through, and what the resources share
// behind it: waiting for the start, CSRF, the credential (root key, API keys, sessions), the
// route's permission, the error envelope, the metrics of each route and the audit trail. Each
// resource embeds it; it holds only what those steps use.
type pipeline struct {
	prefix   string                          // the API path
	logger   *zap.Logger                     // errors
	auditLog *zap.Logger                     // the audit lines
	rootKey  string                          // "" without one
	rootHash []byte                          // SHA-256 of the root key, nil without one
	keys     func() (*keystore.Store, error) // the key store, or why it is not open yet
	started  func(context.Context) error     // waits for the runtime's start; nil: no wait
	metrics  *metrics.Set                    // nil counts nothing
	// refusedLogins counts the refused sign-ins, audited once a minute per address.
	refusedLogins *refusalTally
}

// apiPath returns the API path as the client of r sees it, below the runtime's mount path.
func (a *pipeline) apiPath(r *http.Request) string { return mount.Path(r.Context()) + a.prefix }

// fullPath places an API-relative route path under the prefix; discovery stays at the root.
func (a *pipeline) fullPath(p string) string {
	if strings.HasPrefix(p, "/"+mount.WellKnownSegment+"/") {
		return p
	}
	return a.prefix + p
}

// handlerFunc is an API handler; a returned *envelope.Error is written as the envelope, any other error
// as a logged 500.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// unmatchedRoute is the route label of API requests no route matched.
const unmatchedRoute = "unmatched"

// endpoint runs a route behind the request pipeline, and counts its answers by the route's
// pattern (bounded, unlike the paths).
func (a *pipeline) endpoint(rt route) http.Handler {
	counter := a.metrics.Route(rt.method + " " + rt.path)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw, ok := w.(*trace.StatusRecorder) // withRecover's, unless a test serves the route alone
		if !ok {
			sw = &trace.StatusRecorder{ResponseWriter: w}
			w = sw
		}
		start := time.Now()
		defer func() {
			d := time.Since(start)
			if strings.HasPrefix(sw.Header().Get("Content-Type"), "text/event-stream") {
				d = -1 // a followed stream lasts as long as its reader stays
			}
			counter.Count(sw.Status, d)
		}()
		if !rt.probe {
			w.Header().Set("X-Content-Type-Options", "nosniff")
		}
		err := a.awaitStart(rt, r)
		if err == nil {
			r, err = a.authorize(rt, r)
		}
		if err == nil {
			err = checkWriteQuery(rt, r)
		}
		if err == nil {
			err = rt.handle(w, r)
		}
		if err == nil {
			return
		}
		var apiErr *envelope.Error
		switch {
		case errors.As(err, &apiErr):
		case errors.Is(err, keystore.ErrPrimaryUnavailable):
			// Sync mode: the write did not happen; the message names the primary, never its token.
			w.Header().Set("Retry-After", "5")
			apiErr = envelope.Errorf(http.StatusServiceUnavailable, CodeKeyStoreUnavailable, "%v; try again shortly", err)
		default:
			a.logger.Error("API request failed",
				zap.String("request_id", trace.RequestID(r.Context())), zap.Error(err))
			apiErr = envelope.Errorf(http.StatusInternalServerError, envelope.CodeInternal,
				"internal error; report request id %s to the operator", trace.RequestID(r.Context()))
		}
		if apiErr.Status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="runtime"`)
		}
		if reason := refusalReason(err, apiErr); reason != "" {
			a.metrics.AuthFailure(reason)
		}
		envelope.Write(w, apiErr)
	})
}

// awaitStart waits for the runtime's start unless rt answers at once while it starts.
func (a *pipeline) awaitStart(rt route, r *http.Request) error {
	if rt.immediate || a.started == nil {
		return nil
	}
	if err := a.started(r.Context()); err != nil {
		return envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "%v", err)
	}
	return nil
}

// checkWriteQuery refuses a query parameter that a mutating route does not take: a misspelt
// flag (?dryrun=1 for ?dryRun=1) must not turn a rehearsal into the real change.
func checkWriteQuery(rt route, r *http.Request) error {
	if !mutating(r.Method) || r.URL.RawQuery == "" {
		return nil
	}
	var known []string
	for _, p := range rt.params {
		if p.In == "query" {
			known = append(known, p.Name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.URL.Query())) {
		if slices.Contains(known, name) {
			continue
		}
		for _, k := range known {
			if strings.EqualFold(k, name) {
				return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "unknown query parameter %q; did you mean %s? Nothing was changed", name, k)
			}
		}
		if len(known) == 0 {
			return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "unknown query parameter %q: %s %s takes none; nothing was changed", name, r.Method, r.URL.Path)
		}
		return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "unknown query parameter %q; %s %s takes %s; nothing was changed", name, r.Method, r.URL.Path, strings.Join(known, ", "))
	}
	return nil
}

// keyStore returns the store, or 503 while the runtime is starting.
func (a *pipeline) keyStore() (*keystore.Store, error) {
	store, err := a.keys()
	if err != nil {
		return nil, envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "%v", err)
	}
	return store, nil
}

// storeAndID returns the key store and the route's {id}, a positive integer naming a what.
func (a *pipeline) storeAndID(r *http.Request, what string) (*keystore.Store, int64, error) {
	store, err := a.keyStore()
	if err != nil {
		return nil, 0, err
	}
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	// One name per id: "01" or "+1" would reach key 1 under a name no listing shows.
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != raw {
		return nil, 0, envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "%q is not a %s id; ids are positive integers written without leading zeros or a sign", raw, what)
	}
	return store, id, nil
}

// act runs op, the change a request makes to a unit, audits it as action on target and
// answers body.
func (a *pipeline) act(w http.ResponseWriter, r *http.Request, action, target string, op func() error, body any) error {
	p := principalOf(r.Context())
	if err := op(); err != nil {
		a.audit(r, action, target, "failed", &p)
		return packageError(err)
	}
	a.audit(r, action, target, "success", &p)
	envelope.WriteJSON(w, http.StatusOK, body)
	return nil
}
