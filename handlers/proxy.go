package handlers

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/workers"
)

// Error codes of process workers.
const (
	CodeWorkerUnavailable = "WORKER_UNAVAILABLE"
	CodeWorkerTimeout     = "WORKER_TIMEOUT"
)

// newWorkerTransport connects to worker processes on the loopback interface.
func newWorkerTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
}

// serveProcess proxies a request to the version's process, starting it if needed: the base
// is stripped, the query kept, X-Base, X-Request-Id and X-Forwarded-* set, and the runtime's
// credentials removed.
func (a *API) serveProcess(w http.ResponseWriter, r *http.Request, t workers.Target, m workers.Manifest, name string) error {
	pool := a.opts.Pool()
	if pool == nil {
		return Errorf(http.StatusServiceUnavailable, CodeNotReady, "the runtime is starting")
	}
	limit := int64(m.MaxBodySize)
	if r.ContentLength > limit {
		return bodyTooLarge(name, limit)
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(m.Timeout))
	defer cancel()
	lease, err := pool.Acquire(ctx, name, t.Version.Version, t.Version.Path, m)
	var unavailable *workers.UnavailableError
	switch {
	case errors.As(err, &unavailable):
		if unavailable.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(unavailable.RetryAfter.Seconds())+1))
		}
		return Errorf(http.StatusServiceUnavailable, CodeWorkerUnavailable, "%s", unavailable.Reason)
	case errors.Is(err, context.DeadlineExceeded):
		return Errorf(http.StatusGatewayTimeout, CodeWorkerTimeout, "worker %q did not start within its timeout %s", name, time.Duration(m.Timeout))
	case errors.Is(err, workers.ErrPoolClosed):
		return Errorf(http.StatusServiceUnavailable, CodeNotReady, "%v", err)
	case err != nil:
		return err
	}
	defer lease.Release()
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	requestID := RequestID(r.Context())
	rp := &httputil.ReverseProxy{
		Transport: a.proxy,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: lease.Addr()})
			pr.Out.URL.Path, pr.Out.URL.RawPath = t.Rest, ""
			if pr.Out.URL.Path == "" {
				pr.Out.URL.Path = "/"
			}
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
			pr.SetXForwarded()
			h := pr.Out.Header
			h.Set("X-Forwarded-Prefix", t.Base)
			h.Set("X-Base", t.Base)
			h.Set(RequestIDHeader, requestID)
			a.stripCredentials(h)
		},
		ModifyResponse: func(resp *http.Response) error {
			// The response already carries the runtime's id; the proxy would add the worker's.
			resp.Header.Del(RequestIDHeader)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			var tooLarge *http.MaxBytesError
			switch {
			case errors.As(err, &tooLarge):
				WriteError(w, bodyTooLarge(name, limit))
			case errors.Is(ctx.Err(), context.DeadlineExceeded):
				WriteError(w, Errorf(http.StatusGatewayTimeout, CodeWorkerTimeout, "worker %q did not answer within its timeout %s", name, time.Duration(m.Timeout)))
			case errors.Is(err, context.Canceled):
				// The client went away; nobody reads an answer.
			default:
				a.opts.Logger.Warn("worker request failed", zap.String("worker", name), zap.String("request_id", requestID), zap.Error(err))
				WriteError(w, Errorf(http.StatusBadGateway, CodeWorkerUnavailable, "worker %q did not answer: %v", name, err))
			}
		},
	}
	rp.ServeHTTP(w, r.WithContext(ctx))
	return nil
}

func bodyTooLarge(name string, limit int64) *Error {
	return Errorf(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "the request body is larger than worker %q accepts (maxBodySize %d bytes)", name, limit)
}

// stripCredentials removes the runtime's own credentials, which a worker must never see: the
// X-API-Key header, an Authorization: Bearer carrying a runtime key, and the session cookie.
// A worker's own credentials (other Authorization values, other cookies) pass.
func (a *API) stripCredentials(h http.Header) {
	h.Del(APIKeyHeader)
	if scheme, token, ok := strings.Cut(h.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		token = strings.TrimSpace(token)
		if strings.HasPrefix(token, keystore.KeyPrefix) || a.isRoot(token) {
			h.Del("Authorization")
		}
	}
	cookies := h.Values("Cookie")
	h.Del("Cookie")
	for _, line := range cookies {
		var kept []string
		for _, c := range strings.Split(line, ";") {
			if name, _, _ := strings.Cut(strings.TrimSpace(c), "="); name != SessionCookie && strings.TrimSpace(c) != "" {
				kept = append(kept, strings.TrimSpace(c))
			}
		}
		if len(kept) > 0 {
			h.Add("Cookie", strings.Join(kept, "; "))
		}
	}
}
