// Package workers holds what a worker is and what runs one: manifests and their admission (the
// policy an upload, an enable or a manifest write passes: kinds, limits, names, env), the pool
// that starts process workers (through sandbox) and stops them, their health checks and the
// activator that checks a new version before it takes traffic, which version of each worker is
// active on this instance (Activations), crash loops, and each worker's log ring. Resolving a
// request to a worker version and answering it (static files, the proxy, WebAssembly) is the
// data plane's, package serving.
package workers

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"gopkg.in/yaml.v3"

	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/internal/sandbox"
	"github.com/caddy-runtime/runtime/packages"
)

// Kind is how a worker version is served.
type Kind int

// Kinds of workers.
const (
	// Files serves the version folder as it is (no entrypoint, no command).
	Files Kind = iota
	// SPA serves files, falling back to the HTML entrypoint for unknown paths.
	SPA
	// Process runs the worker's HTTP server and proxies to it.
	Process
	// Wasm runs the worker's WebAssembly module in process, an instance per request.
	Wasm
	// JS runs the worker's JavaScript or TypeScript module (its entrypoint, whose default
	// export has fetch and/or routes) in a JavaScript engine, a process worker in all else.
	JS
)

// String names the kind as the API lists it: static, spa, process, wasm or js.
func (k Kind) String() string {
	switch k {
	case Files:
		return "static"
	case SPA:
		return "spa"
	case Process:
		return "process"
	case Wasm:
		return "wasm"
	case JS:
		return "js"
	}
	return "static"
}

// Runs reports whether versions of the kind run in a process of their own (the pool's): a
// process worker or a JavaScript worker.
func (k Kind) Runs() bool { return k == Process || k == JS }

// Code reports whether versions of the kind run code (a process, a JavaScript module or a
// WebAssembly module), which the code-worker keys (.env, envPrefix) apply to.
func (k Kind) Code() bool { return k.Runs() || k == Wasm }

// Defaults of the manifest keys of process workers.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultTTL          = 60 * time.Second
	DefaultMaxBodySize  = 10 << 20
	DefaultStartTimeout = 10 * time.Second
)

// DefaultEnvPrefix are the prefixes of the variables an HTML answer gets as window.__env__
// when the manifest names none (envPrefix), as the older implementation had them.
var DefaultEnvPrefix = []string{"PUBLIC_", "VITE_"}

// Manifest holds the serving keys of a worker version's manifest.
type Manifest struct {
	Entrypoint string            `yaml:"entrypoint"`
	InjectBase bool              `yaml:"injectBase"`
	Command    []string          `yaml:"command"`
	Env        map[string]string `yaml:"env"`
	// EnvPrefix names the prefixes of the variables of Env (with the version's .env merged)
	// that an HTML answer of a code worker gets as window.__env__; nil is DefaultEnvPrefix, an
	// empty list injects none.
	EnvPrefix    []string `yaml:"envPrefix"`
	Timeout      Duration `yaml:"timeout"`
	TTL          TTL      `yaml:"ttl"`
	StartTimeout Duration `yaml:"startTimeout"`
	MaxRequests  int      `yaml:"maxRequests"`
	MaxBodySize  Size     `yaml:"maxBodySize"`
	Limits       Limits   `yaml:"limits"`
	// Runtime is "wasm" for a WebAssembly worker, which runs Module (a path in its folder).
	Runtime string `yaml:"runtime"`
	Module  string `yaml:"module"`
	// Healthcheck, when set, is what a new version of a process worker must answer before it
	// is served (see Activator); nil: listening on PORT within startTimeout is enough.
	Healthcheck *Healthcheck `yaml:"healthcheck"`
	// Listen is how the process takes connections: ListenPort or ListenSocket.
	Listen string `yaml:"listen"`
	// Cron are the requests the runtime sends the worker on a schedule (see CronTrigger).
	Cron []CronTrigger `yaml:"cron"`
	// Database gives the worker a database of its own (package databases), named by
	// DATABASE_URL, bounded by limits.database.
	Database bool `yaml:"database"`
	// LowMemory runs a JavaScript worker on Bun with its smaller heap (bun --smol); the other
	// engines have no such mode and ignore it.
	LowMemory bool `yaml:"lowMemory"`
	// AutoInstall runs a JavaScript worker's engine's frozen, script-less install of its
	// package.json and lock file once at upload, sandboxed (see JSHost.Install).
	AutoInstall bool `yaml:"autoInstall"`
}

// RuntimeWasm is the manifest's runtime of WebAssembly workers.
const RuntimeWasm = "wasm"

// The manifest's runtimes of JavaScript workers: RuntimeJS runs the module in the server's
// default engine (setting js_runtime), the others in that engine.
const (
	RuntimeJS   = "js"
	RuntimeBun  = "bun"
	RuntimeDeno = "deno"
	RuntimeNode = "node"
)

