// Package config turns the runtime's settings as written (Caddyfile or JSON) into the effective
// settings, filling each unset value from its RUNTIME_* environment variable and then from a
// built-in default, and refusing invalid values with a message that names the setting.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/caddy-runtime/runtime/internal/hosts"
	"github.com/caddy-runtime/runtime/internal/mount"
	"github.com/caddy-runtime/runtime/internal/secrets"
)

// Values holds every setting as written in a handler: its per-site settings and, deprecated
// there, the process-wide ones, which belong to the runtime app. An empty field is unset: the
// environment variable, then the default, applies.
type Values struct {
	SiteValues
	AppValues
}

// SiteValues are the per-site settings, written in a site block's runtime handler.
type SiteValues struct {
	// APIPrefix is the path in front of /api, e.g. "/_" serves the API at /_/api.
	APIPrefix string `json:"api_prefix,omitempty"`
	// Serve lists the surfaces this handler serves: "api" (with discovery and the docs),
	// "cpanel" and "workers" (workers, plugin routes and hooks), or "all".
	Serve []string `json:"serve,omitempty"`
	// WorkersURL is the workers' base URL when they are served on another origin, e.g.
	// "https://apps.example.com"; discovery reports it.
	WorkersURL string `json:"workers_url,omitempty"`
}

