package caddymodule

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/cron"
	"github.com/caddy-runtime/runtime/internal/serving"
	"github.com/caddy-runtime/runtime/internal/trace"
)

// cronDispatch is how the scheduler sends ticks: through the latest handler serving workers,
// nil while none does.
func (s *state) cronDispatch() cron.Dispatch {
	h := s.tick.Load()
	if h == nil {
		return nil
	}
	return h.cronTick
}

// serveTicks makes h the handler the scheduler's ticks go through, when it serves workers.
func (h *Handler) serveTicks() {
	if h.settings.Serve.Workers {
		h.state.tick.Store(h)
	}
}

// stopTicks hands the ticks to no handler, unless a newer one took them already.
func (h *Handler) stopTicks() {
	if h.state != nil {
		h.state.tick.CompareAndSwap(h, nil)
	}
}

// cronHost is the host of a tick's request: no worker's own host, so the path names the worker.
const cronHost = "cron.runtime.invalid"

// cronTick sends a tick's request through the whole of the handler, as an unpinned request
// for /<worker><path> from the instance itself is served (hooks, plugin routes, the split,
// the active version), marked as the tick of its trigger for the data plane to give it the
// Runtime-Cron header. It returns the answer's status; an error answer (4xx, 5xx) comes with
// an error holding the start of its body.
func (h *Handler) cronTick(ctx context.Context, req cron.Request) (status int, err error) {
	// A panic serving a tick is the request's failure, as the HTTP server makes it for a
	// visitor's request, not the runtime's end.
	defer func() {
		if v := recover(); v != nil {
			h.logger.Error("serving a cron tick panicked", zap.String("worker", req.Worker), zap.String("request_id", req.RequestID),
				zap.Any("panic", v), zap.Stack("stack"))
			status, err = 0, fmt.Errorf("the runtime failed serving the tick (request %s); see its log", req.RequestID)
		}
	}()
	// An empty body, never nil, as the HTTP server gives a request without one.
	r, err := http.NewRequestWithContext(serving.WithCron(ctx, req.Trigger), req.Method, "http://"+cronHost+"/"+req.Worker+req.Path, http.NoBody)
	if err != nil {
		return 0, fmt.Errorf("building the request: %w", err)
	}
	r.RequestURI = r.URL.RequestURI()
	r.RemoteAddr = "127.0.0.1:0"
	r.Header.Set(trace.RequestIDHeader, req.RequestID)
	r.Header.Set("User-Agent", "runtime-cron")
	w := &tickWriter{header: http.Header{}}
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, h.server)
	if err := h.ServeHTTP(w, r, nil); err != nil {
		if he, ok := err.(caddyhttp.HandlerError); ok {
			return he.StatusCode, fmt.Errorf("the worker answered %d: %v", he.StatusCode, he.Err)
		}
		return 0, err
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.status >= 400 {
		return w.status, fmt.Errorf("the worker answered %d: %s", w.status, strings.TrimSpace(w.body.String()))
	}
	return w.status, nil
}

// tickWriter takes a tick's answer: its status, and the start of its body for the run's error.
type tickWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

// maxTickBody is how much of an answer's body a run keeps.
const maxTickBody = 512

func (w *tickWriter) Header() http.Header { return w.header }

func (w *tickWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
}

func (w *tickWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if room := maxTickBody - w.body.Len(); room > 0 {
		w.body.Write(b[:min(room, len(b))])
	}
	return len(b), nil
}