// jsRuntime reports whether a manifest's runtime asks for a JavaScript worker: js, or one of
// the engines (config.JSEngineNames).
func jsRuntime(runtime string) bool {
	return runtime == RuntimeJS || slices.Contains(config.JSEngineNames, runtime)
}

// IsScript reports whether the file name is a JavaScript or TypeScript module's, which makes
// the version it is the entrypoint of a JavaScript worker.
func IsScript(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".ts", ".js", ".mjs", ".tsx", ".jsx", ".mts", ".cjs", ".cts":
		return true
	}
	return false
}

// How a process worker takes connections (manifest key listen).
const (
	// ListenPort: it listens on $HOST:$PORT, which the runtime polls until it accepts.
	ListenPort = "port"
	// ListenSocket: it accepts on the listening socket the runtime hands over as descriptor 3
	// (socket activation); it is ready the moment it starts, and the first requests wait in
	// the socket's queue. Where the sandbox cannot hand one over (not Linux) it gets a PORT.
	ListenSocket = "socket"
)

// Limits are the resources a process worker asks for; the operator's settings cap them.
type Limits struct {
	Memory    Size    `yaml:"memory"`
	Processes int     `yaml:"processes"`
	CPU       float64 `yaml:"cpu"`
	Scratch   Size    `yaml:"scratch"`
	Database  Size    `yaml:"database"`
}

func (l Limits) sandbox() sandbox.Limits {
	return sandbox.Limits{Memory: int64(l.Memory), Processes: l.Processes, CPU: l.CPU, Scratch: int64(l.Scratch), Database: int64(l.Database)}
}

// DatabaseLimit is the bytes the worker's database may hold: limits.database, capped by
// limit (worker_database_size), which is also its default.
func (m Manifest) DatabaseLimit(limit int64) int64 {
	return m.Limits.sandbox().Cap(sandbox.Limits{Database: limit}).Database
}

// ReadManifest decodes the serving keys of a version and fills in the defaults.
func ReadManifest(md packages.Metadata) (Manifest, error) {
	var m Manifest
	if err := md.Decode(&m); err != nil {
		return m, err
	}
	// The entry found in the folder wins over a named entrypoint that is not there; one found
	// by its name alone (index.ts) makes a JavaScript worker, an index.html found so stays a
	// plain static folder, as before. A JavaScript runtime runs a module: without an
	// entrypoint, the first found (index.ts beside an index.html).
	switch {
	case len(m.Command) > 0 || m.Runtime == RuntimeWasm:
	case jsRuntime(m.Runtime):
		if IsScript(md.Entry) {
			m.Entrypoint = md.Entry
		} else if m.Entrypoint == "" {
			m.Entrypoint = md.Module
		}
	case md.Entry != "" && (m.Entrypoint != "" || IsScript(md.Entry)):
		m.Entrypoint = md.Entry
	}
	if m.MaxRequests < 0 {
		return m, fmt.Errorf("maxRequests must be 0 (unlimited) or more")
	}
	if m.Limits.Processes < 0 || m.Limits.CPU < 0 {
		return m, fmt.Errorf("limits.processes and limits.cpu must be positive")
	}
	if err := m.checkRuntime(); err != nil {
		return m, err
	}
	switch m.Listen {
	case "":
		m.Listen = ListenPort
	case ListenPort, ListenSocket:
	default:
		return m, fmt.Errorf("listen %q: write port (the worker listens on $PORT) or socket (it accepts on descriptor 3, LISTEN_FDS)", m.Listen)
	}
	if m.EnvPrefix == nil {
		m.EnvPrefix = slices.Clone(DefaultEnvPrefix)
	}
	if slices.Contains(m.EnvPrefix, "") {
		return m, fmt.Errorf("envPrefix lists an empty prefix, which would publish every variable of env; name prefixes such as PUBLIC_, or write envPrefix: [] for none")
	}
	if m.TTL.Duration == 0 && !m.TTL.Fresh {
		m.TTL.Duration = Duration(DefaultTTL)
	}
	for key, def := range map[*Duration]time.Duration{&m.Timeout: DefaultTimeout, &m.StartTimeout: DefaultStartTimeout} {
		if *key == 0 {
			*key = Duration(def)
		}
	}
	if m.MaxBodySize == 0 {
		m.MaxBodySize = DefaultMaxBodySize
	}
	if m.Healthcheck != nil {
		if err := m.Healthcheck.check(m.Kind()); err != nil {
			return m, err
		}
	}
	if err := m.checkCron(m.Kind()); err != nil {
		return m, err
	}
	return m, nil
}

