package databases

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-runtime/runtime/internal/hrana"
)

// Remote reaches the libSQL primary (sqld --enable-namespaces) on which each worker's
// database is a namespace: its HTTP API, where the runtime's endpoint forwards the workers'
// statements, and its admin API (--admin-listen-addr), where namespaces are created.
type Remote struct {
	primary    *url.URL
	token      string // the primary's auth token, sent by the endpoint alone
	admin      *url.URL
	adminToken string
	client     *http.Client
	proxy      http.RoundTripper
	created    sync.Map // namespaces known to exist
	gauges     sync.Map // *gauge of the namespaces WebAssembly instances use, by namespace
}

// gauge is what was last measured of a namespace against its limit.
type gauge struct {
	measured atomic.Int64 // Unix nanoseconds of the last measurement
	full     atomic.Bool
}

// gauge returns the gauge the WebAssembly instances of namespace ns share.
func (r *Remote) gauge(ns string) *gauge {
	g, _ := r.gauges.LoadOrStore(ns, &gauge{})
	return g.(*gauge)
}

// past tells whether namespace ns holds more than limit bytes, as g measured it at most
// sizeEvery ago (measuring it again when older); over is told once as it passes the limit,
// not at each refusal.
func (r *Remote) past(ctx context.Context, ns string, limit int64, g *gauge, over func(error)) bool {
	if last := g.measured.Load(); time.Since(time.Unix(0, last)) > sizeEvery {
		g.measured.Store(time.Now().UnixNano())
		used, err := r.Size(ctx, ns)
		now := err == nil && used > limit
		if was := g.full.Swap(now); now && !was {
			over(LimitError(limit))
		}
	}
	return g.full.Load()
}

// toNamespace points out, a request to the primary, at namespace ns (the host's first label,
// the way sqld reads it) with the runtime's own credentials, whatever a worker asked.
func (r *Remote) toNamespace(out *http.Request, ns string) {
	out.Host = ns + "." + r.primary.Host
	out.Header.Del("Authorization")
	out.Header.Del("Cookie")
	if r.token != "" {
		out.Header.Set("Authorization", "Bearer "+r.token)
	}
}

