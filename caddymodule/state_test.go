package caddymodule

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-runtime/runtime/internal/config"
)

// s3Store is an s3 package store's settings, changed by change: a store with one setting
// other than another's.
func s3Store(change func(*config.S3Settings)) config.StoreSettings {
	s := config.S3Settings{Endpoint: "http://127.0.0.1:7070", Bucket: "units", AccessKeyID: "AKID", SecretAccessKey: "secret"}
	change(&s)
	return config.StoreSettings{Kind: config.StoreS3, S3: s}
}

// TestStateSettings changes each setting in turn and checks that exactly stateSettings change
// the state key, and that the README's Reloads section names exactly those settings.
func TestStateSettings(t *testing.T) {
	changes := map[string]func(*config.Settings){
		"api_prefix":          func(s *config.Settings) { s.APIPrefix = "/_/api" },
		"worker_dirs":         func(s *config.Settings) { s.WorkerDirs = append(s.WorkerDirs, "/w") },
		"plugin_dirs":         func(s *config.Settings) { s.PluginDirs = append(s.PluginDirs, "/p") },
		"state_dir":           func(s *config.Settings) { s.StateDir = "/s" },
		"root_key":            func(s *config.Settings) { s.RootKey = "another-root-key-0123456789" },
		"secrets_key":         func(s *config.Settings) { s.SecretsKey = "k" },
		"secrets_key_old":     func(s *config.Settings) { s.SecretsKeyOld = "k" },
		"session_ttl":         func(s *config.Settings) { s.SessionTTL++ },
		"audit_retention":     func(s *config.Settings) { s.AuditRetention++ },
		"retire_delay":        func(s *config.Settings) { s.RetireDelay++ },
		"split_header":        func(s *config.Settings) { s.SplitHeader = "X-User-Id" },
		"max_upload_size":     func(s *config.Settings) { s.MaxUploadSize++ },
		"max_unpacked_size":   func(s *config.Settings) { s.MaxUnpackedSize++ },
		"max_archive_entries": func(s *config.Settings) { s.MaxArchiveEntries++ },
		"pool_size":           func(s *config.Settings) { s.PoolSize++ },
		"key_store":           func(s *config.Settings) { s.KeyStore = "sync" },
		"sync_url":            func(s *config.Settings) { s.Sync.URL = "libsql://keys.example.com" },
		"sync_token":          func(s *config.Settings) { s.Sync = config.SyncSettings{URL: "http://h", Token: "t"} },
		"sync_interval":       func(s *config.Settings) { s.Sync = config.SyncSettings{URL: "http://h", Interval: time.Minute} },
		"sync_admin_url":      func(s *config.Settings) { s.Sync = config.SyncSettings{URL: "http://h", AdminURL: "http://h:8081"} },
		"sync_admin_token":    func(s *config.Settings) { s.Sync = config.SyncSettings{URL: "http://h", AdminToken: "a"} },
		"package_store":       func(s *config.Settings) { s.PackageStore = config.StoreSettings{Kind: config.StoreLocal} },
		"endpoint": func(s *config.Settings) {
			s.PackageStore = s3Store(func(o *config.S3Settings) { o.Endpoint = "https://s3.example.com" })
		},
		"bucket": func(s *config.Settings) { s.PackageStore = s3Store(func(o *config.S3Settings) { o.Bucket = "other" }) },
		"region": func(s *config.Settings) {
			s.PackageStore = s3Store(func(o *config.S3Settings) { o.Region = "eu-west-1" })
		},
		"prefix": func(s *config.Settings) { s.PackageStore = s3Store(func(o *config.S3Settings) { o.Prefix = "prod" }) },
		"access_key_id": func(s *config.Settings) {
			s.PackageStore = s3Store(func(o *config.S3Settings) { o.AccessKeyID = "AKID2" })
		},
		"secret_access_key": func(s *config.Settings) {
			s.PackageStore = s3Store(func(o *config.S3Settings) { o.SecretAccessKey = "another" })
		},
		"path_style":               func(s *config.Settings) { s.PackageStore = s3Store(func(o *config.S3Settings) { o.PathStyle = true }) },
		"serve":                    func(s *config.Settings) { s.Serve.CPanel = !s.Serve.CPanel },
		"workers_url":              func(s *config.Settings) { s.WorkersURL = "https://apps.example.com" },
		"process_workers":          func(s *config.Settings) { s.ProcessWorkers = config.Namespaces{List: []string{"@team"}} },
		"worker_user":              func(s *config.Settings) { s.WorkerUser = "nobody" },
		"worker_group":             func(s *config.Settings) { s.WorkerGroup = "nogroup" },
		"worker_read_dirs":         func(s *config.Settings) { s.WorkerReadDirs = append(s.WorkerReadDirs, "/opt") },
		"scratch_dir":              func(s *config.Settings) { s.ScratchDir = "/scratch" },
		"worker_network":           func(s *config.Settings) { s.WorkerNetwork = config.NetworkIsolated },
		"worker_scratch":           func(s *config.Settings) { s.WorkerScratch++ },
		"worker_database_size":     func(s *config.Settings) { s.WorkerDatabase++ },
		"worker_memory":            func(s *config.Settings) { s.WorkerMemory++ },
		"worker_processes":         func(s *config.Settings) { s.WorkerProcesses++ },
		"worker_max_files":         func(s *config.Settings) { s.WorkerMaxFiles++ },
		"worker_cpu":               func(s *config.Settings) { s.WorkerCPU += 0.5 },
		"worker_log_rate":          func(s *config.Settings) { s.WorkerLogRate++ },
		"worker_log_lines":         func(s *config.Settings) { s.WorkerLogLines++ },
		"plugin_handlers":          func(s *config.Settings) { s.PluginHandlers = append(s.PluginHandlers, "reverse_proxy") },
		"workers_domain":           func(s *config.Settings) { s.WorkersDomain.Name = "apps.example.com" },
		"domain_resolvers":         func(s *config.Settings) { s.DomainResolvers = []string{"127.0.0.1:53"} },
		"wasm_workers":             func(s *config.Settings) { s.WasmWorkers = config.Namespaces{} },
		"wasm_memory":              func(s *config.Settings) { s.WasmMemory++ },
		"wasm_compiled_memory":     func(s *config.Settings) { s.WasmCompiledMemory++ },
		"wasm_cache_size":          func(s *config.Settings) { s.WasmCacheSize++ },
		"max_pending_domains":      func(s *config.Settings) { s.MaxPendingDomains++ },
		"wasm_concurrency":         func(s *config.Settings) { s.WasmConcurrency++ },
		"wasm_memory_budget":       func(s *config.Settings) { s.WasmMemoryBudget++ },
		"wasm_max_module_size":     func(s *config.Settings) { s.WasmMaxModuleSize++ },
		"worker_max_header_size":   func(s *config.Settings) { s.WorkerMaxHeaderSize++ },
		"worker_fresh_concurrency": func(s *config.Settings) { s.WorkerFreshConcurrency++ },
		"worker_fresh_queue":       func(s *config.Settings) { s.WorkerFreshQueue++ },
		"js_runtime": func(s *config.Settings) {
			s.JSEngines = config.JSEngines{Default: "node", Paths: map[string]string{"node": "/usr/bin/node"}}
		},
		"js_registry":        func(s *config.Settings) { s.JSRegistry = "http://127.0.0.1:4873/" },
		"js_install_timeout": func(s *config.Settings) { s.JSInstallTimeout++ },
	}
	base, err := config.Resolve(config.Values{}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	// An s3 store, so that each of its settings changes one thing.
	base.PackageStore = s3Store(func(*config.S3Settings) {})
	var restarting []string
	for _, d := range config.Definitions {
		change, ok := changes[d.Name]
		if !ok {
			t.Fatalf("setting %s has no change in this test; add one", d.Name)
		}
		s := base
		s.WorkerDirs = slices.Clone(base.WorkerDirs)
		s.PluginDirs = slices.Clone(base.PluginDirs)
		s.WorkerReadDirs = slices.Clone(base.WorkerReadDirs)
		s.PluginHandlers = slices.Clone(base.PluginHandlers)
		change(&s)
		if stateKey(s) != stateKey(base) {
			restarting = append(restarting, d.Name)
		}
	}
	if !slices.Equal(restarting, stateSettings) {
		t.Errorf("settings that change the state key = %v, stateSettings = %v", restarting, stateSettings)
	}

	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(doc), "\n## Reloads\n")
	if !found {
		t.Fatal("docs/configuration.md has no section Reloads")
	}
	section, _, _ = strings.Cut(section, "\n#")
	for _, d := range config.Definitions {
		named := strings.Contains(section, "`"+d.Name+"`")
		if want := slices.Contains(stateSettings, d.Name); named != want {
			t.Errorf("docs/configuration.md, Reloads, names `%s`: %v, want %v", d.Name, named, want)
		}
	}
}

