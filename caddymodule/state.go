package caddymodule

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/cluster"
	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/internal/cron"
	"github.com/caddy-runtime/runtime/internal/databases"
	"github.com/caddy-runtime/runtime/internal/events"
	"github.com/caddy-runtime/runtime/internal/hosts"
	"github.com/caddy-runtime/runtime/internal/lifecycle"
	"github.com/caddy-runtime/runtime/internal/packagestore"
	"github.com/caddy-runtime/runtime/internal/pluginhost"
	"github.com/caddy-runtime/runtime/internal/serving"
	"github.com/caddy-runtime/runtime/internal/troubleshooting"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// states holds the long-lived runtime state, keyed by the settings it depends on, so a config
// reload with the same settings reuses it instead of rebuilding it: the new config's App
// acquires it before the old one's releases it.
var states = caddy.NewUsagePool()

// stateSettings are the settings the state depends on, in the order of config.Definitions: a
// reload that changes one of them starts a new state, which stops the running process workers
// (the next request starts them again); every other setting applies from the next request.
// docs/configuration.md, Reloads, lists them.
var stateSettings = []string{
	"worker_dirs", "plugin_dirs", "state_dir", "max_upload_size", "max_unpacked_size", "max_archive_entries",
	"pool_size", "key_store", "sync_url", "sync_token", "sync_interval", "sync_admin_url", "sync_admin_token",
	"package_store", "endpoint", "bucket", "region", "prefix", "access_key_id", "secret_access_key", "path_style", "process_workers", "worker_user", "worker_group", "worker_read_dirs", "scratch_dir",
	"worker_network", "worker_scratch", "worker_database_size", "worker_memory", "worker_processes", "worker_max_files", "worker_cpu", "worker_log_rate", "worker_log_lines",
	"worker_fresh_concurrency", "worker_fresh_queue",
	"js_runtime", "js_registry", "js_install_timeout",
}

// stateKey identifies the state an App needs (the values of stateSettings): the configs of a
// reload with equal keys share one state.
func stateKey(s config.Settings) string {
	return strings.Join([]string{
		fmt.Sprintf("limits=%d/%d/%d pool=%d", s.MaxUploadSize, s.MaxUnpackedSize, s.MaxArchiveEntries, s.PoolSize),
		"workers=" + strings.Join(s.WorkerDirs, "\x00"),
		"plugins=" + strings.Join(s.PluginDirs, "\x00"),
		"state=" + s.StateDir,
		"keystore=" + s.KeyStore + syncKey(s.Sync),
		"packagestore=" + packageStoreKey(s.PackageStore),
		fmt.Sprintf("sandbox=%s:%s/%q/%s/%s/%d/%d/%d/%d/%d/%g/%d/%s", s.WorkerUser, s.WorkerGroup, s.WorkerReadDirs, s.ScratchDir, s.WorkerNetwork,
			s.WorkerScratch, s.WorkerDatabase, s.WorkerMemory, s.WorkerProcesses, s.WorkerMaxFiles, s.WorkerCPU, s.WorkerLogRate, s.ProcessWorkers),
		fmt.Sprintf("log_lines=%d", s.WorkerLogLines),
		fmt.Sprintf("fresh=%d/%d", s.WorkerFreshConcurrency, s.WorkerFreshQueue),
		fmt.Sprintf("js=%s %v install=%s %s", s.JSEngines.Default, s.JSEngines.Paths, s.JSRegistry, s.JSInstallTimeout),
	}, "\n")
}

// syncKey identifies the primary and the way to it: a new token starts a new state (the token
// as a hash, as the key is kept in memory).
func syncKey(s config.SyncSettings) string {
	if s.URL == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s.Token))
	admin := sha256.Sum256([]byte(s.AdminToken))
	return fmt.Sprintf(" %s %x %s %s %x", s.URL, sum[:8], s.Interval, s.AdminURL, admin[:8])
}

// packageStoreKey identifies the package store: its place and its credentials (the secret as
// a hash, as the key is kept in memory).
func packageStoreKey(s config.StoreSettings) string {
	if s.Kind != config.StoreS3 {
		return s.Kind
	}
	o := s.S3
	sum := sha256.Sum256([]byte(o.SecretAccessKey))
	return fmt.Sprintf("s3 %q %q %q %q %q %x %t", o.Endpoint, o.Bucket, o.Region, o.Prefix, o.AccessKeyID, sum[:8], o.PathStyle)
}