// checkRuntime checks runtime and module: a WebAssembly worker names its module and
// nothing else to run.
func (m Manifest) checkRuntime() error {
	switch {
	case m.Runtime == "" && m.Module != "":
		return fmt.Errorf("module is the WebAssembly module of a worker with runtime: wasm; add runtime: wasm")
	case m.Runtime == "":
		return nil
	case jsRuntime(m.Runtime):
		return m.checkScript()
	case m.Runtime != RuntimeWasm:
		return fmt.Errorf("runtime %q is unknown: write wasm, or js, bun, deno or node for a JavaScript worker (leave it out for static and process workers)", m.Runtime)
	case m.Module == "":
		return fmt.Errorf("runtime: wasm needs module, the WebAssembly file to run (module: app.wasm)")
	case len(m.Command) > 0 || m.Entrypoint != "":
		return fmt.Errorf("a worker with runtime: wasm runs its module; remove command and entrypoint")
	}
	return nil
}

// checkScript checks the manifest of a worker with a JavaScript runtime: it runs its module,
// a JavaScript or TypeScript entrypoint, and nothing else.
func (m Manifest) checkScript() error {
	switch {
	case len(m.Command) > 0:
		return fmt.Errorf("a worker with runtime: %s runs its entrypoint in the JavaScript engine; remove command (or runtime, to run the command)", m.Runtime)
	case m.Module != "":
		return fmt.Errorf("module is the WebAssembly module of a worker with runtime: wasm; a worker with runtime: %s runs its entrypoint: remove module", m.Runtime)
	case !IsScript(m.Entrypoint):
		return fmt.Errorf("runtime: %s runs a JavaScript or TypeScript module: add index.ts (or index.js, index.mjs) or name one with entrypoint", m.Runtime)
	}
	return nil
}

// checkEnv refuses an env name the runtime sets itself (manifestVariable), for every kind of
// worker: the runtime's value would win, or for CGI's HTTP_* a visitor's header would. Admit
// checks it, so uploads, manifest writes and enables are refused; a version put on disk by
// hand is still served, the runtime's variables winning (see environ and serving's wasmEnv).
func (m Manifest) checkEnv() error { return checkNames("env", m.Env) }

// checkNames refuses the first name of vars, which source sets (env, .env), that the runtime
// sets itself.
func checkNames(source string, vars map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		if !manifestVariable(name) {
			return fmt.Errorf("%s %s is set by the runtime (a process worker's PORT, HOST, TMPDIR and LISTEN_*, "+
				"a WebAssembly worker's CGI variables such as HTTP_*, SERVER_NAME, REMOTE_ADDR and PATH_INFO); choose another name", source, name)
		}
	}
	return nil
}

// Kind tells how the version is served.
func (m Manifest) Kind() Kind {
	switch {
	case m.Runtime == RuntimeWasm:
		return Wasm
	case len(m.Command) > 0:
		return Process
	case jsRuntime(m.Runtime) || IsScript(m.Entrypoint):
		return JS
	case m.Entrypoint == "":
		return Files
	case isHTML(m.Entrypoint):
		return SPA
	}
	return Process // an executable entrypoint
}

func isHTML(name string) bool {
	lower := strings.ToLower(name)
	return strings.HasSuffix(lower, ".html") || strings.HasSuffix(lower, ".htm")
}

// Duration is a manifest duration: a string such as "30s" or "2m", or a number of seconds.
type Duration time.Duration

// UnmarshalYAML reads "30s" or 30.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if secs, err := strconv.ParseFloat(n.Value, 64); err == nil && n.Tag != "!!str" {
		if secs <= 0 {
			return fmt.Errorf("duration %q must be positive", n.Value)
		}
		*d = Duration(secs * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil || v <= 0 {
		return fmt.Errorf("duration %q: write it like 30s, 2m or a number of seconds", n.Value)
	}
	*d = Duration(v)
	return nil
}

// TTL is the manifest's ttl: how long an idle process is kept, or, written out as 0, Fresh.
type TTL struct {
	Duration
	// Fresh is set by ttl: 0 (or 0s) written out: a fresh process for each request, stopped
	// once it has answered. An absent ttl is DefaultTTL.
	Fresh bool
}

// UnmarshalYAML reads 0 as Fresh, anything else as a Duration.
func (t *TTL) UnmarshalYAML(n *yaml.Node) error {
	if secs, err := strconv.ParseFloat(n.Value, 64); err == nil && secs == 0 {
		*t = TTL{Fresh: true}
		return nil
	}
	if d, err := time.ParseDuration(n.Value); err == nil && d == 0 {
		*t = TTL{Fresh: true}
		return nil
	}
	return t.Duration.UnmarshalYAML(n)
}

// Size is a manifest byte size: a string such as "10MiB" or a number of bytes.
type Size int64

// UnmarshalYAML reads "10MiB" or 10485760.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	v, err := humanize.ParseBytes(n.Value)
	if err != nil || v == 0 {
		return fmt.Errorf("size %q: write it like 10MiB or a number of bytes", n.Value)
	}
	*s = Size(v)
	return nil
}
