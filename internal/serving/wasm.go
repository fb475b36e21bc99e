package serving

import (
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddy-runtime/runtime/internal/databases"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/mount"
	"github.com/caddy-runtime/runtime/internal/trace"
	"github.com/caddy-runtime/runtime/internal/wasm"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/packages"
)

// Error codes of WebAssembly workers.
const (
	// CodeWorkerFailed answers a request whose WebAssembly instance failed: it exited with a
	// status other than 0, trapped, ran out of its memory, wrote too much or no CGI answer.
	CodeWorkerFailed = "WORKER_FAILED"
	// CodeWasmWorkersDisabled answers a request for a WebAssembly worker that wasm_workers
	// does not allow (any more) in its namespace.
	CodeWasmWorkersDisabled = workers.CodeWasmWorkersDisabled
)

// WasmHost is what serving WebAssembly workers needs of the runtime.
type WasmHost struct {
	// Engine runs the modules; Output takes their standard error.
	Engine *wasm.Engine
	Output *workers.OutputLog
	// Allowed tells whether wasm_workers allows a worker's namespace.
	Allowed func(name string) bool
	// Memory is wasm_memory: an instance's memory when its manifest asks for none, and the most
	// it may ask for.
	Memory int64
	// Concurrency is wasm_concurrency: the most instances of one worker running at once (0:
	// wasm.DefaultConcurrency).
	Concurrency int
	// MaxHeader is worker_max_header_size: the most bytes of CGI headers read from a module's
	// output (0: wasm.DefaultMaxHeader).
	MaxHeader int64
	// Secrets returns a worker's secrets by variable name (nil: it has none); an error answers
	// 503, as a process worker that cannot start.
	Secrets func(ctx context.Context, name string) (map[string]string, error)
	// Databases gives a worker whose manifest says database: true its database (a session per
	// instance) and, in local mode, its folder for files of its own, bounded by limits.database capped by DatabaseSize
	// (worker_database_size).
	Databases    *databases.Manager
	DatabaseSize int64
}

// ModuleKey is the engine's key of a version's module, for wasm.Engine.Forget; prefixed by
// WasmVersionKey.
func ModuleKey(name, version, dir, module string) string {
	return WasmVersionKey(name, version) + dir + "\x00" + module
}

// WasmVersionKey starts the module keys of a worker version ("" version: every version).
func WasmVersionKey(name, version string) string {
	if version == "" {
		return name + "@"
	}
	return name + "@" + version + "\x00"
}

// ParseModuleKey returns what ModuleKey made key from; ok is false for anything else.
func ParseModuleKey(key string) (name, version, dir, module string, ok bool) {
	parts := strings.Split(key, "\x00")
	if len(parts) != 3 {
		return "", "", "", "", false
	}
	at := strings.LastIndexByte(parts[0], '@')
	if at <= 0 || at == len(parts[0])-1 {
		return "", "", "", "", false
	}
	return parts[0][:at], parts[0][at+1:], parts[1], parts[2], true
}

// WasmModule is the module of worker name's version v as its requests run it: the same key
// and read of the version, so that warming it (wasm.Engine.Warm) serves them.
func WasmModule(name string, v packages.Version, served *Served) wasm.Module {
	root, file := served.Root, served.Manifest.Module
	return wasm.Module{
		Key:    ModuleKey(name, v.Version, v.Path, file),
		Serial: served.serial,
		Read:   func(limit int64) ([]byte, error) { return wasm.ReadModule(root.FS(), file, limit) },
	}
}