// AppValues are the process-wide settings, those of the runtime app (the global runtime
// option): one value for the process, whatever site blocks serve it.
type AppValues struct {
	// WorkerDirs are the folders holding workers; folders whose name starts with "." are built-in.
	WorkerDirs []string `json:"worker_dirs,omitempty"`
	// PluginDirs are the folders holding plugins, with the same built-in rule.
	PluginDirs []string `json:"plugin_dirs,omitempty"`
	// StateDir holds the key store and other runtime state.
	StateDir string `json:"state_dir,omitempty"`
	// RootKey is the root API key; write it as a placeholder such as {env.RUNTIME_ROOT_KEY}
	// so the secret never lands in the adapted JSON.
	RootKey string `json:"root_key,omitempty"`
	// SecretsKey seals the workers' secrets: 32 random bytes in base64. Write it as a
	// placeholder such as {env.RUNTIME_SECRETS_KEY} so it never lands in the adapted JSON.
	SecretsKey string `json:"secrets_key,omitempty"`
	// SecretsKeyOld is the previous secrets key, while secrets rotate moves the stored secrets
	// to SecretsKey: it opens the values still sealed under it, and seals nothing. Write it as
	// a placeholder such as {env.RUNTIME_SECRETS_KEY_OLD}.
	SecretsKeyOld string `json:"secrets_key_old,omitempty"`
	// SessionTTL is the lifetime of a cpanel session cookie, e.g. "30m", "24h", "7d", "2w".
	SessionTTL string `json:"session_ttl,omitempty"`
	// AuditRetention is how long the audit trail keeps an entry, e.g. "90d".
	AuditRetention string `json:"audit_retention,omitempty"`
	// RetireDelay is how long a replaced or removed unit folder stays readable, e.g. "2s".
	RetireDelay string `json:"retire_delay,omitempty"`
	// SplitHeader names the request header that splits requests without a visitor cookie
	// between the versions of a traffic split, e.g. "X-User-Id"; unset, they split at random.
	SplitHeader string `json:"split_header,omitempty"`
	// MaxUploadSize is the largest accepted upload, in bytes.
	MaxUploadSize int64 `json:"max_upload_size,omitempty"`
	// MaxUnpackedSize bounds the bytes an archive may unpack to.
	MaxUnpackedSize int64 `json:"max_unpacked_size,omitempty"`
	// MaxArchiveEntries bounds the entries of an archive.
	MaxArchiveEntries int `json:"max_archive_entries,omitempty"`
	// PoolSize caps the worker processes running at once.
	PoolSize int `json:"pool_size,omitempty"`
	// KeyStore is the key store mode: "local" or "sync".
	KeyStore string `json:"key_store,omitempty"`
	// SyncURL is the URL of the libSQL primary a sync-mode key store replicates
	// (libsql://, https://, http://, wss:// or ws://), without credentials.
	SyncURL string `json:"sync_url,omitempty"`
	// SyncToken is the primary's auth token; write it as a placeholder such as
	// {env.RUNTIME_AUTH_DB_SYNC_TOKEN} so the secret never lands in the adapted JSON.
	SyncToken string `json:"sync_token,omitempty"`
	// SyncInterval is how often the replica pulls from the primary, e.g. "10s", or a number of
	// seconds.
	SyncInterval string `json:"sync_interval,omitempty"`
	// SyncAdminURL is the address of the primary's admin API (sqld's --admin-listen-addr,
	// e.g. http://127.0.0.1:8081), through which the runtime creates a namespace on the
	// primary for each worker with a database; without it such workers cannot start in sync
	// mode.
	SyncAdminURL string `json:"sync_admin_url,omitempty"`
	// SyncAdminToken is the admin API's key (sqld's --admin-auth-key), or "".
	SyncAdminToken string `json:"sync_admin_token,omitempty"`

	// ProcessWorkers allows process workers: "on", "off", or the namespaces allowed to run
	// them ("@team", "@other").
	ProcessWorkers []string `json:"process_workers,omitempty"`
	// WorkerUser and WorkerGroup run process workers under another account.
	WorkerUser  string `json:"worker_user,omitempty"`
	WorkerGroup string `json:"worker_group,omitempty"`
	// WorkerReadDirs are extra folders process workers may read, e.g. a language runtime.
	WorkerReadDirs []string `json:"worker_read_dirs,omitempty"`
	// ScratchDir holds each process worker's writable scratch folder (its TMPDIR).
	ScratchDir string `json:"scratch_dir,omitempty"`
	// WorkerNetwork is "host" (workers share the host's network) or "isolated" (each worker
	// in a network namespace of its own, serving on a socket the runtime hands over).
	WorkerNetwork string `json:"worker_network,omitempty"`
	// WorkerScratch caps the bytes a process worker may keep in its scratch folder.
	WorkerScratch int64 `json:"worker_scratch,omitempty"`
	// WorkerDatabaseSize caps the bytes of a worker's database (manifest database: true), the
	// default of its limits.database.
	WorkerDatabaseSize int64 `json:"worker_database_size,omitempty"`
	// WorkerMemory caps a process worker's memory, in bytes.
	WorkerMemory int64 `json:"worker_memory,omitempty"`
	// WorkerProcesses caps the processes (and threads) of one process worker.
	WorkerProcesses int `json:"worker_processes,omitempty"`
	// WorkerMaxFiles caps the open descriptors of each process of a process worker
	// (RLIMIT_NOFILE): connections count, so a worker cannot fill the runtime's own limit
	// with connections to it.
	WorkerMaxFiles int `json:"worker_max_files,omitempty"`
	// WorkerCPU caps a process worker's CPU, in cores, e.g. "0.5" or "2".
	WorkerCPU string `json:"worker_cpu,omitempty"`
	// WorkerLogRate caps the output lines per second logged for one process worker.
	WorkerLogRate int `json:"worker_log_rate,omitempty"`
	// WorkerLogLines is how many recent output lines of each worker GET workers/…/logs keeps.
	WorkerLogLines int `json:"worker_log_lines,omitempty"`
	// WorkerFreshConcurrency caps the fresh processes (workers with ttl: 0, a process for each
	// request) running at once, over all workers.
	WorkerFreshConcurrency int `json:"worker_fresh_concurrency,omitempty"`
	// WorkerFreshQueue caps the requests waiting for a fresh process.
	WorkerFreshQueue int `json:"worker_fresh_queue,omitempty"`
	// PluginHandlers lists the handler modules plugin routes may use.
	PluginHandlers []string `json:"plugin_handlers,omitempty"`
	// WasmWorkers allows WebAssembly workers: "on", "off", or the namespaces allowed to run
	// them ("@team").
	WasmWorkers []string `json:"wasm_workers,omitempty"`
	// WasmMemory caps a WebAssembly worker instance's memory, in bytes.
	WasmMemory int64 `json:"wasm_memory,omitempty"`
	// WasmCompiledMemory bounds the memory compiled WebAssembly modules are kept in, in bytes.
	WasmCompiledMemory int64 `json:"wasm_compiled_memory,omitempty"`
	// WasmCacheSize bounds the compiled WebAssembly modules kept on disk in state_dir, in
	// bytes; past it the least recently used are removed.
	WasmCacheSize int64 `json:"wasm_cache_size,omitempty"`
	// WasmConcurrency caps the WebAssembly instances one worker runs at once.
	WasmConcurrency int `json:"wasm_concurrency,omitempty"`
	// WasmMemoryBudget bounds the memory all running WebAssembly instances may reserve
	// together, in bytes: each reserves its largest memory before it starts.
	WasmMemoryBudget int64 `json:"wasm_memory_budget,omitempty"`
	// WasmMaxModuleSize caps the size of a WebAssembly worker's module, in bytes.
	WasmMaxModuleSize int64 `json:"wasm_max_module_size,omitempty"`
	// JSRuntime is the default JavaScript engine of JavaScript workers: bun, deno, node or the
	// absolute path of one of their binaries; unset, the first of them found on PATH.
	JSRuntime string `json:"js_runtime,omitempty"`
	// JSRegistry is the npm registry a JavaScript worker's autoInstall reaches, and the only
	// host it reaches; unset, npm's, every engine's default (DefaultJSRegistry).
	JSRegistry string `json:"js_registry,omitempty"`
	// JSInstallTimeout bounds a JavaScript worker's autoInstall at upload, e.g. "2m".
	JSInstallTimeout string `json:"js_install_timeout,omitempty"`
	// WorkerMaxHeaderSize caps the answer headers the runtime reads from a worker, in bytes.
	WorkerMaxHeaderSize int64 `json:"worker_max_header_size,omitempty"`
	// WorkersDomain gives each worker a host of its own under it: <name>.<domain> and
	// <name>.<scope>.<domain>, e.g. "apps.example.com", or a base URL such as
	// "http://apps.localhost:8080" whose scheme and port the workers' URLs carry.
	WorkersDomain string `json:"workers_domain,omitempty"`
	// DomainResolvers are the DNS servers (host or host:port) asked for the TXT records that
	// verify custom domains; none: the system's resolver.
	DomainResolvers []string `json:"domain_resolvers,omitempty"`
	// MaxPendingDomains caps the custom domains a namespace may hold pending verification.
	MaxPendingDomains int `json:"max_pending_domains,omitempty"`
}

