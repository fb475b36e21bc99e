package caddymodule

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/config"
)

// TestStateSettings changes each setting in turn and checks that exactly stateSettings change
// the state key, and that the README's Reloads section names exactly those settings.
func TestStateSettings(t *testing.T) {
	changes := map[string]func(*config.Settings){
		"api_prefix":          func(s *config.Settings) { s.APIPrefix = "/_/api" },
		"worker_dirs":         func(s *config.Settings) { s.WorkerDirs = append(s.WorkerDirs, "/w") },
		"plugin_dirs":         func(s *config.Settings) { s.PluginDirs = append(s.PluginDirs, "/p") },
		"state_dir":           func(s *config.Settings) { s.StateDir = "/s" },
		"root_key":            func(s *config.Settings) { s.RootKey = "another-root-key-0123456789" },
		"session_ttl":         func(s *config.Settings) { s.SessionTTL++ },
		"audit_retention":     func(s *config.Settings) { s.AuditRetention++ },
		"retire_delay":        func(s *config.Settings) { s.RetireDelay++ },
		"max_upload_size":     func(s *config.Settings) { s.MaxUploadSize++ },
		"max_unpacked_size":   func(s *config.Settings) { s.MaxUnpackedSize++ },
		"max_archive_entries": func(s *config.Settings) { s.MaxArchiveEntries++ },
		"pool_size":           func(s *config.Settings) { s.PoolSize++ },
		"key_store":           func(s *config.Settings) { s.KeyStore = "sync" },
		"sync_url":            func(s *config.Settings) { s.Sync.URL = "libsql://keys.example.com" },
		"sync_token":          func(s *config.Settings) { s.Sync = config.SyncSettings{URL: "http://h", Token: "t"} },
		"sync_interval":       func(s *config.Settings) { s.Sync = config.SyncSettings{URL: "http://h", Interval: time.Minute} },
		"serve":               func(s *config.Settings) { s.Serve.CPanel = !s.Serve.CPanel },
		"workers_url":         func(s *config.Settings) { s.WorkersURL = "https://apps.example.com" },
		"process_workers":     func(s *config.Settings) { s.ProcessWorkers = config.Namespaces{List: []string{"@team"}} },
		"worker_user":         func(s *config.Settings) { s.WorkerUser = "nobody" },
		"worker_group":        func(s *config.Settings) { s.WorkerGroup = "nogroup" },
		"worker_read_dirs":    func(s *config.Settings) { s.WorkerReadDirs = append(s.WorkerReadDirs, "/opt") },
		"scratch_dir":         func(s *config.Settings) { s.ScratchDir = "/scratch" },
		"worker_network":      func(s *config.Settings) { s.WorkerNetwork = config.NetworkIsolated },
		"worker_scratch":      func(s *config.Settings) { s.WorkerScratch++ },
		"worker_memory":       func(s *config.Settings) { s.WorkerMemory++ },
		"worker_processes":    func(s *config.Settings) { s.WorkerProcesses++ },
		"worker_cpu":          func(s *config.Settings) { s.WorkerCPU += 0.5 },
		"worker_log_rate":     func(s *config.Settings) { s.WorkerLogRate++ },
		"worker_log_lines":    func(s *config.Settings) { s.WorkerLogLines++ },
		"plugin_handlers":     func(s *config.Settings) { s.PluginHandlers = append(s.PluginHandlers, "reverse_proxy") },
	}
	base, err := config.Resolve(config.Values{}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
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

	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "\n### Reloads\n")
	section, _, _ = strings.Cut(section, "\n#")
	for _, d := range config.Definitions {
		named := strings.Contains(section, "`"+d.Name+"`")
		if want := slices.Contains(stateSettings, d.Name); named != want {
			t.Errorf("README Reloads names `%s`: %v, want %v", d.Name, named, want)
		}
	}
}