const (
	phaseStarting int32 = iota
	phaseReady
	phaseStopped
)

// state is the runtime's long-lived state. Creating it is free of side effects; start opens
// what it needs, once, when the runtime app starts; Destruct releases it when the last config
// using it goes away.
type state struct {
	settings config.Settings
	// store is the package store of a cluster (package_store), nil for local folders only.
	store     packagestore.Store
	logger    *zap.Logger
	phase     atomic.Int32
	startOnce sync.Once
	startErr  error
	// life is the state's parts in the order they start (see parts); Destruct stops them in
	// the reverse order.
	life *lifecycle.List
	// started is closed once the first config using the state has started (startResult nil)
	// or failed to (its error), or the state went first; requests arriving meanwhile wait
	// for it (awaitStart).
	started       chan struct{}
	startedOnce   sync.Once
	startResult   error
	keys          atomic.Pointer[keystore.Store]
	workerCatalog *packages.Catalog
	pluginCatalog *packages.Catalog
	// procs builds the process pool; pool is it once requests may use it (see activate).
	procs    processes
	pool     atomic.Pointer[workers.Pool]
	versions *serving.Versions
	// wasm runs WebAssembly workers (see wasm.go), set when the state has started.
	wasm       atomic.Pointer[wasmState]
	wasmBudget atomic.Int64 // wasm_compiled_memory of the latest config
	wasmCache  atomic.Int64 // wasm_cache_size of the latest config

	maxHeader     atomic.Int64 // worker_max_header_size of the latest config, for health checks
	wasmModule    atomic.Int64 // wasm_max_module_size of the latest config
	wasmInstances atomic.Int64 // wasm_memory_budget of the latest config
	// activations say which version of each worker is active here; activator checks new ones.
	activations *workers.Activations
	activator   *workers.Activator
	// splits are the traffic splits in force, which traffic keeps as the key store holds them.
	splits  *serving.Splits
	traffic *trafficFollower
	// router maps host names to workers: the latest config's workers_domain, and the verified
	// custom domains, which domains keeps as the key store holds them.
	router  hosts.Router
	domains *domainFollower
	// expireDomains drops the custom domain claims pending for too long.
	expireDomains expireDomains
	// apiHosts are the host names of the latest config's site blocks serving the API: no
	// worker may take one as a custom domain.
	apiHosts atomic.Pointer[[]string]
	// The state's events: what changed in the unit catalogs, and requests to reload plugins.
	workerChanges, pluginChanges events.Bus[packages.Change]
	pluginReloads                events.Bus[pluginhost.Reload]
	// instanceID tells this instance from the others sharing a primary, kept in state_dir
	// (set by prepare); address is where it is reached, from the latest config's listeners.
	instanceID string
	address    atomic.Pointer[string]
	// audit prunes the audit trail past the latest config's retention.
	audit auditPruner
	// cluster is this instance's part of a cluster (see clustered), set when the state has
	// started; clusterLoop runs it.
	cluster     atomic.Pointer[cluster.Cluster]
	clusterLoop lifecycle.Loop
	// requests counts the requests the handlers have taken in, in a cluster: background
	// installs yield the cores to them (reconcile.Options.Activity).
	requests atomic.Uint64
	// secrets are the workers' secrets: the key, and what the running processes were given.
	secrets secretState
	// cron runs the workers' cron triggers; ticks go through the data plane of the latest
	// config's handler serving workers (tick), nil while none does.
	cron *cron.Scheduler
	tick atomic.Pointer[Handler]
	// databases are the workers' own databases (manifest database: true).
	databases *databases.Manager
}

// workerDatabases returns the manager of the workers' databases: files under state_dir on
// one instance, namespaces on the primary in sync mode. Making it touches nothing.
func workerDatabases(s config.Settings) *databases.Manager {
	dir := filepath.Join(s.StateDir, "databases")
	if s.KeyStore != "sync" {
		return databases.New(dir, nil)
	}
	remote, err := databases.NewRemote(s.Sync.URL, s.Sync.Token, s.Sync.AdminURL, s.Sync.AdminToken)
	if err != nil {
		return databases.Refusing(err)
	}
	return databases.New(dir, remote)
}