// Settings are the effective settings of a runtime instance.
type Settings struct {
	APIPrefix         string // the API path, e.g. "/api" or "/_/api"
	WorkerDirs        []string
	PluginDirs        []string
	StateDir          string
	RootKey           string
	SecretsKey        string // base64, checked; "" when none is configured
	SecretsKeyOld     string // base64, checked; "" when none is configured
	SessionTTL        time.Duration
	AuditRetention    time.Duration
	RetireDelay       time.Duration
	SplitHeader       string // canonical form; "" splits cookie-less requests at random
	MaxUploadSize     int64
	MaxUnpackedSize   int64
	MaxArchiveEntries int
	PoolSize          int
	KeyStore          string
	Sync              SyncSettings // KeyStore "sync" only
	PackageStore      StoreSettings

	Serve           Surfaces
	WorkersURL      string // "" when workers share the API's origin
	ProcessWorkers  Namespaces
	WorkerUser      string
	WorkerGroup     string
	WorkerReadDirs  []string
	ScratchDir      string
	WorkerNetwork   string // NetworkHost or NetworkIsolated
	WorkerScratch   int64
	WorkerDatabase  int64
	WorkerMemory    int64
	WorkerProcesses int
	WorkerMaxFiles  int
	WorkerCPU       float64 // cores
	WorkerLogRate   int     // lines per second
	WorkerLogLines  int     // lines kept per worker
	// WorkerFreshConcurrency and WorkerFreshQueue gate the fresh processes of ttl: 0.
	WorkerFreshConcurrency int
	WorkerFreshQueue       int
	PluginHandlers         []string

	WasmWorkers         Namespaces
	WasmMemory          int64
	WasmCompiledMemory  int64
	WasmCacheSize       int64
	WasmConcurrency     int
	WasmMemoryBudget    int64
	WasmMaxModuleSize   int64
	JSEngines           JSEngines
	JSRegistry          string
	JSInstallTimeout    time.Duration
	WorkerMaxHeaderSize int64
	WorkersDomain       hosts.Domain // Name "" when unset
	DomainResolvers     []string     // host:port; none for the system's resolver
	MaxPendingDomains   int          // per namespace
}

// SyncSettings are the settings of a sync-mode key store.
type SyncSettings struct {
	URL      string
	Token    string
	Interval time.Duration
	// AdminURL and AdminToken reach the primary's admin API, for the workers' databases.
	AdminURL   string
	AdminToken string
}

// Definition describes one setting: its Caddyfile subdirective (also its JSON key), its
// environment variable, its default as written and where it is written.
// docs/configuration.md explains each one.
type Definition struct {
	Name, Env, Default string
	Scope              Scope
}

// Scope says where a setting is written.
type Scope int

const (
	// Process settings hold for the whole process: they belong to the runtime app, written as
	// the global runtime option.
	Process Scope = iota
	// Site settings hold for one site block: they belong to its runtime handler.
	Site
	// Store settings are the package store's: package_store, the runtime app's module,
	// and the fields of its s3 module (package_store s3 { … }, S3Values), written in the
	// global runtime option only.
	Store
)