// pipeline sends a Hrana-over-HTTP v2 pipeline to namespace ns and returns sqld's status and
// answer, at most maxAnswer bytes.
func (r *Remote) pipeline(ctx context.Context, ns string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.primary.JoinPath("/v2/pipeline").String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	r.toNamespace(req, ns)
	resp, err := r.proxy.RoundTrip(req)
	if err != nil {
		return 0, nil, fmt.Errorf("the database primary is unreachable; try again: %w", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	switch {
	case err != nil:
		return 0, nil, fmt.Errorf("reading the primary's answer: %w", err)
	case len(out) > maxAnswer:
		return 0, nil, fmt.Errorf("the answer passes the %d bytes a call may take: select fewer rows or smaller values", maxAnswer)
	}
	return resp.StatusCode, out, nil
}

// adminTimeout bounds each exchange with the admin API.
const adminTimeout = 10 * time.Second

// maxStatements bounds the body of one request of a worker to its database.
const maxStatements = 16 << 20

// sizeEvery is how long the endpoint trusts its last measurement of a database's size.
const sizeEvery = time.Second

// NewRemote returns the remote of the primary at primaryURL (its HTTP API) with token, and
// of its admin API at adminURL with adminToken. An adminURL of "" is refused: namespaces
// cannot be made without it.
func NewRemote(primaryURL, token, adminURL, adminToken string) (*Remote, error) {
	if adminURL == "" {
		return nil, errors.New("a worker's database needs the primary's admin API in sync mode: set key_store sync { admin_url … } " +
			"(sync_admin_url, RUNTIME_AUTH_DB_SYNC_ADMIN_URL) to sqld's --admin-listen-addr, with --enable-namespaces")
	}
	p, err := url.Parse(primaryURL)
	if err != nil {
		return nil, fmt.Errorf("the primary's URL: %w", err)
	}
	switch p.Scheme { // libsql:// and wss:// name the same server over TLS
	case "libsql", "wss":
		p.Scheme = "https"
	case "ws":
		p.Scheme = "http"
	}
	a, err := url.Parse(adminURL)
	if err != nil {
		return nil, fmt.Errorf("sync_admin_url: %w", err)
	}
	return &Remote{primary: p, token: token, admin: a, adminToken: adminToken, client: &http.Client{Timeout: adminTimeout},
		proxy: http.DefaultTransport}, nil
}

// adminDo sends one request to the admin API and returns its status and body.
func (r *Remote) adminDo(ctx context.Context, method, path string, body io.Reader) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, r.admin.JoinPath(path).String(), body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if r.adminToken != "" {
		req.Header.Set("Authorization", "basic "+r.adminToken) // sqld's --admin-auth-key
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("the primary's admin API (sync_admin_url) is unreachable: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, data, err
}

// Ensure creates namespace ns on the primary unless it exists.
func (r *Remote) Ensure(ctx context.Context, ns string) error {
	if _, ok := r.created.Load(ns); ok {
		return nil
	}
	status, body, err := r.adminDo(ctx, http.MethodPost, "/v1/namespaces/"+ns+"/create", strings.NewReader("{}"))
	if err != nil {
		return err
	}
	if status != http.StatusOK && !strings.Contains(string(body), "already exists") {
		return fmt.Errorf("creating the worker's database on the primary: sqld's admin API answers %d %s "+
			"(is sqld started with --enable-namespaces, and admin_token its --admin-auth-key?)", status, strings.TrimSpace(string(body)))
	}
	r.created.Store(ns, true)
	return nil
}

// sizeQuery measures a database as sqld's storage monitor does (the pages in use times the
// page size), at the moment it is asked. The admin API's storage_bytes_used is that monitor's
// last count, taken a second after the namespace opens and then once a minute: a limit kept by
// it lets a worker write for a minute past it.
var sizeQuery = []byte(`{"requests":[{"type":"execute","stmt":{"sql":` +
	`"select (c.page_count - f.freelist_count) * s.page_size from pragma_page_count() c, pragma_freelist_count() f, pragma_page_size() s"}},` +
	`{"type":"close"}]}`)

// Size returns the bytes namespace ns holds on the primary now; a namespace not made yet
// holds none.
func (r *Remote) Size(ctx context.Context, ns string) (int64, error) {
	status, out, err := r.pipeline(ctx, ns, sizeQuery)
	if err != nil {
		return 0, err
	}
	if status == http.StatusNotFound {
		return 0, nil
	}
	var resp hrana.PipelineResponse
	if status != http.StatusOK || json.Unmarshal(out, &resp) != nil || len(resp.Results) == 0 {
		return 0, fmt.Errorf("measuring the worker's database: the primary answers %d %.200s", status, bytes.TrimSpace(out))
	}
	if res := resp.Results[0]; res.Type == "ok" && res.Response != nil && res.Response.Result != nil &&
		len(res.Response.Result.Rows) == 1 && len(res.Response.Result.Rows[0]) == 1 {
		if n, err := res.Response.Result.Rows[0][0].Go(); err == nil {
			if used, ok := n.(int64); ok {
				return used, nil
			}
		}
	} else if res.Error != nil {
		return 0, fmt.Errorf("measuring the worker's database: %s", res.Error.Message)
	}
	return 0, fmt.Errorf("measuring the worker's database: the primary answers %.200s", out)
}

// Delete removes namespace ns from the primary.
func (r *Remote) Delete(ctx context.Context, ns string) error {
	status, body, err := r.adminDo(ctx, http.MethodDelete, "/v1/namespaces/"+ns, nil)
	if err != nil {
		return err
	}
	r.created.Delete(ns)
	if status != http.StatusOK && status != http.StatusNotFound {
		return fmt.Errorf("removing the worker's database: sqld's admin API answers %d %s", status, strings.TrimSpace(string(body)))
	}
	return nil
}

// endpoint returns the Spec.Endpoint of a process whose database is namespace ns: it serves
// the proxy to ns on the listener until the listener closes, under a token made for this
// process alone.
func (r *Remote) endpoint(ns string, limit int64, over func(error)) func(ln net.Listener) []string {
	return func(ln net.Listener) []string {
		raw := make([]byte, 32)
		_, _ = rand.Read(raw)
		token := hex.EncodeToString(raw)
		srv := &http.Server{Handler: r.handler(ns, token, limit, over), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
		go func() {
			_ = srv.Serve(ln) // returns once the sandbox closes the listener, the worker gone
			_ = srv.Close()
		}()
		base := "http://" + ln.Addr().String()
		return []string{URLVar + "=" + base + "?authToken=" + token, TokenVar + "=" + token}
	}
}

// Paths of sqld's HTTP API a worker may use: the Hrana-over-HTTP pipelines and cursors
// (versions 2 and 3), and the probes its clients make. Everything else (dumps, the
// replication and admin routes) stays the operator's.
var workerPaths = map[string]string{
	"/v2/pipeline": http.MethodPost, "/v3/pipeline": http.MethodPost, "/v3/cursor": http.MethodPost,
	"/v2": http.MethodGet, "/v3": http.MethodGet, "/health": http.MethodGet, "/version": http.MethodGet,
}

// handler is the endpoint of one process: with its own token it reaches namespace ns alone,
// whatever its request's host or headers say; the runtime chooses the namespace (the
// host's first label, the way sqld reads it) and sends the primary's token itself. Its errors
// have sqld's shape, {"error": "…"}, the one the worker's libSQL client reads.
func (r *Remote) handler(ns, token string, limit int64, over func(error)) http.Handler {
	var g gauge // this process's: it is told once, as its namespace passes the limit
	proxy := &httputil.ReverseProxy{
		Transport: r.proxy,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(r.primary)
			r.toNamespace(pr.Out, ns)
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			sqldError(w, http.StatusBadGateway, "the database primary is unreachable; try again")
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		given, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		if !ok {
			given = req.URL.Query().Get("authToken")
		}
		if subtle.ConstantTimeCompare([]byte(given), []byte(token)) != 1 {
			sqldError(w, http.StatusUnauthorized, "this endpoint takes the token of DATABASE_URL (DATABASE_AUTH_TOKEN) alone")
			return
		}
		path := strings.TrimSuffix(req.URL.Path, "/")
		if method, ok := workerPaths[path]; !ok || method != req.Method {
			sqldError(w, http.StatusNotFound, "a worker's database takes Hrana over HTTP (POST /v2/pipeline, /v3/pipeline, /v3/cursor)")
			return
		}
		if limit > 0 && req.Method == http.MethodPost && r.past(req.Context(), ns, limit, &g, over) {
			sqldError(w, http.StatusInsufficientStorage, LimitError(limit).Error())
			return
		}
		req.Body = http.MaxBytesReader(w, req.Body, maxStatements)
		req.URL.RawQuery = ""
		proxy.ServeHTTP(w, req)
	})
}

func sqldError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": message})
}
