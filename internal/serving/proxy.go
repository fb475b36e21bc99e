package serving

import (
	"context"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/trace"
	"github.com/caddy-runtime/runtime/internal/workers"
)

// Error codes of process workers.
const (
	CodeWorkerUnavailable = "WORKER_UNAVAILABLE"
	CodeWorkerTimeout     = "WORKER_TIMEOUT"
)

// newWorkerTransport connects to worker processes on the loopback interface, or on their unix
// sockets when they run in a network of their own (named by socketHost), and reads at most
// maxHeader bytes of an answer's head.
func newWorkerTransport(maxHeader int64) *http.Transport {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if path, ok := socketOf(addr); ok {
				return dialer.DialContext(ctx, "unix", path)
			}
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// Another process may listen on a worker's port once the worker let it go: the
			// connection is closed before a byte of the request is sent there.
			if t, ok := ctx.Value(proxyTargetKey{}).(*proxyTarget); ok && t.lease != nil {
				if err := t.lease.CheckConn(); err != nil {
					conn.Close()
					return nil, err
				}
			}
			return conn, nil
		},
		MaxIdleConnsPerHost:    64,
		IdleConnTimeout:        30 * time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxHeader,
	}
}

// serveProcess proxies a request to the version's process, starting it if needed: the base
// is stripped, the query kept, X-Base, X-Request-Id and X-Forwarded-* set, and the runtime's
// credentials removed. A request or an answer past the header caps is refused (overCaps); an
// HTML answer gets its injection (injectBase, envPrefix).
func (s *Server) serveProcess(w http.ResponseWriter, r *http.Request, t Target, m workers.Manifest, name string) error {
	pool := s.opts.Pool()
	if pool == nil {
		return envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "the runtime is starting")
	}
	limit := int64(m.MaxBodySize)
	if r.ContentLength > limit {
		return bodyTooLarge(name, limit)
	}
	if answer := requestOverCaps(r.Header, name); answer != nil {
		return answer
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(m.Timeout))
	defer cancel()
	lease, err := pool.Acquire(ctx, name, t.Version.Version, t.Version.Path, m)
	var unavailable *workers.UnavailableError
	var busy *workers.GateFullError
	switch {
	case errors.As(err, &busy):
		w.Header().Set("Retry-After", strconv.Itoa(int(busy.RetryAfter().Seconds())))
		return envelope.Errorf(http.StatusServiceUnavailable, CodeFreshWorkersBusy, "worker %q has ttl: 0; %v", name, busy)
	case errors.As(err, &unavailable):
		if unavailable.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(unavailable.RetryAfter.Seconds())+1))
		}
		return envelope.Errorf(http.StatusServiceUnavailable, CodeWorkerUnavailable, "%s", unavailable.Reason)
	case errors.Is(err, context.DeadlineExceeded):
		return envelope.Errorf(http.StatusGatewayTimeout, CodeWorkerTimeout, "worker %q did not start within its timeout %s", name, time.Duration(m.Timeout))
	case errors.Is(err, workers.ErrNotAllowed):
		return envelope.Errorf(http.StatusForbidden, "PROCESS_WORKERS_DISABLED", "worker %q is a process worker, and %v", name, err)
	case errors.Is(err, workers.ErrPoolClosed):
		return envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "%v", err)
	case err != nil:
		return err
	}
	defer lease.Release()
	unix := lease.Network() == "unix"
	target := &proxyTarget{addr: lease.Addr(), tcp: !unix, base: t.Base, rest: t.Rest, name: name, limit: limit,
		timeout: time.Duration(m.Timeout), requestID: trace.RequestID(r.Context()), ctx: ctx, lease: lease,
		inject: injection{env: lease.PublicEnv()}}
	if m.InjectBase {
		target.inject.base = t.Base + "/"
	}
	if directRequest(r) {
		s.serveDirect(w, r, target)
	} else {
		if unix {
			target.addr = socketHost(target.addr)
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		s.proxy.ServeHTTP(w, r.WithContext(context.WithValue(ctx, proxyTargetKey{}, target)))
	}
	if target.failed != nil {
		return target.failed
	}
	return nil
}

// proxyTarget is what the shared proxy needs to know about one request.
type proxyTarget struct {
	addr, base, rest, name, requestID string
	tcp                               bool // addr is host:port, not a unix socket's path
	limit                             int64
	timeout                           time.Duration
	ctx                               context.Context // carries the worker's timeout
	lease                             *workers.Lease
	inject                            injection       // what an HTML answer gets
	failed                            *envelope.Error // the proxy's error answer, returned, not written
}

// workerAddr is where the direct proxy reaches the target's process; without a lease
// (tests), a socket whose exit is not known.
func (t *proxyTarget) workerAddr() workerAddr {
	to := workerAddr{addr: t.addr, tcp: t.tcp}
	if t.lease != nil {
		to.gone = t.lease.Exited()
		if t.tcp {
			to.check, to.take = t.lease.CheckConn, t.lease.TakeConn
		}
	}
	return to
}

type proxyTargetKey struct{}