// Definitions lists every setting in the order docs/configuration.md documents them.
var Definitions = []Definition{
	{"api_prefix", "RUNTIME_API_PREFIX", "", Site},
	{"worker_dirs", "RUNTIME_WORKER_DIRS", "./data/.apps ./data/apps", Process},
	{"plugin_dirs", "RUNTIME_PLUGIN_DIRS", "./data/.plugins ./data/plugins", Process},
	{"state_dir", "RUNTIME_STATE_DIR", "./data/state", Process},
	{"root_key", "RUNTIME_ROOT_KEY", "", Process},
	{"secrets_key", "RUNTIME_SECRETS_KEY", "", Process},
	{"secrets_key_old", "RUNTIME_SECRETS_KEY_OLD", "", Process},
	{"session_ttl", "RUNTIME_CPANEL_SESSION_TTL", "24h", Process},
	{"audit_retention", "RUNTIME_AUDIT_RETENTION", "90d", Process},
	{"retire_delay", "RUNTIME_RETIRE_DELAY", "2s", Process},
	{"split_header", "RUNTIME_SPLIT_HEADER", "", Process},
	{"max_upload_size", "RUNTIME_MAX_UPLOAD_SIZE", "100MiB", Process},
	{"max_unpacked_size", "RUNTIME_MAX_UNPACKED_SIZE", "1GiB", Process},
	{"max_archive_entries", "RUNTIME_MAX_ARCHIVE_ENTRIES", "20000", Process},
	{"pool_size", "RUNTIME_POOL_SIZE", "16", Process},
	{"key_store", "RUNTIME_AUTH_DB_MODE", "local", Process},
	{"sync_url", "RUNTIME_AUTH_DB_SYNC_URL", "", Process},
	{"sync_token", "RUNTIME_AUTH_DB_SYNC_TOKEN", "", Process},
	{"sync_interval", "RUNTIME_AUTH_DB_SYNC_INTERVAL_SECONDS", "10s", Process},
	{"sync_admin_url", "RUNTIME_AUTH_DB_SYNC_ADMIN_URL", "", Process},
	{"sync_admin_token", "RUNTIME_AUTH_DB_SYNC_ADMIN_TOKEN", "", Process},
	{"package_store", "RUNTIME_PACKAGE_STORE", StoreLocal, Store},
	{"endpoint", "RUNTIME_S3_ENDPOINT", "", Store},
	{"bucket", "RUNTIME_S3_BUCKET", "", Store},
	{"region", "RUNTIME_S3_REGION", "", Store},
	{"prefix", "RUNTIME_S3_PREFIX", "", Store},
	{"access_key_id", "RUNTIME_S3_ACCESS_KEY_ID", "", Store},
	{"secret_access_key", "RUNTIME_S3_SECRET_ACCESS_KEY", "", Store},
	{"path_style", "RUNTIME_S3_PATH_STYLE", "false", Store},
	{"serve", "RUNTIME_SERVE", "all", Site},
	{"workers_url", "RUNTIME_WORKERS_URL", "", Site},
	{"process_workers", "RUNTIME_PROCESS_WORKERS", "on", Process},
	{"worker_user", "RUNTIME_WORKER_USER", "", Process},
	{"worker_group", "RUNTIME_WORKER_GROUP", "", Process},
	{"worker_read_dirs", "RUNTIME_WORKER_READ_DIRS", "", Process},
	{"scratch_dir", "RUNTIME_SCRATCH_DIR", "./data/scratch", Process},
	{"worker_network", "RUNTIME_WORKER_NETWORK", NetworkHost, Process},
	{"worker_scratch", "RUNTIME_WORKER_SCRATCH", "256MiB", Process},
	{"worker_database_size", "RUNTIME_WORKER_DATABASE_SIZE", "256MiB", Process},
	{"worker_memory", "RUNTIME_WORKER_MEMORY", "512MiB", Process},
	{"worker_processes", "RUNTIME_WORKER_PROCESSES", "64", Process},
	{"worker_max_files", "RUNTIME_WORKER_MAX_FILES", "1024", Process},
	{"worker_cpu", "RUNTIME_WORKER_CPU", "1", Process},
	{"worker_log_rate", "RUNTIME_WORKER_LOG_RATE", "100", Process},
	{"worker_log_lines", "RUNTIME_WORKER_LOG_LINES", "1000", Process},
	{"worker_fresh_concurrency", "RUNTIME_WORKER_FRESH_CONCURRENCY", "2", Process},
	{"worker_fresh_queue", "RUNTIME_WORKER_FRESH_QUEUE", "100", Process},
	{"plugin_handlers", "RUNTIME_PLUGIN_HANDLERS", "file_server static_response headers rewrite vars encode", Process},
	{"wasm_workers", "RUNTIME_WASM_WORKERS", "on", Process},
	{"wasm_memory", "RUNTIME_WASM_MEMORY", "128MiB", Process},
	{"wasm_compiled_memory", "RUNTIME_WASM_COMPILED_MEMORY", "256MiB", Process},
	{"wasm_cache_size", "RUNTIME_WASM_CACHE_SIZE", "1GiB", Process},
	{"wasm_concurrency", "RUNTIME_WASM_CONCURRENCY", "8", Process},
	{"wasm_memory_budget", "RUNTIME_WASM_MEMORY_BUDGET", "1GiB", Process},
	{"wasm_max_module_size", "RUNTIME_WASM_MAX_MODULE_SIZE", "64MiB", Process},
	{"js_runtime", "RUNTIME_JS_RUNTIME", "", Process},
	{"js_registry", "RUNTIME_JS_REGISTRY", DefaultJSRegistry, Process},
	{"js_install_timeout", "RUNTIME_JS_INSTALL_TIMEOUT", "2m", Process},
	{"worker_max_header_size", "RUNTIME_WORKER_MAX_HEADER_SIZE", "1MiB", Process},
	{"workers_domain", "RUNTIME_WORKERS_DOMAIN", "", Process},
	{"domain_resolvers", "RUNTIME_DOMAIN_RESOLVERS", "", Process},
	{"max_pending_domains", "RUNTIME_MAX_PENDING_DOMAINS", "10", Process},
}