// TestAwaitStart checks that a request arriving during the start waits for its outcome, and
// one whose client goes away stops waiting.
func TestAwaitStart(t *testing.T) {
	failed := errors.New("opening the key store: disk full")
	tests := []struct {
		name   string
		start  func(s *state) // run while a request waits; nil: nothing ends the start
		cancel bool           // the request's context ends
		want   error
	}{
		{name: "started", start: func(s *state) { s.markStarted(nil) }},
		{name: "failed start", start: func(s *state) { s.markStarted(failed) }, want: failed},
		{name: "stopped before starting", start: func(s *state) { _ = s.Destruct() }, want: errShuttingDown},
		{name: "client gone", cancel: true, want: errStarting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newState(config.Settings{StateDir: filepath.Join(dir, "s"), ScratchDir: filepath.Join(dir, "scratch")}, nil, caddy.Log())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := make(chan error, 1)
			go func() { got <- s.awaitStart(ctx) }()
			select {
			case err := <-got:
				t.Fatalf("awaitStart returned %v before the start ended", err)
			case <-time.After(50 * time.Millisecond):
			}
			if tt.start != nil {
				tt.start(s)
			}
			if tt.cancel {
				cancel()
			}
			if err := <-got; !errors.Is(err, tt.want) {
				t.Fatalf("awaitStart = %v, want %v", err, tt.want)
			}
			// Later requests get the same answer at once.
			if tt.start != nil {
				if err := s.awaitStart(context.Background()); !errors.Is(err, tt.want) {
					t.Fatalf("awaitStart after the start = %v, want %v", err, tt.want)
				}
			}
		})
	}
}

