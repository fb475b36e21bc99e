package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/openapi"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// DefaultHeartbeat is how often a followed log stream sends a comment line when no output
// comes, so proxies keep it open and clients see it is alive.
const DefaultHeartbeat = 15 * time.Second

// defaultLogLimit is how many lines GET logs answers when no limit is given.
const defaultLogLimit = 100

// logsAPI serves the workers' logs, read once or followed.
type logsAPI struct {
	*pipeline
	workers   *packages.Catalog
	pool      func() *workers.Pool // nil until the runtime has started
	heartbeat time.Duration        // how often an idle followed stream sends a comment
	stopping  <-chan struct{}      // closed by Shutdown: followed streams end
}

func (a *logsAPI) logRoutes() []route {
	return []route{{
		method: "GET", path: "/workers/{scope}/{name}/logs", id: "workerLogs", tag: "workers", permission: keystore.WorkersRead,
		summary: "Read or follow a worker's output",
		description: "The recent stdout and stderr lines of the worker's processes (all versions), kept in a ring of " +
			"worker_log_lines lines per worker. With follow=1 the answer is a Server-Sent Events stream: the selected " +
			"lines, then each new line as an event \"line\" whose data is the line as JSON and whose id is its seq; " +
			"\"dropped\" events say how many lines a slow client missed; comment lines every 15 s keep the stream alive; " +
			"an event \"end\" closes it when the runtime reloads or shuts down. Last-Event-ID resumes after that line.",
		params: []openapi.Parameter{
			{Name: "since", In: "query", Description: "only lines written after this time (RFC 3339)", Schema: &openapi.Schema{Type: "string", Format: "date-time"}},
			{Name: "limit", In: "query", Description: "at most this many lines, the newest (default 100; with follow, the backlog)", Schema: &openapi.Schema{Type: "integer"}},
			{Name: "stream", In: "query", Description: "only this stream", Schema: &openapi.Schema{Type: "string", Enum: []any{"stdout", "stderr"}}},
			{Name: "follow", In: "query", Description: "1 or true: stream new lines as Server-Sent Events", Schema: &openapi.Schema{Type: "string", Enum: []any{"1", "true", "0", "false"}}},
		},
		responses: []response{
			{status: http.StatusOK, description: "The lines; with follow, a text/event-stream", body: api.WorkerLogs{},
				content: map[string]*openapi.Schema{"text/event-stream": {Type: "string"}}},
			errorResponse(http.StatusBadRequest, "Malformed scope or name (INVALID_PACKAGE_NAME), or a malformed query parameter (BAD_REQUEST)"),
			errorResponse(http.StatusForbidden, "The worker is outside the key's namespaces (NAMESPACE_DENIED)"),
			errorResponse(http.StatusNotFound, "No such worker (WORKER_NOT_FOUND)"),
		},
		handle: a.workerLogs,
	}}
}

// logQuery reads the query parameters of GET logs.
func logQuery(r *http.Request) (workers.LogQuery, bool, error) {
	var q workers.LogQuery
	query := r.URL.Query()
	bad := func(name, why string) error {
		return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "query parameter %s is %q; %s", name, query.Get(name), why)
	}
	if v := query.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return q, false, bad("since", "use an RFC 3339 time such as 2026-01-02T15:04:05Z")
		}
		q.Since = t
	}
	q.Limit = defaultLogLimit
	if v := query.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return q, false, bad("limit", "use a positive number")
		}
		q.Limit = n
	}
	switch q.Stream = query.Get("stream"); q.Stream {
	case "", "stdout", "stderr":
	default:
		return q, false, bad("stream", "use stdout or stderr")
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			q.After = n
		}
	}
	follow, err := boolQuery(r, "follow")
	return q, follow, err
}

func logLine(l workers.LogLine) api.WorkerLogLine {
	return api.WorkerLogLine{Seq: l.Seq, Time: l.Time.UTC().Format(time.RFC3339Nano), Version: l.Version, PID: l.PID, Stream: l.Stream, Text: l.Text}
}

func (a *logsAPI) workerLogs(w http.ResponseWriter, r *http.Request) error {
	name, err := existingWorker(a.workers, r)
	if err != nil {
		return err
	}
	q, follow, err := logQuery(r)
	if err != nil {
		return err
	}
	pool := a.pool()
	if pool == nil {
		return envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "the runtime is starting")
	}
	if !follow {
		out := api.WorkerLogs{Worker: name, Lines: []api.WorkerLogLine{}}
		for _, l := range pool.Logs().Lines(name, q) {
			out.Lines = append(out.Lines, logLine(l))
		}
		envelope.WriteJSON(w, http.StatusOK, out)
		return nil
	}
	backlog, f := pool.Logs().Follow(name, q)
	defer f.Close()
	a.streamLogs(w, r, backlog, f, q.Stream)
	return nil
}

// streamLogs writes the backlog and then each new line as Server-Sent Events until the client
// leaves, the runtime stops, or the log book closes its followers.
func (a *logsAPI) streamLogs(w http.ResponseWriter, r *http.Request, backlog []workers.LogLine, f *workers.Follower, stream string) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // for proxies in front that buffer
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(event, id string, data any) error {
		b, _ := json.Marshal(data)
		if id != "" {
			if _, err := fmt.Fprintf(w, "id: %s\n", id); err != nil {
				return err
			}
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return err
		}
		return nil
	}
	line := func(l workers.LogLine) error { return send("line", strconv.FormatUint(l.Seq, 10), logLine(l)) }
	for _, l := range backlog {
		if line(l) != nil {
			return
		}
	}
	if _, err := fmt.Fprint(w, ": following\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	heartbeat := time.NewTicker(a.heartbeat)
	defer heartbeat.Stop()
	end := func(reason string) {
		_ = send("end", "", map[string]string{"reason": reason})
		_ = rc.Flush()
	}
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-a.stopping:
			end("the runtime is reloading or shutting down; reconnect")
			return
		case l, ok := <-f.Lines:
			if !ok {
				end("the runtime is shutting down")
				return
			}
			if stream == "" || l.Stream == stream {
				err = line(l)
			}
			if n := f.Dropped(); n > 0 && err == nil {
				err = send("dropped", "", map[string]int{"lines": n})
			}
		case <-heartbeat.C:
			_, err = fmt.Fprint(w, ": heartbeat\n\n")
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}