func newState(s config.Settings, store packagestore.Store, logger *zap.Logger) *state {
	limits := packages.Limits{Upload: s.MaxUploadSize, Unpacked: s.MaxUnpackedSize, Entries: s.MaxArchiveEntries}
	st := &state{
		settings: s, store: store, logger: logger,
		workerCatalog: packages.NewCatalog(packages.WorkerLayout, s.WorkerDirs, limits),
		pluginCatalog: packages.NewCatalog(packages.PluginLayout, s.PluginDirs, limits),
		versions:      serving.NewVersions(),
		splits:        serving.NewSplits(),
		started:       make(chan struct{}),
	}
	st.activations = workers.NewActivations(workers.ActivationsPath(s.StateDir), logger.Named("workers"))
	st.activator = workers.NewActivator(workers.ActivatorOptions{Workers: st.workerCatalog, Pool: st.workerPool,
		Activations: st.activations, Logger: logger.Named("workers"), MaxHeaderSize: st.maxHeader.Load})
	st.databases = workerDatabases(s)
	st.procs = processes{settings: s, logger: logger, secrets: st.workerSecrets, databases: st.databases}
	st.audit = auditPruner{keys: st.keys.Load, logger: logger}
	st.traffic = newTrafficFollower(st.keys.Load, st.splits, logger)
	st.domains = newDomainFollower(st.keys.Load, &st.router, logger)
	st.expireDomains = expireDomains{keys: st.keys.Load, logger: logger}
	st.secrets = secretState{pool: st.workerPool}
	st.secrets.follower = follower{what: "the workers' secrets", topic: keystore.SecretsTopic, keys: st.keys.Load,
		apply: st.secrets.apply, logger: logger}
	st.cron = cron.New(cron.Options{Workers: st.workerCatalog, Activations: st.activations, Keys: st.keys.Load,
		Instance: func() string { return st.instanceID }, Clustered: s.KeyStore == "sync", Dispatch: st.cronDispatch,
		Metrics: runtimeMetrics, Logger: logger.Named("cron")})
	st.workerCatalog.OnChange(st.workerChanges.Publish)
	st.pluginCatalog.OnChange(st.pluginChanges.Publish)
	st.life = lifecycle.New(st.parts()...)
	return st
}

// parts are the state's parts in the order start opens them; Destruct stops them in the
// reverse order, so each stops before what it uses: the key store closes last.
func (s *state) parts() []lifecycle.Part {
	parts := []lifecycle.Part{
		{Name: "folders", Start: s.prepare},
		{Name: "key store", Start: s.openKeyStore, Stop: func() error {
			if store := s.keys.Swap(nil); store != nil {
				return store.Close()
			}
			return nil
		}},
		// Built by newState: closed after everything that changes units, before the key store.
		{Name: "catalogs", Stop: func() error {
			s.workerCatalog.Close()
			s.pluginCatalog.Close()
			s.versions.Close()
			return nil
		}},
		lifecycle.Of("audit pruning", &s.audit),
		lifecycle.Of("traffic splits", s.traffic),
		{Name: "bootstrap key check", Start: s.removeStaleBootstrap},
		lifecycle.Of("process pool", &s.procs),
		// Closed after the engine, whose instances use them.
		{Name: "WebAssembly workers' databases", Stop: func() error { s.databases.Close(); return nil }},
		{Name: "WebAssembly engine", Start: s.openWasm, Stop: s.closeWasm},
		// After the pool and the engine: the activator closes before them (a check cut short is
		// not a failed one), and a version's process stops before it is checked anew.
		{Name: "activations", Start: s.activate, Stop: func() error {
			s.activator.Close()
			s.pool.Store(nil)
			return nil
		}},
		// Before the key store closes under them.
		lifecycle.Of("custom domains", s.domains),
		lifecycle.Of("custom domain expiry", &s.expireDomains),
		lifecycle.Of("secrets", &s.secrets),
		// After the activations and the pool, which its ticks' requests reach, so it stops first.
		lifecycle.Of("cron", s.cron),
	}
	if s.clustered() {
		// Last: it stops first, before the key store and the catalogs close under it.
		parts = append(parts, lifecycle.Part{Name: "cluster", Start: s.openCluster, Stop: s.clusterLoop.Stop})
	}
	return parts
}