// newWorkerProxy returns the reverse proxy to worker processes, shared by all requests; each
// request's target travels in its context.
func (s *Server) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Transport:  newWorkerTransport(s.opts.MaxHeaderSize),
		BufferPool: bufferPool{},
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(proxyTargetKey{}).(*proxyTarget)
			pr.SetURL(&url.URL{Scheme: "http", Host: t.addr})
			if strings.HasSuffix(t.addr, socketSuffix) {
				pr.Out.Host = "localhost" // not the socket's hex name
			}
			pr.Out.URL.Path, pr.Out.URL.RawPath = t.rest, ""
			if pr.Out.URL.Path == "" {
				pr.Out.URL.Path = "/"
			}
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
			pr.SetXForwarded()
			h := pr.Out.Header
			h.Set("X-Forwarded-Prefix", t.base)
			h.Set("X-Base", t.base)
			h.Set(trace.RequestIDHeader, t.requestID)
			s.opts.Credentials.Strip(h)
		},
		ModifyResponse: func(resp *http.Response) error {
			// The response already carries the runtime's id and version; the proxy would add
			// the worker's.
			resp.Header.Del(trace.RequestIDHeader)
			resp.Header.Del(VersionHeader)
			t := resp.Request.Context().Value(proxyTargetKey{}).(*proxyTarget)
			if err := shapeAnswer(t, resp.Request.Method, resp, resp.Header, true); err != nil {
				return err
			}
			if resp.StatusCode == http.StatusSwitchingProtocols {
				// A protocol switch writes its header on the hijacked connection, past the
				// writer that guards the session cookie everywhere else.
				DropCookie(resp.Header, s.opts.Credentials.Cookies...)
			}
			return nil
		},
		ErrorHandler: func(_ http.ResponseWriter, r *http.Request, err error) {
			s.proxyFailed(r.Context().Value(proxyTargetKey{}).(*proxyTarget), err)
		},
	}
}

// proxyFailed turns the error of a request the worker did not answer into the answer
// serveProcess returns.
func (s *Server) proxyFailed(t *proxyTarget, err error) {
	var tooLarge *http.MaxBytesError
	var answer *envelope.Error
	switch {
	case errors.As(err, &answer): // shapeAnswer's
		t.failed = answer
	case errors.As(err, &tooLarge):
		t.failed = bodyTooLarge(t.name, t.limit)
	case errors.Is(t.ctx.Err(), context.DeadlineExceeded):
		t.failed = envelope.Errorf(http.StatusGatewayTimeout, CodeWorkerTimeout, "worker %q did not answer within its timeout %s", t.name, t.timeout)
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads an answer.
	case headerTooLarge(err):
		t.failed = envelope.Errorf(http.StatusBadGateway, CodeWorkerUnavailable,
			"worker %q answered headers larger than %d bytes, the limit worker_max_header_size sets: answer with fewer or shorter headers", t.name, s.opts.MaxHeaderSize)
	case t.lease != nil && t.lease.Err() != nil:
		// The request waited in the queue of a listener the process never served.
		t.failed = envelope.Errorf(http.StatusServiceUnavailable, CodeWorkerUnavailable, "%v", t.lease.Err())
	default:
		s.opts.Logger.Warn("worker request failed", zap.String("worker", t.name), zap.String("request_id", t.requestID), zap.Error(err))
		t.failed = envelope.Errorf(http.StatusBadGateway, CodeWorkerUnavailable, "worker %q did not answer: %v", t.name, err)
	}
}

// errHeaderTooLarge stops the direct proxy's read of an answer head past
// worker_max_header_size.
var errHeaderTooLarge = errors.New("the answer's headers are past worker_max_header_size")

// headerTooLarge tells whether err stopped the read of an answer head at its limit: the direct
// proxy's, or the shared proxy's transport's.
func headerTooLarge(err error) bool {
	return errors.Is(err, errHeaderTooLarge) || workers.HeadTooLarge(err)
}

// socketSuffix ends the host name that stands for a worker's unix socket.
const socketSuffix = ".sock.invalid"

// socketHost names a worker's unix socket as a URL host: the transport keeps one pool of
// connections per host, so each socket needs a name of its own, and the dialer reads the
// path back from it (socketOf). The path is hex-encoded, since a host may not hold slashes.
func socketHost(path string) string { return hex.EncodeToString([]byte(path)) + socketSuffix }

// socketOf returns the socket path a dialled host:port names, if it names one.
func socketOf(addr string) (string, bool) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false
	}
	return socketOfHost(host)
}

// socketOfHost returns the socket path a host names, if it names one.
func socketOfHost(host string) (string, bool) {
	name, ok := strings.CutSuffix(host, socketSuffix)
	if !ok {
		return "", false
	}
	path, err := hex.DecodeString(name)
	return string(path), err == nil
}

// bufferPool recycles the proxy's copy buffers instead of allocating one per response.
type bufferPool struct{}

var proxyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *proxyBuffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { proxyBuffers.Put(&b) }

func bodyTooLarge(name string, limit int64) *envelope.Error {
	return envelope.Errorf(http.StatusRequestEntityTooLarge, envelope.CodePayloadTooLarge, "the request body is larger than worker %q accepts (maxBodySize %d bytes)", name, limit)
}