func TestKeptSecrets(t *testing.T) {
	opens := map[string]int{}
	values := map[string]map[string]string{"app": {"TOKEN": "1"}}
	open := func(_ context.Context, worker string) (map[string]string, error) {
		opens[worker]++
		if worker == "broken" {
			return nil, errors.New("cannot open")
		}
		return values[worker], nil
	}
	var k keptSecrets
	get := func(worker string) map[string]string {
		t.Helper()
		got, err := k.get(context.Background(), worker, open)
		if err != nil && worker != "broken" {
			t.Fatal(err)
		}
		return got
	}
	tests := []struct {
		name      string
		do        func()
		worker    string
		want      string // TOKEN's value
		wantOpens int
	}{
		{"the first start opens them", func() {}, "app", "1", 1},
		{"the next is given them as kept", func() {}, "app", "1", 1},
		{"none are kept as none", func() {}, "plain", "", 1},
		{"and not opened again", func() {}, "plain", "", 1},
		{"a change of another worker's keeps them", func() { k.forget("plain") }, "app", "1", 1},
		{"a change of its own opens them again", func() { values["app"] = map[string]string{"TOKEN": "2"}; k.forget("app") }, "app", "2", 2},
		{"new keys open every worker's again", func() { k.forget("") }, "plain", "", 2},
		{"a failed open is not kept", func() { get("broken") }, "broken", "", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.do()
			if got := get(tt.worker)["TOKEN"]; got != tt.want {
				t.Errorf("TOKEN = %q, want %q", got, tt.want)
			}
			if opens[tt.worker] != tt.wantOpens {
				t.Errorf("opened %d times, want %d", opens[tt.worker], tt.wantOpens)
			}
		})
	}
	// An open that a change overtook is not kept: the next start opens them again.
	overtaken := func(ctx context.Context, worker string) (map[string]string, error) {
		k.forget(worker)
		return open(ctx, worker)
	}
	k.forget("")
	before := opens["app"]
	if _, err := k.get(context.Background(), "app", overtaken); err != nil {
		t.Fatal(err)
	}
	get("app")
	if opens["app"] != before+2 {
		t.Errorf("an open overtaken by a change was kept: %d opens, want %d", opens["app"]-before, 2)
	}
}