// start prepares the state on the first start of a config that uses it; later starts (config
// reloads) find it ready.
func (s *state) start() error {
	s.startOnce.Do(func() {
		if s.startErr = s.life.Start(); s.startErr != nil {
			if errors.Is(s.startErr, lifecycle.ErrStopped) {
				s.startErr = errShuttingDown
			}
			return
		}
		s.phase.CompareAndSwap(phaseStarting, phaseReady)
		s.logger.Info("runtime state started",
			zap.Strings("worker_dirs", s.settings.WorkerDirs),
			zap.Strings("plugin_dirs", s.settings.PluginDirs),
			zap.String("state_dir", s.settings.StateDir),
			zap.String("key_store", s.settings.KeyStore), zap.String("sync_url", s.settings.Sync.URL))
	})
	return s.startErr
}

// prepare creates the state folder and the writable unit folders; built-in folders (names
// starting with ".") are provided by the image and never created.
func (s *state) prepare() error {
	for _, dirs := range []struct {
		setting string
		list    []string
	}{{"worker_dirs", s.settings.WorkerDirs}, {"plugin_dirs", s.settings.PluginDirs}} {
		for _, dir := range dirs.list {
			if strings.HasPrefix(filepath.Base(dir), ".") {
				continue
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("creating %s entry: %w", dirs.setting, err)
			}
		}
	}
	// Last, so that shared parent folders get the unit folders' mode, not this one's.
	if err := os.MkdirAll(s.settings.StateDir, 0o700); err != nil {
		return fmt.Errorf("creating state_dir: %w", err)
	}
	if err := tightenState(s.settings.StateDir, s.logger); err != nil {
		return err
	}
	var err error
	if s.instanceID, err = keystore.InstanceID(s.settings.StateDir); err != nil {
		return err
	}
	// Workers may pass through (to their own folder, which only they may open) but not list it.
	if err := os.MkdirAll(s.settings.ScratchDir, 0o711); err != nil {
		return fmt.Errorf("creating scratch_dir: %w", err)
	}
	if err := os.Chmod(s.settings.ScratchDir, 0o711); err != nil {
		return fmt.Errorf("scratch_dir: %w", err)
	}
	for _, c := range []*packages.Catalog{s.workerCatalog, s.pluginCatalog} {
		if err := c.CleanTemp(); err != nil {
			return fmt.Errorf("cleaning up after an interrupted upload: %w", err)
		}
	}
	if s.store != nil {
		if err := checkPackageStore(context.Background(), s.store); err != nil {
			return err
		}
		s.logger.Info("package store", zap.Object("package_store", s3Options(s.settings.PackageStore.S3)))
	}
	return nil
}

// removeStaleBootstrap removes a bootstrap key file whose key no longer works, and says why.
func (s *state) removeStaleBootstrap() error {
	store := s.keys.Load()
	why, err := store.RemoveStaleBootstrap(context.Background())
	if err != nil {
		return fmt.Errorf("checking the bootstrap key: %w", err)
	}
	if why != "" {
		s.logger.Warn(keystore.BootstrapRemovedMessage, zap.String("file", store.BootstrapPath()), zap.String("reason", why),
			troubleshooting.BootstrapKeyDeleted.Field())
	}
	return nil
}

// activate makes the pool the one requests use, once a version's process goes when the
// version is disabled, replaced, removed or edited, and the activations are loaded.
func (s *state) activate() error {
	pool := s.procs.pool
	s.workerChanges.Subscribe(func(ch packages.Change) {
		switch ch.Op {
		case packages.OpInstalled, packages.OpRemoved, packages.OpDisabled, packages.OpFiles:
			pool.StopUnit(ch.Name, ch.Version)
		}
	})
	// After the pool has stopped the old process: a new version is checked on a new one.
	if err := s.activations.Load(); err != nil {
		return err
	}
	s.workerChanges.Subscribe(s.activator.Changed)
	s.pool.Store(pool)
	return nil
}