// Written is the setting as the Caddyfile writes it: its name, and for a field of the s3
// package store the block it goes in.
func (d Definition) Written() string {
	if d.Scope == Store && d.Name != "package_store" {
		return "package_store s3 " + d.Name
	}
	return d.Name
}

// Lookup returns the definition of the named setting.
func Lookup(name string) Definition {
	for _, d := range Definitions {
		if d.Name == name {
			return d
		}
	}
	panic("config: unknown setting " + name)
}

// Error reports an invalid setting, naming it, and its environment variable when the value
// came from there: a value written in the Caddyfile or the JSON config is reported by the
// setting's name alone, so nobody goes looking for a variable that is not set.
type Error struct {
	Setting Definition
	FromEnv bool
	Value   string // empty when the value must not be shown (secrets)
	Reason  string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid %s", e.Setting.Written())
	if e.Value != "" {
		fmt.Fprintf(&b, " %q", e.Value)
	}
	if e.FromEnv {
		fmt.Fprintf(&b, " (from environment variable %s)", e.Setting.Env)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

// Resolve merges v with the environment (read through getenv) and the defaults, validates the
// result and makes every path absolute.
func Resolve(v Values, getenv func(string) string) (Settings, error) {
	s, err := ResolveApp(v.AppValues, getenv)
	if err != nil {
		return s, err
	}
	return ResolveSite(s, v.SiteValues, getenv)
}

// ResolveSite returns app, the process-wide settings, with the per-site settings of v merged
// with the environment and the defaults.
func ResolveSite(app Settings, v SiteValues, getenv func(string) string) (Settings, error) {
	s := app
	var err error
	r := resolver{getenv: getenv}
	raw, fromEnv := r.pick("api_prefix", v.APIPrefix)
	if s.APIPrefix, err = NormalizeAPIPrefix(raw); err != nil {
		return s, r.fail("api_prefix", fromEnv, raw, err)
	}
	list, fromEnv := r.list("serve", v.Serve)
	if s.Serve, err = parseSurfaces(list); err != nil {
		return s, r.fail("serve", fromEnv, strings.Join(list, " "), err)
	}
	raw, fromEnv = r.pick("workers_url", v.WorkersURL)
	if s.WorkersURL, err = checkWorkersURL(raw); err != nil {
		return s, r.fail("workers_url", fromEnv, raw, err)
	}
	return s, nil
}

// ResolveApp resolves the process-wide settings of v as Resolve does; the per-site ones of
// the result stay unset.
func ResolveApp(v AppValues, getenv func(string) string) (Settings, error) {
	var s Settings
	var err error
	r := resolver{getenv: getenv}

	if s.WorkerDirs, err = r.dirs("worker_dirs", v.WorkerDirs); err != nil {
		return s, err
	}
	if s.PluginDirs, err = r.dirs("plugin_dirs", v.PluginDirs); err != nil {
		return s, err
	}
	raw, fromEnv := r.pick("state_dir", v.StateDir)
	if s.StateDir, err = absDir(raw); err != nil {
		return s, r.fail("state_dir", fromEnv, raw, err)
	}
	if err := distinctDirs(s); err != nil {
		return s, err
	}
	raw, fromEnv = r.pick("root_key", v.RootKey)
	if err := checkRootKey(raw); err != nil {
		return s, r.fail("root_key", fromEnv, "", err)
	}
	s.RootKey = raw
	raw, fromEnv = r.pick("secrets_key", v.SecretsKey)
	if raw != "" {
		if _, err := secrets.ParseKey(raw); err != nil {
			return s, r.fail("secrets_key", fromEnv, "", err)
		}
	}
	s.SecretsKey = raw
	raw, fromEnv = r.pick("secrets_key_old", v.SecretsKeyOld)
	if raw != "" {
		if _, err := secrets.ParseKey(raw); err != nil {
			return s, r.fail("secrets_key_old", fromEnv, "", err)
		}
		if s.SecretsKey == "" {
			return s, r.fail("secrets_key_old", fromEnv, "", errors.New("opens what the previous key sealed while secrets_key, the new one, seals; set secrets_key too"))
		}
	}
	s.SecretsKeyOld = raw
	raw, fromEnv = r.pick("session_ttl", v.SessionTTL)
	if s.SessionTTL, err = ParseSessionTTL(raw); err != nil {
		return s, r.fail("session_ttl", fromEnv, raw, err)
	}
	raw, fromEnv = r.pick("audit_retention", v.AuditRetention)
	if s.AuditRetention, err = ParseAuditRetention(raw); err != nil {
		return s, r.fail("audit_retention", fromEnv, raw, err)
	}
	raw, fromEnv = r.pick("retire_delay", v.RetireDelay)
	if s.RetireDelay, err = ParseRetireDelay(raw); err != nil {
		return s, r.fail("retire_delay", fromEnv, raw, err)
	}
	raw, fromEnv = r.pick("split_header", v.SplitHeader)
	if s.SplitHeader, err = ParseSplitHeader(raw); err != nil {
		return s, r.fail("split_header", fromEnv, raw, err)
	}
	if s.MaxUploadSize, err = r.size("max_upload_size", v.MaxUploadSize); err != nil {
		return s, err
	}
	if s.MaxUnpackedSize, err = r.size("max_unpacked_size", v.MaxUnpackedSize); err != nil {
		return s, err
	}
	if s.MaxArchiveEntries, err = r.count("max_archive_entries", v.MaxArchiveEntries); err != nil {
		return s, err
	}
	if s.PoolSize, err = r.count("pool_size", v.PoolSize); err != nil {
		return s, err
	}
	raw, fromEnv = r.pick("key_store", v.KeyStore)
	if s.KeyStore, err = checkKeyStore(raw); err != nil {
		return s, r.fail("key_store", fromEnv, raw, err)
	}
	if s.KeyStore == "sync" {
		if s.Sync, err = r.sync(v); err != nil {
			return s, err
		}
	}
	if err := r.isolation(v, &s); err != nil {
		return s, err
	}
	raw, fromEnv = r.pick("workers_domain", v.WorkersDomain)
	if s.WorkersDomain, err = hosts.ParseDomain(raw); err != nil {
		return s, r.fail("workers_domain", fromEnv, raw, err)
	}
	list, fromEnv := r.list("domain_resolvers", v.DomainResolvers)
	if s.DomainResolvers, err = checkResolvers(list); err != nil {
		return s, r.fail("domain_resolvers", fromEnv, strings.Join(list, " "), err)
	}
	if s.MaxPendingDomains, err = r.count("max_pending_domains", v.MaxPendingDomains); err != nil {
		return s, err
	}
	// The package store is the runtime app's module, which sets its settings in place of these.
	s.PackageStore.Kind = StoreLocal
	return s, nil
}

type resolver struct{ getenv func(string) string }

// pick returns the written value if set, else the environment value, else the default, and
// whether the value came from the environment.
func (r resolver) pick(name, written string) (string, bool) {
	if written != "" {
		return written, false
	}
	d := Lookup(name)
	if env := strings.TrimSpace(r.getenv(d.Env)); env != "" {
		return env, true
	}
	return d.Default, false
}

func (r resolver) fail(name string, fromEnv bool, value string, err error) error {
	return &Error{Setting: Lookup(name), FromEnv: fromEnv, Value: value, Reason: err.Error()}
}

func (r resolver) dirs(name string, written []string) ([]string, error) {
	list, fromEnv := written, false
	if len(list) == 0 {
		var raw string
		raw, fromEnv = r.pick(name, "")
		sep := " "
		if fromEnv {
			sep = ":"
		}
		list = strings.Split(raw, sep)
	}
	out := make([]string, 0, len(list))
	seen := map[string]bool{}
	for _, entry := range list {
		dir, err := absDir(strings.TrimSpace(entry))
		if err != nil {
			return nil, r.fail(name, fromEnv, strings.Join(list, " "), err)
		}
		if seen[dir] {
			return nil, r.fail(name, fromEnv, strings.Join(list, " "), fmt.Errorf("folder %s is listed twice", dir))
		}
		seen[dir] = true
		out = append(out, dir)
	}
	return out, nil
}

func (r resolver) size(name string, written int64) (int64, error) {
	if written < 0 {
		return 0, r.fail(name, false, fmt.Sprint(written), fmt.Errorf("must be a positive number of bytes"))
	}
	if written > 0 {
		return written, nil
	}
	raw, fromEnv := r.pick(name, "")
	n, err := ParseSize(raw)
	if err != nil {
		return 0, r.fail(name, fromEnv, raw, err)
	}
	return int64(n), nil
}

func (r resolver) count(name string, written int) (int, error) {
	if written < 0 {
		return 0, r.fail(name, false, fmt.Sprint(written), fmt.Errorf("must be a positive whole number"))
	}
	if written > 0 {
		return written, nil
	}
	raw, fromEnv := r.pick(name, "")
	n, err := ParseCount(raw)
	if err != nil {
		return 0, r.fail(name, fromEnv, raw, err)
	}
	return n, nil
}

// ParseSplitHeader checks a header name for split_header and returns it in canonical form;
// "" stays "". The runtime's own credential headers and cookies are refused: they would
// split by a secret.
func ParseSplitHeader(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return "", fmt.Errorf("a header name holds letters, digits and !#$%%&'*+-.^_`|~ only")
		}
	}
	canonical := http.CanonicalHeaderKey(s)
	switch canonical {
	case "Cookie", "Authorization", "X-Api-Key", "Proxy-Authorization":
		return "", fmt.Errorf("%s carries credentials; name a header that identifies the user, such as X-User-Id", canonical)
	}
	return canonical, nil
}