// serveWasm runs the version's module for the request in a fresh instance, with the CGI
// contract (see wasmEnv), and writes its answer once the instance has ended.
func (s *Server) serveWasm(w http.ResponseWriter, r *http.Request, t Target, served *Served, name string) error {
	host := s.opts.Wasm()
	if host == nil || host.Engine == nil {
		return envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "the runtime is starting")
	}
	if host.Allowed != nil && !host.Allowed(name) {
		return envelope.Errorf(http.StatusForbidden, CodeWasmWorkersDisabled, "worker %q is a WebAssembly worker, and the setting wasm_workers does not allow them in its namespace", name)
	}
	m := served.Manifest
	limit := int64(m.MaxBodySize)
	if r.ContentLength > limit {
		return bodyTooLarge(name, limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return bodyTooLarge(name, limit)
	case err != nil:
		return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "reading the request body: %v", err)
	}
	memory := host.Memory
	if asked := int64(m.Limits.Memory); asked > 0 && (memory <= 0 || asked < memory) {
		memory = asked
	}
	var secrets map[string]string
	if host.Secrets != nil {
		if secrets, err = host.Secrets(r.Context(), name); err != nil {
			return envelope.Errorf(http.StatusServiceUnavailable, CodeWorkerUnavailable, "worker %q cannot run: its secrets cannot be read: %v", name, err)
		}
	}
	req := wasm.Request{Args: []string{m.Module}, Stdin: body, FS: served.Root.FS(), Memory: memory,
		Timeout: time.Duration(m.Timeout), Group: name, Concurrency: host.Concurrency}
	var dbEnv []string
	var full atomic.Bool
	if m.Database {
		if host.Databases == nil {
			return envelope.Errorf(http.StatusServiceUnavailable, CodeWorkerUnavailable, "worker %q cannot run: this runtime gives workers no database (database: true)", name)
		}
		var done func()
		if req.Data, req.DataRoom, done, err = host.Databases.Wasm(name, m.DatabaseLimit(host.DatabaseSize)); err != nil {
			return envelope.Errorf(http.StatusServiceUnavailable, CodeWorkerUnavailable, "worker %q cannot run: its database: %v", name, err)
		}
		defer done()
		req.DataFull = func() { full.Store(true) }
		db, err := host.Databases.Session(r.Context(), name, m.DatabaseLimit(host.DatabaseSize), req.DataFull)
		if err != nil {
			return envelope.Errorf(http.StatusServiceUnavailable, CodeWorkerUnavailable, "worker %q cannot run: its database: %v", name, err)
		}
		defer db.Close()
		req.Database = db
		dbEnv = []string{databases.URLVar + "=" + databases.WasmURL}
	}
	req.Env = wasmEnv(r, t, m, name, len(body), secrets, dbEnv)
	stderr := host.Output.Writer(name, t.Version.Version, "stderr", secrets)
	req.Stderr = stderr
	defer stderr.Flush()
	out, err := host.Engine.Run(r.Context(), WasmModule(name, t.Version, served), req)
	if full.Load() { // the log and the API say why the instance's writes failed
		_, _ = io.WriteString(stderr, databases.OverLine(host.Databases.Full(name, m.DatabaseLimit(host.DatabaseSize)))+"\n")
	}
	timeout := req.Timeout
	if err != nil {
		if errors.As(err, new(*wasm.BusyError)) {
			w.Header().Set("Retry-After", "1")
		}
		return wasmError(name, timeout, err)
	}
	resp, err := wasm.ParseCGI(out, host.MaxHeader)
	if err != nil {
		return envelope.Errorf(http.StatusBadGateway, CodeWorkerFailed, "worker %q did not answer as CGI: %v", name, err)
	}
	// The answer carries the runtime's request id and the version already.
	resp.Header.Del(trace.RequestIDHeader)
	resp.Header.Del(VersionHeader)
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = append(h[k], vs...)
	}
	h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	w.WriteHeader(resp.Status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(resp.Body)
	}
	return nil
}