// tightenState makes dir, state_dir, owner-only (0700) and the files directly in it 0600,
// logging each change: it holds the key store and the bootstrap key. Links and folders in it
// are left alone. Windows keeps no such modes.
func tightenState(dir string, logger *zap.Logger) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	tighten := func(path string, mode fs.FileMode, was fs.FileMode) error {
		if was == mode {
			return nil
		}
		if err := os.Chmod(path, mode); err != nil {
			return fmt.Errorf("state_dir: %s has mode %#o and cannot be made %#o: %w; fix its owner or mode", path, was, mode, err)
		}
		logger.Warn("tightened the permissions of runtime state, which holds the key store and the bootstrap key",
			zap.String("path", path), zap.String("was", fmt.Sprintf("%#o", was)), zap.String("now", fmt.Sprintf("%#o", mode)),
			troubleshooting.StatePermissions.Field())
		return nil
	}
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state_dir: %w", err)
	}
	if err := tighten(dir, 0o700, info.Mode().Perm()); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("state_dir: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("state_dir: %w", err)
		}
		if err := tighten(filepath.Join(dir, e.Name()), 0o600, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

// workerPool returns the process pool once the state has started.
func (s *state) workerPool() *workers.Pool { return s.pool.Load() }

// keyStoreFile is the key store's file name inside state_dir.
const keyStoreFile = "api-keys.db"

// openKeyStore opens the key store file in state_dir: the store itself (local), or the
// replica of the primary sync_url names (sync).
func (s *state) openKeyStore() error {
	path := filepath.Join(s.settings.StateDir, keyStoreFile)
	var store *keystore.Store
	var err error
	if s.settings.KeyStore != "sync" {
		store, err = keystore.Open(context.Background(), path)
	} else {
		sync := s.settings.Sync
		store, err = keystore.OpenSync(context.Background(), path, keystore.SyncOptions{
			URL: sync.URL, Token: sync.Token, Interval: sync.Interval, Logger: s.logger.Named("key_store"),
		})
	}
	if err != nil {
		return err
	}
	store.SetObserver(runtimeMetrics.KeyStoreQuery)
	s.keys.Store(store)
	return nil
}

// keyStore returns the key store once the state has started.
func (s *state) keyStore() (*keystore.Store, error) {
	if store := s.keys.Load(); store != nil {
		return store, nil
	}
	if err := s.ready(); err != nil {
		return nil, err
	}
	return nil, errStarting
}

// ensureBootstrap creates the first admin key when there is no root key and no active key,
// so a fresh runtime can be managed at all; it logs where the secret is, never the secret.
func (s *state) ensureBootstrap() error {
	store, err := s.keyStore()
	if err != nil {
		return err
	}
	created, err := store.EnsureBootstrap(context.Background())
	if errors.Is(err, keystore.ErrPrimaryUnavailable) {
		// Sync mode: whether the primary holds a key cannot be known now; the keys of the
		// replica, if any, work meanwhile.
		s.logger.Warn("no root key, and the key store primary cannot say whether it holds a key: no bootstrap key was created; "+
			"restart once the primary is reachable, or set root_key", zap.Error(err), troubleshooting.NoBootstrapKey.Field())
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating the bootstrap key: %w", err)
	}
	if created != nil {
		s.logger.Warn("no root key and no API key: created the bootstrap admin key; read it from the file, create your own keys, then revoke it",
			zap.String("file", store.BootstrapPath()),
			zap.String("key_prefix", created.KeyPrefix), troubleshooting.BootstrapKeyCreated.Field())
	}
	return nil
}

var (
	errStarting     = errors.New("the runtime is starting")
	errShuttingDown = errors.New("the runtime is shutting down")
)

// startWait bounds how long a request that arrives while the runtime starts waits for it.
const startWait = 30 * time.Second

// markStarted ends the wait of requests that arrived during the start, with its outcome;
// only the first call counts.
func (s *state) markStarted(err error) {
	s.startedOnce.Do(func() {
		s.startResult = err
		close(s.started)
	})
}

// awaitStart waits until the runtime has started, so that a request arriving while it opens
// its key store is answered as one after it: Caddy starts its apps in no set order, so the
// listeners may serve before the runtime app has started. It gives up after startWait or
// when ctx ends, and reports a failed start.
func (s *state) awaitStart(ctx context.Context) error {
	select {
	case <-s.started:
		return s.startResult
	default:
	}
	timer := time.NewTimer(startWait)
	defer timer.Stop()
	select {
	case <-s.started:
		return s.startResult
	case <-ctx.Done():
		return errStarting
	case <-timer.C:
		return errStarting
	}
}

// ready reports whether the runtime takes traffic.
func (s *state) ready() error {
	if caddy.Exiting() {
		return errShuttingDown
	}
	switch s.phase.Load() {
	case phaseStarting:
		return errStarting
	case phaseStopped:
		return errShuttingDown
	}
	return nil
}

// Destruct releases the state when no config uses it any more: it stops the state's parts
// in the reverse order of their start.
func (s *state) Destruct() error {
	if s.phase.Swap(phaseStopped) == phaseStopped {
		return nil
	}
	s.markStarted(errShuttingDown)
	err := s.life.Stop()
	s.logger.Info("runtime state released", zap.String("state_dir", s.settings.StateDir))
	return err
}

const appID = "runtime"

// App is the runtime app module, the process-wide part of the runtime: its settings are the
// global runtime option ({ runtime { … } } in the Caddyfile), and it owns the one state that
// the runtime handlers of its config share, acquired when the first of them joins and started
// when Caddy starts the config, never by caddy validate. A config without the option gets an
// App of defaults.
//
// Each setting left unset falls back to its RUNTIME_* environment variable, then a default.
type App struct {
	config.AppValues
	// PackageStoreRaw is the package store of a cluster, a module of the runtime.package_stores
	// namespace (s3, or local: none). Unset, RUNTIME_PACKAGE_STORE chooses.
	PackageStoreRaw json.RawMessage `json:"package_store,omitempty" caddy:"namespace=runtime.package_stores inline_key=store"`

	mu sync.Mutex
	// settings are the resolved process-wide settings: of AppValues, and of the handlers' copy
	// once one has joined.
	settings config.Settings
	// state is the state the handlers share, nil until the first joins; stateKey is set while
	// the App holds it, so Cleanup releases it exactly once.
	state    *state
	stateKey string
	// live is state once the app has started it, read without a lock by the TLS permission
	// module during handshakes.
	live atomic.Pointer[state]
	// joined is set once a handler has joined; written is the process-wide settings as
	// written for it: AppValues and the ones it carries itself (the deprecated form). Every
	// other handler must come to the same.
	joined  bool
	written config.AppValues
	// hosts are the handlers' plugin hosts, loaded when the config starts.
	hosts []*pluginhost.Host
	// sharesOrigin is set when a handler serves workers beside the API or the cpanel.
	sharesOrigin bool
	// packageStore is the package store the package_store setting opens; nil for local
	// folders only.
	packageStore packagestore.Store
	storeFromEnv bool // RUNTIME_PACKAGE_STORE chose the store
	logger       *zap.Logger
	ctx          caddy.Context
}

// warnedAdmin is the admin address last warned about, so a reload does not repeat it.
var warnedAdmin atomic.Value

// Provision resolves the app's settings, so a bad one stops caddy validate even in a config
// without a runtime handler. Like the handlers' Provision, it has no irreversible side effects.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	a.ctx = ctx
	var err error
	if a.settings, err = resolveApp(a.AppValues); err != nil {
		return err
	}
	a.packageStore, a.settings.PackageStore, a.storeFromEnv, err = a.loadPackageStore(ctx)
	return err
}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: appID, New: func() caddy.Module { return new(App) }}
}