// BoolWords are the words a boolean setting takes, as Caddy's own options read naturally:
// on, true and yes turn it on; off, false and no turn it off (in any case).
const BoolWords = "on, off, true, false, yes or no"

// ParseBool reads a boolean setting, in the Caddyfile or from the environment: one parser,
// so every boolean of the runtime takes the same words (BoolWords).
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "on", "true", "yes":
		return true, nil
	case "off", "false", "no":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a boolean: write %s", s, BoolWords)
}

// ParseCount parses a positive whole number of at most 10 000 000.
func ParseCount(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 10_000_000 {
		return 0, fmt.Errorf("want a whole number from 1 to 10000000")
	}
	return n, nil
}

// ParseSize parses a byte size such as "100MiB", "50MB" or "1048576".
func ParseSize(s string) (int64, error) {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("want a size such as 100MiB, 50MB or 1GiB")
	}
	if n == 0 || n > 1<<50 {
		return 0, fmt.Errorf("must be more than 0 bytes and at most 1PiB")
	}
	return int64(n), nil
}

// checkResolvers checks DNS server addresses, host or host:port, and gives each its port (53
// when left out).
func checkResolvers(list []string) ([]string, error) {
	var out []string
	for _, addr := range list {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			host, port = strings.Trim(addr, "[]"), "53"
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" || strings.ContainsAny(host, "/ ") {
			return nil, fmt.Errorf("%q is not a DNS server address: write host or host:port, e.g. 1.1.1.1 or 127.0.0.1:5353", addr)
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	return out, nil
}

func absDir(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("an empty folder name is not allowed")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("cannot resolve folder %s: %w", p, err)
	}
	return abs, nil
}