// wasmError is the answer to a run that failed.
func wasmError(name string, timeout time.Duration, err error) error {
	var (
		mem     *wasm.MemoryError
		exit    *wasm.ExitError
		compile *wasm.CompileError
		busy    *wasm.BusyError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return envelope.Errorf(http.StatusGatewayTimeout, CodeWorkerTimeout, "worker %q did not answer within its timeout %s", name, timeout)
	case errors.Is(err, context.Canceled):
		return nil // the client went away; nobody reads an answer
	case errors.As(err, &mem):
		return envelope.Errorf(http.StatusBadGateway, CodeWorkerFailed, "worker %q needed more memory than its limit of %d bytes (limits.memory, wasm_memory)", name, mem.Limit)
	case errors.Is(err, wasm.ErrOutput):
		return envelope.Errorf(http.StatusBadGateway, CodeWorkerFailed, "worker %q wrote more than %d bytes", name, wasm.DefaultMaxOutput)
	case errors.As(err, &exit):
		return envelope.Errorf(http.StatusBadGateway, CodeWorkerFailed, "worker %q failed (%v); its standard error is in its logs", name, exit)
	case errors.As(err, &busy):
		return envelope.Errorf(http.StatusServiceUnavailable, CodeWorkerUnavailable, "worker %q cannot run now: %v", name, busy)
	case errors.As(err, &compile):
		return envelope.Errorf(http.StatusInternalServerError, CodeWorkerMisconfigured, "worker %q cannot run: %v", name, compile)
	}
	return err
}

// wasmEnv is the whole environment of a WebAssembly instance, built here alone: the manifest's
// env, then the worker's secrets, then its database's variables (db, "NAME=value" each), then
// the request's CGI variables (RFC 3875, as WAGI passes them); a later one wins. CGI's names (workers.CGIVariable, refused at upload and by the
// secrets API) are left out of the first two, should a version or secret stored before the
// refusal hold one: a visitor's header line cannot stand in for a secret.
func wasmEnv(r *http.Request, t Target, m workers.Manifest, name string, bodyLen int, secrets map[string]string, db []string) []string {
	env := map[string]string{}
	for _, from := range []map[string]string{m.Env, secrets} {
		for k, v := range from {
			if !workers.CGIVariable(k) {
				env[k] = v
			}
		}
	}
	for _, kv := range db {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		host, port = r.Host, "80"
		if r.TLS != nil {
			port = "443"
		}
	}
	remote, remotePort, _ := net.SplitHostPort(r.RemoteAddr)
	uri := mount.Path(r.Context()) + r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		uri += "?" + r.URL.RawQuery
	}
	cgi := map[string]string{
		"GATEWAY_INTERFACE": "CGI/1.1",
		"SERVER_SOFTWARE":   "caddy-runtime",
		"SERVER_PROTOCOL":   r.Proto,
		"SERVER_NAME":       host,
		"SERVER_PORT":       port,
		"REQUEST_METHOD":    r.Method,
		"REQUEST_URI":       uri,
		"SCRIPT_NAME":       t.Base,
		"PATH_INFO":         t.Rest,
		"QUERY_STRING":      r.URL.RawQuery,
		"REMOTE_ADDR":       remote,
		"REMOTE_PORT":       remotePort,
		"WORKER_NAME":       name,
		"WORKER_VERSION":    t.Version.Version,
		"HTTP_X_REQUEST_ID": trace.RequestID(r.Context()),
	}
	if bodyLen > 0 {
		cgi["CONTENT_LENGTH"] = strconv.Itoa(bodyLen)
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		cgi["CONTENT_TYPE"] = ct
	}
	if r.TLS != nil {
		cgi["HTTPS"] = "on"
	}
	for k, vs := range r.Header {
		switch k {
		case "Content-Type", "Content-Length", "Proxy": // the first two have their own; Proxy: httpoxy
			continue
		}
		key := "HTTP_" + strings.ToUpper(strings.ReplaceAll(k, "-", "_"))
		if _, ok := cgi[key]; !ok {
			cgi[key] = strings.Join(vs, ", ")
		}
	}
	maps.Copy(env, cgi)
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}