// resolveApp resolves process-wide settings as written: placeholders, then the environment
// and the defaults, then what this system can honour.
func resolveApp(v config.AppValues) (config.Settings, error) {
	replacePlaceholders(v.StringFields(), v.ListFields())
	settings, err := config.ResolveApp(v, os.Getenv)
	if err != nil {
		return settings, err
	}
	return settings, config.CheckPlatform(settings, runtime.GOOS, os.Geteuid())
}

// join gives a handler the state and the process-wide settings. own is the process-wide
// settings the handler carries itself, the deprecated form: they apply as if written in the
// global option, so one the option sets too must be equal there, and with the option's every
// handler of the config must come to the same settings. The first handler to join acquires
// the state; the handlers' Provision order does not matter, since they all agree.
func (a *App) join(own config.AppValues) (*state, config.Settings, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if names := config.Differing(a.AppValues, own, false); len(names) > 0 {
		return nil, config.Settings{}, fmt.Errorf("%s: set both in the global runtime option and, to another value, in a runtime handler; "+
			"remove them from the handler", strings.Join(names, ", "))
	}
	written := own.Over(a.AppValues)
	if a.joined {
		if names := config.Differing(a.written, written, true); len(names) > 0 {
			return nil, config.Settings{}, fmt.Errorf("%s: the runtime handlers of this config set these differently, "+
				"but they hold for the whole process: %s", strings.Join(names, ", "), moveToApp)
		}
		return a.state, a.settings, nil
	}
	if names := own.Names(); len(names) > 0 {
		a.logger.Warn(strings.Join(names, ", ")+" in a site block's runtime handler: deprecated, and refused in a later release; "+moveToApp,
			zap.Strings("settings", names), troubleshooting.DeprecatedSiteSettings.Field())
		settings, err := resolveApp(written)
		if err != nil {
			return nil, config.Settings{}, err
		}
		settings.PackageStore = a.settings.PackageStore
		a.settings = settings
	}
	// Here, not in Provision: the deprecated form may bring key_store or max_upload_size.
	if err := config.CheckStore(a.settings, a.storeFromEnv, packagestore.MaxSize); err != nil {
		return nil, config.Settings{}, err
	}
	if w := config.RootKeyWarning(a.settings.RootKey); w != "" {
		a.logger.Warn(w, troubleshooting.ShortRootKey.Field())
	}
	if written.RootKey != "" && !strings.Contains(written.RootKey, "{") {
		a.logger.Warn("root_key is written literally in the config, where the admin API and adapted JSON show it; "+
			"use {env.RUNTIME_ROOT_KEY} instead", troubleshooting.RootKeyInConfig.Field())
	}
	for _, k := range []struct{ setting, env, written string }{
		{"secrets_key", "RUNTIME_SECRETS_KEY", written.SecretsKey}, {"secrets_key_old", "RUNTIME_SECRETS_KEY_OLD", written.SecretsKeyOld},
	} {
		if k.written != "" && !strings.Contains(k.written, "{") {
			a.logger.Warn(k.setting+" is written literally in the config, where the admin API and adapted JSON show it; "+
				"use {env."+k.env+"} instead", troubleshooting.SecretsKeyInConfig.Field())
		}
	}
	key := stateKey(a.settings)
	val, _, err := states.LoadOrNew(key, func() (caddy.Destructor, error) {
		return newState(a.settings, a.packageStore, caddy.Log().Named("runtime")), nil
	})
	if err != nil {
		return nil, config.Settings{}, err
	}
	a.state, a.stateKey, a.joined, a.written = val.(*state), key, true, written
	if err := a.state.setSecretsKey(a.settings.SecretsKey, a.settings.SecretsKeyOld); err != nil {
		return nil, config.Settings{}, err
	}
	a.state.audit.retention.Store(int64(a.settings.AuditRetention))
	a.state.workerCatalog.SetRetireDelay(a.settings.RetireDelay)
	a.state.setWasmBudget(a.settings)
	a.state.maxHeader.Store(a.settings.WorkerMaxHeaderSize)
	a.state.pluginCatalog.SetRetireDelay(a.settings.RetireDelay)
	return a.state, a.settings, nil
}