// distinctDirs refuses a folder used for two purposes: a worker folder that is also a plugin
// folder would list every plugin as a worker.
func distinctDirs(s Settings) error {
	owner := map[string]string{}
	for _, w := range s.WorkerDirs {
		owner[w] = "worker_dirs"
	}
	for _, p := range s.PluginDirs {
		if owner[p] != "" {
			return &Error{Setting: Lookup("plugin_dirs"), Value: p, Reason: "this folder is also in worker_dirs; use separate folders"}
		}
		owner[p] = "plugin_dirs"
	}
	if other := owner[s.StateDir]; other != "" {
		return &Error{Setting: Lookup("state_dir"), Value: s.StateDir, Reason: "this folder is also in " + other + "; use a separate folder"}
	}
	return nil
}

// NormalizeAPIPrefix turns a prefix as written into the API path: "/_" and "_" give "/_/api",
// "/" and "" give "/api".
func NormalizeAPIPrefix(p string) (string, error) {
	p = strings.Trim(strings.TrimSpace(p), "/")
	if p == "" {
		return "/api", nil
	}
	for i, seg := range strings.Split(p, "/") {
		switch {
		case seg == "":
			return "", fmt.Errorf("empty path segment (double slash)")
		case seg == "." || seg == "..":
			return "", fmt.Errorf("path segment %q is not allowed", seg)
		case i == 0 && (seg == mount.WellKnownSegment || seg == mount.CPanelSegment):
			return "", fmt.Errorf("%q is reserved and cannot start the API path", seg)
		}
		for _, c := range seg {
			if !isPathChar(c) {
				return "", fmt.Errorf("character %q is not allowed; use letters, digits, '-', '_', '.' and '~'", c)
			}
		}
	}
	return "/" + p + "/api", nil
}

func isPathChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.~", c)
}

// Root key strength: keys shorter than MinRootKeyLength or with fewer than
// MinRootKeyDistinct different characters are refused; keys shorter than GoodRootKeyLength
// are warned about.
const (
	MinRootKeyLength   = 16
	MinRootKeyDistinct = 12
	GoodRootKeyLength  = 32
)

// generateRootKey tells how to make a good root key.
const generateRootKey = "generate one with: openssl rand -base64 32"

func checkRootKey(k string) error {
	if k == "" {
		return nil
	}
	if len(k) < MinRootKeyLength {
		return fmt.Errorf("must be at least %d characters long; %s", MinRootKeyLength, generateRootKey)
	}
	distinct := map[rune]bool{}
	for _, c := range k {
		if c <= ' ' || c > '~' {
			return fmt.Errorf("must consist of visible ASCII characters only (no spaces or control characters); %s", generateRootKey)
		}
		distinct[c] = true
	}
	if len(distinct) < MinRootKeyDistinct {
		return fmt.Errorf("has only %d distinct characters, at least %d are needed: it is too easy to guess; %s",
			len(distinct), MinRootKeyDistinct, generateRootKey)
	}
	return nil
}

// RootKeyWarning returns why an accepted root key is weak, or "" when it is not.
func RootKeyWarning(k string) string {
	if k == "" || len(k) >= GoodRootKeyLength {
		return ""
	}
	return fmt.Sprintf("root_key is %d characters long; use at least %d random characters: %s",
		len(k), GoodRootKeyLength, generateRootKey)
}

func checkKeyStore(mode string) (string, error) {
	switch m := strings.ToLower(mode); m {
	case "local", "sync":
		return m, nil
	}
	return "", fmt.Errorf("must be local or sync")
}

// sync resolves the settings of a sync-mode key store.
func (r resolver) sync(v AppValues) (SyncSettings, error) {
	var out SyncSettings
	raw, fromEnv := r.pick("sync_url", v.SyncURL)
	if raw == "" {
		return out, r.fail("sync_url", false, "", errors.New("key_store sync needs the primary's URL: write key_store sync { url … } "+
			"or set RUNTIME_AUTH_DB_SYNC_URL"))
	}
	if err := CheckSyncURL(raw); err != nil {
		return out, r.fail("sync_url", fromEnv, "", err) // the value may hold a secret: not shown
	}
	out.URL = raw
	out.Token, _ = r.pick("sync_token", v.SyncToken)
	if strings.ContainsAny(out.Token, " \t\r\n") {
		_, fromEnv = r.pick("sync_token", v.SyncToken)
		return out, r.fail("sync_token", fromEnv, "", errors.New("must not hold spaces or line breaks"))
	}
	raw, fromEnv = r.pick("sync_interval", v.SyncInterval)
	var err error
	if out.Interval, err = ParseSyncInterval(raw); err != nil {
		return out, r.fail("sync_interval", fromEnv, raw, err)
	}
	raw, fromEnv = r.pick("sync_admin_url", v.SyncAdminURL)
	if raw != "" {
		if u, err := url.Parse(raw); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.User != nil {
			return out, r.fail("sync_admin_url", fromEnv, "", errors.New("must be an http:// or https:// URL without credentials (the key goes in admin_token)"))
		}
	}
	out.AdminURL = raw
	out.AdminToken, _ = r.pick("sync_admin_token", v.SyncAdminToken)
	return out, nil
}

// CheckSyncURL checks the URL of a sync-mode key store's primary: a libSQL scheme, a host,
// and no credentials, query or fragment, since the token has a setting of its own that is
// kept out of logs and errors.
func CheckSyncURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a URL")
	}
	switch {
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return errors.New("must not carry credentials, a query or a fragment: give the token in sync_token " +
			"(in the Caddyfile: key_store sync { token … })")
	case !slices.Contains([]string{"libsql", "https", "http", "wss", "ws"}, u.Scheme):
		return fmt.Errorf("scheme %q: use libsql://, https://, http://, wss:// or ws://", u.Scheme)
	case u.Host == "":
		return errors.New("names no host")
	}
	return nil
}

// ParseSyncInterval parses the pull interval of a sync-mode key store: a duration such as
// "10s" or "1m", or a number of seconds, from 1s to 1h.
func ParseSyncInterval(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		n, nerr := strconv.Atoi(s)
		if nerr != nil {
			return 0, errors.New("want a duration such as 10s or 1m, or a number of seconds")
		}
		d = time.Duration(n) * time.Second
	}
	if d < time.Second || d > time.Hour {
		return 0, errors.New("must be from 1s to 1h")
	}
	return d, nil
}
