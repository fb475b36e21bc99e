package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestNormalizeAPIPrefix(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{"", "/api", ""},
		{"/", "/api", ""},
		{"/_", "/_/api", ""},
		{"_", "/_/api", ""},
		{"/_/", "/_/api", ""},
		{" /runtime ", "/runtime/api", ""},
		{"/a/b", "/a/b/api", ""},
		{"/a//b", "", "double slash"},
		{"/../x", "", `".."`},
		{"/cpanel", "", "reserved"},
		{".well-known", "", "reserved"},
		{"/a b", "", "not allowed"},
		{"/{x}", "", "not allowed"},
		{"/x?y", "", "not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := NormalizeAPIPrefix(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("NormalizeAPIPrefix(%q) error = %v, want one containing %q", tt.in, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("NormalizeAPIPrefix(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseSessionTTL(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"30m", 30 * time.Minute, ""},
		{"2h", 2 * time.Hour, ""},
		{"24h", 24 * time.Hour, ""},
		{"7d", 7 * 24 * time.Hour, ""},
		{"2w", 14 * 24 * time.Hour, ""},
		{"1d12h", 36 * time.Hour, ""},
		{"400d", 400 * 24 * time.Hour, ""},
		{"90", 0, "bare number"},
		{"", 0, "empty"},
		{"401d", 0, "too long"},
		{"58w", 0, "too long"},
		{"99999999999999999999d", 0, "too long"},
		{"30s", 0, "too short"},
		{"2x", 0, "unit"},
		{"h", 0, "unit"},
		{"1.5h", 0, "unit"},
		{"-1h", 0, "unit"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSessionTTL(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseSessionTTL(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSessionTTL(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestResolveDefaults(t *testing.T) {
	wd, _ := os.Getwd()
	s, err := Resolve(Values{}, envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{
		APIPrefix:         "/api",
		WorkerDirs:        []string{filepath.Join(wd, "data/.apps"), filepath.Join(wd, "data/apps")},
		PluginDirs:        []string{filepath.Join(wd, "data/.plugins"), filepath.Join(wd, "data/plugins")},
		StateDir:          filepath.Join(wd, "data/state"),
		SessionTTL:        24 * time.Hour,
		AuditRetention:    90 * 24 * time.Hour,
		RetireDelay:       2 * time.Second,
		MaxUploadSize:     100 << 20,
		MaxUnpackedSize:   1 << 30,
		MaxArchiveEntries: 20000,
		PoolSize:          16,
		KeyStore:          "local",
		PackageStore:      StoreSettings{Kind: StoreLocal},
	}
	isolationDefaults(&want, wd)
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("Resolve defaults =\n%+v\nwant\n%+v", s, want)
	}
}

// TestResolvePrecedence checks written value > environment variable > default for each setting.
func TestResolvePrecedence(t *testing.T) {
	env := envMap(map[string]string{
		"RUNTIME_API_PREFIX":          "/_",
		"RUNTIME_WORKER_DIRS":         "/env/.w:/env/w",
		"RUNTIME_PLUGIN_DIRS":         "/env/p",
		"RUNTIME_STATE_DIR":           "/env/state",
		"RUNTIME_ROOT_KEY":            "env-root-key-0123456789",
		"RUNTIME_CPANEL_SESSION_TTL":  "2h",
		"RUNTIME_AUDIT_RETENTION":     "30d",
		"RUNTIME_RETIRE_DELAY":        "100ms",
		"RUNTIME_MAX_UPLOAD_SIZE":     "5MiB",
		"RUNTIME_MAX_UNPACKED_SIZE":   "50MiB",
		"RUNTIME_MAX_ARCHIVE_ENTRIES": "300",
		"RUNTIME_POOL_SIZE":           "3",
		"RUNTIME_AUTH_DB_MODE":        "LOCAL",
	})
	fromEnv, err := Resolve(Values{}, env)
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := Settings{APIPrefix: "/_/api", WorkerDirs: []string{"/env/.w", "/env/w"}, PluginDirs: []string{"/env/p"}, StateDir: "/env/state",
		RootKey: "env-root-key-0123456789", SessionTTL: 2 * time.Hour, AuditRetention: 30 * 24 * time.Hour, RetireDelay: 100 * time.Millisecond, MaxUploadSize: 5 << 20, MaxUnpackedSize: 50 << 20,
		MaxArchiveEntries: 300, PoolSize: 3, KeyStore: "local", PackageStore: StoreSettings{Kind: StoreLocal}}
	wd, _ := os.Getwd()
	isolationDefaults(&wantEnv, wd)
	if !reflect.DeepEqual(fromEnv, wantEnv) {
		t.Fatalf("from environment =\n%+v\nwant\n%+v", fromEnv, wantEnv)
	}
	written := Values{SiteValues: SiteValues{APIPrefix: "/x"}, AppValues: AppValues{WorkerDirs: []string{"/w/a", "/w/b"}, PluginDirs: []string{"/p/a"}, StateDir: "/s",
		RootKey: "written-root-key-0123456789", SessionTTL: "7d", AuditRetention: "1w", RetireDelay: "0s", MaxUploadSize: 42, MaxUnpackedSize: 4242,
		MaxArchiveEntries: 7, PoolSize: 9, KeyStore: "local"}}
	got, err := Resolve(written, env)
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{APIPrefix: "/x/api", WorkerDirs: []string{"/w/a", "/w/b"}, PluginDirs: []string{"/p/a"}, StateDir: "/s",
		RootKey: "written-root-key-0123456789", SessionTTL: 7 * 24 * time.Hour, AuditRetention: 7 * 24 * time.Hour, RetireDelay: 0, MaxUploadSize: 42, MaxUnpackedSize: 4242,
		MaxArchiveEntries: 7, PoolSize: 9, KeyStore: "local", PackageStore: StoreSettings{Kind: StoreLocal}}
	isolationDefaults(&want, wd)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("written =\n%+v\nwant\n%+v", got, want)
	}
}

// isolationDefaults fills in the default isolation settings.
func isolationDefaults(s *Settings, wd string) {
	s.Serve = Surfaces{API: true, CPanel: true, Workers: true}
	s.ProcessWorkers = Namespaces{All: true}
	s.ScratchDir = filepath.Join(wd, "data/scratch")
	s.WorkerNetwork = NetworkHost
	s.WorkerScratch = 256 << 20
	s.WorkerDatabase = 256 << 20
	s.WorkerMemory = 512 << 20
	s.WorkerProcesses = 64
	s.WorkerMaxFiles = 1024
	s.WorkerCPU = 1
	s.WorkerLogRate = 100
	s.WorkerLogLines = 1000
	s.WorkerFreshConcurrency = 2
	s.WorkerFreshQueue = 100
	s.PluginHandlers = []string{"file_server", "static_response", "headers", "rewrite", "vars", "encode"}
	s.WasmWorkers = Namespaces{All: true}
	s.JSEngines = JSEngines{Paths: map[string]string{}} // no PATH in these tests: no engine
	s.JSRegistry = DefaultJSRegistry
	s.JSInstallTimeout = 2 * time.Minute
	s.WasmMemory = 128 << 20
	s.WasmCompiledMemory = 256 << 20
	s.WasmCacheSize = 1 << 30
	s.MaxPendingDomains = 10
	s.WasmConcurrency = 8
	s.WasmMemoryBudget = 1 << 30
	s.WasmMaxModuleSize = 64 << 20
	s.WorkerMaxHeaderSize = 1 << 20
}

func TestResolveIsolation(t *testing.T) {
	tests := []struct {
		name   string
		values Values
		env    map[string]string
		check  func(Settings) bool
	}{
		{"serve split", Values{SiteValues: SiteValues{Serve: []string{"api", "cpanel"}}}, nil, func(s Settings) bool { return s.Serve == Surfaces{API: true, CPanel: true} && !s.Serve.SharesOrigin() }},
		{"serve from env", Values{}, map[string]string{"RUNTIME_SERVE": "workers"}, func(s Settings) bool { return s.Serve == Surfaces{Workers: true} && !s.Serve.SharesOrigin() }},
		{"shared origin", Values{}, nil, func(s Settings) bool { return s.Serve.All() && s.Serve.SharesOrigin() }},
		{"workers url", Values{SiteValues: SiteValues{WorkersURL: "https://apps.example.com/"}}, nil, func(s Settings) bool { return s.WorkersURL == "https://apps.example.com" }},
		{"process workers off", Values{AppValues: AppValues{ProcessWorkers: []string{"off"}}}, nil, func(s Settings) bool { return !s.ProcessWorkers.Allows("@team/x") && !s.ProcessWorkers.Allows("x") }},
		{"process workers no, as every boolean reads", Values{AppValues: AppValues{ProcessWorkers: []string{"no"}}}, nil, func(s Settings) bool { return !s.ProcessWorkers.Allows("x") }},
		{"wasm workers true from the environment", Values{}, map[string]string{"RUNTIME_WASM_WORKERS": "true"}, func(s Settings) bool { return s.WasmWorkers.Allows("@team/x") }},
		{"process workers for a namespace", Values{}, map[string]string{"RUNTIME_PROCESS_WORKERS": "@team,@ops"}, func(s Settings) bool {
			return s.ProcessWorkers.Allows("@team/x") && s.ProcessWorkers.Allows("@ops/y") && !s.ProcessWorkers.Allows("@other/x") && !s.ProcessWorkers.Allows("x")
		}},
		{"cpu", Values{AppValues: AppValues{WorkerCPU: "0.5"}}, nil, func(s Settings) bool { return s.WorkerCPU == 0.5 }},
		{"network isolated", Values{AppValues: AppValues{WorkerNetwork: "Isolated"}}, nil, func(s Settings) bool { return s.WorkerNetwork == NetworkIsolated }},
		{"network from env", Values{}, map[string]string{"RUNTIME_WORKER_NETWORK": "isolated"}, func(s Settings) bool { return s.WorkerNetwork == NetworkIsolated }},
		{"network written beats env", Values{AppValues: AppValues{WorkerNetwork: "host"}}, map[string]string{"RUNTIME_WORKER_NETWORK": "isolated"}, func(s Settings) bool { return s.WorkerNetwork == NetworkHost }},
		{"read dirs from env", Values{}, map[string]string{"RUNTIME_WORKER_READ_DIRS": "/opt/node:/opt/py"}, func(s Settings) bool {
			return reflect.DeepEqual(s.WorkerReadDirs, []string{"/opt/node", "/opt/py"})
		}},
		{"plugin handlers", Values{}, map[string]string{"RUNTIME_PLUGIN_HANDLERS": "file_server reverse_proxy"}, func(s Settings) bool {
			return reflect.DeepEqual(s.PluginHandlers, []string{"file_server", "reverse_proxy"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Resolve(tt.values, envMap(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(s) {
				t.Fatalf("Resolve() = %+v", s)
			}
		})
	}
}

func TestResolveErrorsNameTheSetting(t *testing.T) {
	tests := []struct {
		name   string
		values Values
		env    map[string]string
		want   []string
		absent string
	}{
		{"prefix", Values{SiteValues: SiteValues{APIPrefix: "/a b"}}, nil, []string{"api_prefix", "not allowed"}, "RUNTIME_API_PREFIX"},
		{"prefix from env", Values{}, map[string]string{"RUNTIME_API_PREFIX": "/cpanel"}, []string{"api_prefix", "from environment variable RUNTIME_API_PREFIX", "reserved"}, ""},
		{"ttl bare number", Values{AppValues: AppValues{SessionTTL: "3600"}}, nil, []string{"session_ttl", "bare number"}, "RUNTIME_CPANEL_SESSION_TTL"},
		{"ttl too long from env", Values{}, map[string]string{"RUNTIME_CPANEL_SESSION_TTL": "500d"}, []string{"session_ttl", "from environment", "400d"}, ""},
		{"retention too short", Values{AppValues: AppValues{AuditRetention: "5m"}}, nil, []string{"audit_retention", "shortest retention is 1h"}, "RUNTIME_AUDIT_RETENTION"},
		{"retention from env", Values{}, map[string]string{"RUNTIME_AUDIT_RETENTION": "90"}, []string{"audit_retention", "from environment variable RUNTIME_AUDIT_RETENTION", "bare number"}, ""},
		{"retire delay negative", Values{AppValues: AppValues{RetireDelay: "-1s"}}, nil, []string{"retire_delay", "negative"}, "RUNTIME_RETIRE_DELAY"},
		{"retire delay from env", Values{}, map[string]string{"RUNTIME_RETIRE_DELAY": "soon"}, []string{"retire_delay", "from environment variable RUNTIME_RETIRE_DELAY", "2s"}, ""},
		{"split header not a name", Values{AppValues: AppValues{SplitHeader: "X User"}}, nil, []string{"split_header", "letters, digits"}, "RUNTIME_SPLIT_HEADER"},
		{"split header a credential", Values{}, map[string]string{"RUNTIME_SPLIT_HEADER": "x-api-key"}, []string{"split_header", "from environment variable RUNTIME_SPLIT_HEADER", "X-Api-Key carries credentials"}, ""},
		{"sync without a url", Values{AppValues: AppValues{KeyStore: "sync"}}, nil, []string{"sync_url", "needs the primary's URL", "RUNTIME_AUTH_DB_SYNC_URL"}, ""},
		{"sync url with a token", Values{AppValues: AppValues{KeyStore: "sync", SyncURL: "libsql://db.example.com?authToken=s3cret"}}, nil,
			[]string{"sync_url", "must not carry credentials", "sync_token"}, "s3cret"},
		{"sync url with user info", Values{AppValues: AppValues{KeyStore: "sync"}}, map[string]string{"RUNTIME_AUTH_DB_SYNC_URL": "https://u:s3cret@db.example.com"},
			[]string{"sync_url", "from environment variable RUNTIME_AUTH_DB_SYNC_URL", "credentials"}, "s3cret"},
		{"sync url scheme", Values{AppValues: AppValues{KeyStore: "sync", SyncURL: "ftp://db.example.com"}}, nil, []string{"sync_url", `scheme "ftp"`, "libsql://"}, ""},
		{"sync url without host", Values{AppValues: AppValues{KeyStore: "sync", SyncURL: "http:///x"}}, nil, []string{"sync_url", "no host"}, ""},
		{"sync token with a space", Values{AppValues: AppValues{KeyStore: "sync", SyncURL: "http://127.0.0.1:8080", SyncToken: "ey s3cret"}}, nil,
			[]string{"sync_token", "spaces"}, "s3cret"},
		{"sync interval too short", Values{AppValues: AppValues{KeyStore: "sync", SyncURL: "http://127.0.0.1:8080", SyncInterval: "500ms"}}, nil,
			[]string{"sync_interval", "1s to 1h"}, ""},
		{"sync interval from env", Values{AppValues: AppValues{KeyStore: "sync", SyncURL: "http://127.0.0.1:8080"}},
			map[string]string{"RUNTIME_AUTH_DB_SYNC_INTERVAL_SECONDS": "often"},
			[]string{"sync_interval", "from environment variable RUNTIME_AUTH_DB_SYNC_INTERVAL_SECONDS", "number of seconds"}, ""},
		{"key store unknown", Values{}, map[string]string{"RUNTIME_AUTH_DB_MODE": "remote"}, []string{"key_store", "from environment variable RUNTIME_AUTH_DB_MODE", "local or sync"}, ""},
		{"short root key is not echoed", Values{AppValues: AppValues{RootKey: "short-secret"}}, nil, []string{"root_key", "at least 16", "openssl rand -base64 32"}, "short-secret"},
		{"root key of one character", Values{AppValues: AppValues{RootKey: "aaaaaaaaaaaaaaaa"}}, nil, []string{"root_key", "only 1 distinct", "at least 12", "openssl rand -base64 32"}, "aaaa"},
		{"root key of 11 characters", Values{}, map[string]string{"RUNTIME_ROOT_KEY": "abcabcabcabcdefghijk"}, []string{"root_key", "only 11 distinct", "openssl rand -base64 32"}, "abcabc"},
		{"root key with space", Values{}, map[string]string{"RUNTIME_ROOT_KEY": "has a space in it 123"}, []string{"root_key", "visible ASCII"}, "has a space"},
		{"secrets key of 17 bytes", Values{AppValues: AppValues{SecretsKey: "c2l4dGVlbi1ieXRlcy1rZXk="}}, nil,
			[]string{"invalid secrets_key", "is 17 bytes, not 32", "openssl rand -base64 32"}, "c2l4dGVlbi1ieXRlcy1rZXk"},
		{"secrets key that is a passphrase", Values{}, map[string]string{"RUNTIME_SECRETS_KEY": "correct horse battery staple!"},
			[]string{"invalid secrets_key", "(from environment variable RUNTIME_SECRETS_KEY)", "not base64", "openssl rand -base64 32"}, "correct horse"},
		{"upload size", Values{}, map[string]string{"RUNTIME_MAX_UPLOAD_SIZE": "lots"}, []string{"max_upload_size", "from environment variable RUNTIME_MAX_UPLOAD_SIZE", "100MiB"}, ""},
		{"negative upload size", Values{AppValues: AppValues{MaxUploadSize: -1}}, nil, []string{"max_upload_size", "positive"}, "environment"},
		{"unpacked size", Values{}, map[string]string{"RUNTIME_MAX_UNPACKED_SIZE": "0"}, []string{"max_unpacked_size", "RUNTIME_MAX_UNPACKED_SIZE"}, ""},
		{"entries", Values{}, map[string]string{"RUNTIME_MAX_ARCHIVE_ENTRIES": "many"}, []string{"max_archive_entries", "whole number"}, ""},
		{"negative entries", Values{AppValues: AppValues{MaxArchiveEntries: -4}}, nil, []string{"max_archive_entries", "positive"}, ""},
		{"pool size", Values{}, map[string]string{"RUNTIME_POOL_SIZE": "0"}, []string{"pool_size", "RUNTIME_POOL_SIZE"}, ""},
		{"empty worker dir", Values{}, map[string]string{"RUNTIME_WORKER_DIRS": "/a::/b"}, []string{"worker_dirs", "empty folder"}, ""},
		{"duplicate worker dir", Values{AppValues: AppValues{WorkerDirs: []string{"/a", "/a/"}}}, nil, []string{"worker_dirs", "twice"}, ""},
		{"plugin dir shared", Values{AppValues: AppValues{WorkerDirs: []string{"/a"}, PluginDirs: []string{"/a"}}}, nil, []string{"plugin_dirs", "also in worker_dirs"}, "environment"},
		{"state dir shared", Values{AppValues: AppValues{PluginDirs: []string{"/a"}, StateDir: "/a"}}, nil, []string{"state_dir", "also in plugin_dirs"}, ""},
		{"unknown surface", Values{SiteValues: SiteValues{Serve: []string{"apps"}}}, nil, []string{"serve", "unknown surface"}, "RUNTIME_SERVE"},
		{"workers url", Values{}, map[string]string{"RUNTIME_WORKERS_URL": "apps.example.com"}, []string{"workers_url", "absolute"}, ""},
		{"process workers", Values{AppValues: AppValues{ProcessWorkers: []string{"team"}}}, nil, []string{"process_workers", "namespace"}, ""},
		{"group alone", Values{AppValues: AppValues{WorkerGroup: "nogroup"}}, nil, []string{"worker_group", "worker_user"}, ""},
		{"scratch in state", Values{AppValues: AppValues{StateDir: "/s", ScratchDir: "/s/tmp"}}, nil, []string{"scratch_dir", "overlap"}, ""},
		{"scratch holds workers", Values{AppValues: AppValues{WorkerDirs: []string{"/x/apps"}, ScratchDir: "/x"}}, nil, []string{"scratch_dir", "overlap"}, ""},
		{"cpu", Values{}, map[string]string{"RUNTIME_WORKER_CPU": "fast"}, []string{"worker_cpu", "cores"}, ""},
		{"memory", Values{}, map[string]string{"RUNTIME_WORKER_MEMORY": "0"}, []string{"worker_memory"}, ""},
		{"network", Values{AppValues: AppValues{WorkerNetwork: "bridge"}}, nil, []string{`worker_network "bridge"`, "host or isolated"}, "environment"},
		{"network from env", Values{}, map[string]string{"RUNTIME_WORKER_NETWORK": "none"}, []string{"worker_network", "from environment variable RUNTIME_WORKER_NETWORK", "host or isolated"}, ""},
		{"scratch", Values{}, map[string]string{"RUNTIME_WORKER_SCRATCH": "lots"}, []string{"worker_scratch", "RUNTIME_WORKER_SCRATCH", "100MiB"}, ""},
		{"negative scratch", Values{AppValues: AppValues{WorkerScratch: -1}}, nil, []string{"worker_scratch", "positive"}, ""},
		{"workers domain an IP", Values{AppValues: AppValues{WorkersDomain: "10.0.0.1"}}, nil, []string{"workers_domain", "IP address"}, "environment"},
		{"workers domain from env", Values{}, map[string]string{"RUNTIME_WORKERS_DOMAIN": "apps_x.example.com"},
			[]string{"workers_domain", "from environment variable RUNTIME_WORKERS_DOMAIN", "not a domain"}, ""},
		{"domain resolvers", Values{}, map[string]string{"RUNTIME_DOMAIN_RESOLVERS": "1.1.1.1 127.0.0.1:99999"},
			[]string{"domain_resolvers", "from environment variable RUNTIME_DOMAIN_RESOLVERS", "host:port"}, ""},
		{"pending domains", Values{}, map[string]string{"RUNTIME_MAX_PENDING_DOMAINS": "0"}, []string{"max_pending_domains", "RUNTIME_MAX_PENDING_DOMAINS"}, ""},
		{"negative pending domains", Values{AppValues: AppValues{MaxPendingDomains: -1}}, nil, []string{"max_pending_domains", "positive"}, "environment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Resolve(tt.values, envMap(tt.env))
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Resolve() error = %v, want a *config.Error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tt.absent != "" && strings.Contains(err.Error(), tt.absent) {
				t.Errorf("error %q reveals %q", err, tt.absent)
			}
		})
	}
}

// TestResolveHosts: workers_domain and domain_resolvers as written, from the environment, and
// unset.
func TestResolveHosts(t *testing.T) {
	tests := []struct {
		name      string
		values    AppValues
		env       map[string]string
		domain    string // as a base URL
		resolvers []string
	}{
		{"unset", AppValues{}, nil, "", nil},
		{"written", AppValues{WorkersDomain: "Apps.Example.com", DomainResolvers: []string{"1.1.1.1", "[::1]:5353"}}, nil,
			"https://apps.example.com", []string{"1.1.1.1:53", "[::1]:5353"}},
		{"from the environment", AppValues{}, map[string]string{"RUNTIME_WORKERS_DOMAIN": "http://apps.localhost:8080",
			"RUNTIME_DOMAIN_RESOLVERS": "127.0.0.1:5353,9.9.9.9"}, "http://apps.localhost:8080", []string{"127.0.0.1:5353", "9.9.9.9:53"}},
	}
	for _, tt := range tests {
		s, err := ResolveApp(tt.values, envMap(tt.env))
		if err != nil || s.WorkersDomain.BaseURL() != tt.domain || !slices.Equal(s.DomainResolvers, tt.resolvers) {
			t.Errorf("%s: workers_domain %q, domain_resolvers %q, %v", tt.name, s.WorkersDomain.BaseURL(), s.DomainResolvers, err)
		}
	}
}

func TestRootKeyWarning(t *testing.T) {
	for key, warn := range map[string]bool{
		"":                                 false,
		"abcdefghijkl0123":                 true,
		"abcdefghijkl0123456789ABCDEFGHI":  true,
		"abcdefghijkl0123456789ABCDEFGHIJ": false,
	} {
		if _, err := Resolve(Values{AppValues: AppValues{RootKey: key}}, envMap(nil)); err != nil {
			t.Fatalf("root key %q refused: %v", key, err)
		}
		got := RootKeyWarning(key)
		if warn != (got != "") || warn && (!strings.Contains(got, "openssl rand -base64 32") || strings.Contains(got, key)) {
			t.Errorf("RootKeyWarning(%d characters) = %q", len(key), got)
		}
	}
}

// TestCheckPlatform: worker_network isolated needs Linux and root, and says so naming the
// setting; host runs anywhere.
func TestCheckPlatform(t *testing.T) {
	tests := []struct {
		name    string
		network string
		goos    string
		euid    int
		want    []string // nil: accepted
	}{
		{"host as a user", NetworkHost, "darwin", 501, nil},
		{"isolated as root on linux", NetworkIsolated, "linux", 0, nil},
		{"isolated as a user", NetworkIsolated, "linux", 1000, []string{`invalid worker_network "isolated"`, "must run as root", "use host"}},
		{"isolated elsewhere", NetworkIsolated, "windows", -1, []string{`invalid worker_network "isolated"`, "need Linux"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckPlatform(Settings{WorkerNetwork: tt.network}, tt.goos, tt.euid)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestREADMEDocumentsEverySetting keeps the configuration table of docs/configuration.md,
// which the README links, true, where each setting is written included.
func TestREADMEDocumentsEverySetting(t *testing.T) {
	readme, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range Definitions {
		where := "global"
		if d.Scope == Site {
			where = "site"
		}
		row := "| `" + d.Name + "` | `" + d.Env + "` | " + where + " |"
		if !strings.Contains(string(readme), row) {
			t.Errorf("docs/configuration.md has no configuration row starting %q", row)
		}
	}
}

func TestResolveSync(t *testing.T) {
	const url = "libsql://keys.example.com"
	tests := []struct {
		name   string
		values Values
		env    map[string]string
		want   SyncSettings
	}{
		{"written", Values{AppValues: AppValues{KeyStore: "sync", SyncURL: url, SyncToken: "tok", SyncInterval: "1m"}}, nil, SyncSettings{URL: url, Token: "tok", Interval: time.Minute}},
		{"default interval", Values{AppValues: AppValues{KeyStore: "sync", SyncURL: url}}, nil, SyncSettings{URL: url, Interval: 10 * time.Second}},
		{"from the environment, interval in seconds", Values{}, map[string]string{"RUNTIME_AUTH_DB_MODE": "sync",
			"RUNTIME_AUTH_DB_SYNC_URL": url, "RUNTIME_AUTH_DB_SYNC_TOKEN": "tok", "RUNTIME_AUTH_DB_SYNC_INTERVAL_SECONDS": "30"},
			SyncSettings{URL: url, Token: "tok", Interval: 30 * time.Second}},
		{"local mode ignores them", Values{AppValues: AppValues{SyncURL: url, SyncInterval: "nonsense"}}, nil, SyncSettings{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Resolve(tt.values, envMap(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if s.Sync != tt.want {
				t.Fatalf("Sync = %+v, want %+v", s.Sync, tt.want)
			}
		})
	}
}

func TestParseSplitHeader(t *testing.T) {
	for in, want := range map[string]string{"": "", "x-user-id": "X-User-Id", "X-Tenant": "X-Tenant"} {
		if got, err := ParseSplitHeader(in); err != nil || got != want {
			t.Errorf("ParseSplitHeader(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"Cookie", "authorization", "X User", "X-Ä"} {
		if got, err := ParseSplitHeader(in); err == nil {
			t.Errorf("ParseSplitHeader(%q) = %q, want an error", in, got)
		}
	}
}