// moveToApp tells where process-wide settings go.
const moveToApp = `move them to the global runtime option, { runtime { … } } at the top of the Caddyfile ` +
	`(in JSON, the runtime app: "apps": {"runtime": {…}})`

func (a *App) track(host *pluginhost.Host, sharesOrigin bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hosts = append(a.hosts, host)
	a.sharesOrigin = a.sharesOrigin || sharesOrigin
}

// Cleanup releases the state; it runs after a failed Provision too, and releases at most once.
func (a *App) Cleanup() error {
	a.mu.Lock()
	key := a.stateKey
	a.stateKey = ""
	a.mu.Unlock()
	if key == "" {
		return nil
	}
	_, err := states.Delete(key)
	return err
}

// sharedOriginWarned makes the shared-origin warning once per process, not once per reload.
var sharedOriginWarned atomic.Bool

// warnSharedOrigin explains, once, why workers beside the API or the cpanel are a risk.
func warnSharedOrigin(logger *zap.Logger) {
	if sharedOriginWarned.CompareAndSwap(false, true) {
		logger.Warn(sharedOriginWarning, troubleshooting.SharedOrigin.Field())
	}
}

// sharedOriginWarning is the start-up warning of a site block serving workers together with
// the API or the cpanel.
const sharedOriginWarning = "workers are served on the same origin as the API or the cpanel: a worker's page runs there " +
	"and can call the API as the admin signed in to the cpanel in that browser; serve workers on their own host: " +
	"a site block with serve api cpanel and workers_url, and another with serve workers (see docs/workers.md#workers-on-their-own-origin)"

// Start starts the state the config's handlers share, and creates the bootstrap key when there
// is no root key. Requests that arrived meanwhile are answered once it returns.
func (a *App) Start() (err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state == nil {
		return nil // no runtime handler in the config
	}
	defer func() { a.state.markStarted(err) }()
	if err := a.state.start(); err != nil {
		return err
	}
	// Here, not in join: a config that fails to start leaves the running one's domain.
	a.state.router.SetDomain(a.settings.WorkersDomain)
	a.live.Store(a.state)
	addr := instanceAddress(a.servers(), hostname)
	a.state.address.Store(&addr)
	if a.settings.RootKey == "" {
		if err := a.state.ensureBootstrap(); err != nil {
			return err
		}
	}
	if a.sharesOrigin {
		warnSharedOrigin(a.logger)
	}
	apiHosts, workerHosts := a.siteHosts()
	a.state.apiHosts.Store(&apiHosts)
	a.warnSameSite(apiHosts, workerHosts)
	for _, host := range a.hosts {
		host.Load()
	}
	a.warnAdmin()
	a.warnAccessLog()
	a.announceReady()
	return nil
}

// servers are the http app's servers in the config being started; none without the app.
func (a *App) servers() map[string]*caddyhttp.Server {
	app, err := a.ctx.AppIfConfigured("http")
	if httpApp, ok := app.(*caddyhttp.App); err == nil && ok {
		return httpApp.Servers
	}
	return nil
}

// warnedAccessLog is set once the access-log warning is out, so reloads do not repeat it.
var warnedAccessLog atomic.Bool

// warnAccessLog warns when a server logs its requests: Caddy's access log records request
// headers, and X-API-Key carries a key in clear (Caddy redacts only Authorization and
// cookies, and logs a copy of the request the runtime cannot touch).
func (a *App) warnAccessLog() {
	for name, srv := range a.servers() {
		if srv.Logs != nil && !warnedAccessLog.Swap(true) {
			a.logger.Warn("Caddy's access log records request headers, X-API-Key included, where API keys are sent in clear; "+
				"filter the header out of the log (see docs/api.md#access-log) or have clients send keys as Authorization: Bearer, "+
				"which Caddy redacts", zap.String("server", name), troubleshooting.AccessLog.Field())
			return
		}
	}
}

// warnAdmin warns when process workers may run and something answers on TCP at Caddy's
// default admin address, where a worker can connect and, if it is an admin endpoint, load a
// config of its own. The config's admin endpoint is listening by the time apps start.
func (a *App) warnAdmin() {
	workers := a.settings.ProcessWorkers.All || len(a.settings.ProcessWorkers.List) > 0
	addr := caddy.DefaultAdminListen
	if !workers || !adminOnTCP(addr) || warnedAdmin.Swap(addr) == addr {
		return
	}
	a.logger.Warn("Caddy's admin endpoint answers on TCP, where process workers can reach it and replace the whole "+
		"configuration; put it on a unix socket in a folder only the runtime's account can open "+
		"(global option: admin unix//run/runtime/admin.sock), or turn it off",
		zap.String("admin", addr), troubleshooting.AdminOnTCP.Field())
}

// Stop does nothing: a state outlives a config and is released by the last config using it.
func (a *App) Stop() error { return nil }

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
	_ caddy.Destructor   = (*state)(nil)
)
