package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
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
		MaxUploadSize:     100 << 20,
		MaxUnpackedSize:   1 << 30,
		MaxArchiveEntries: 20000,
		PoolSize:          16,
		KeyStore:          "local",
	}
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
	wantEnv := Settings{"/_/api", []string{"/env/.w", "/env/w"}, []string{"/env/p"}, "/env/state",
		"env-root-key-0123456789", 2 * time.Hour, 5 << 20, 50 << 20, 300, 3, "local"}
	if !reflect.DeepEqual(fromEnv, wantEnv) {
		t.Fatalf("from environment =\n%+v\nwant\n%+v", fromEnv, wantEnv)
	}
	written := Values{"/x", []string{"/w/a", "/w/b"}, []string{"/p/a"}, "/s", "written-root-key-0123456789", "7d", 42, 4242, 7, 9, "local"}
	got, err := Resolve(written, env)
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{"/x/api", []string{"/w/a", "/w/b"}, []string{"/p/a"}, "/s",
		"written-root-key-0123456789", 7 * 24 * time.Hour, 42, 4242, 7, 9, "local"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("written =\n%+v\nwant\n%+v", got, want)
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
		{"prefix", Values{APIPrefix: "/a b"}, nil, []string{"api_prefix", "RUNTIME_API_PREFIX", "not allowed"}, ""},
		{"prefix from env", Values{}, map[string]string{"RUNTIME_API_PREFIX": "/cpanel"}, []string{"api_prefix", "from environment variable RUNTIME_API_PREFIX", "reserved"}, ""},
		{"ttl bare number", Values{SessionTTL: "3600"}, nil, []string{"session_ttl", "RUNTIME_CPANEL_SESSION_TTL", "bare number"}, ""},
		{"ttl too long from env", Values{}, map[string]string{"RUNTIME_CPANEL_SESSION_TTL": "500d"}, []string{"session_ttl", "from environment", "400d"}, ""},
		{"key store sync", Values{KeyStore: "sync"}, nil, []string{"key_store", "RUNTIME_AUTH_DB_MODE", "not available", "use local"}, ""},
		{"key store unknown", Values{}, map[string]string{"RUNTIME_AUTH_DB_MODE": "remote"}, []string{"key_store", "local or sync"}, ""},
		{"short root key is not echoed", Values{RootKey: "short-secret"}, nil, []string{"root_key", "at least 16"}, "short-secret"},
		{"root key with space", Values{}, map[string]string{"RUNTIME_ROOT_KEY": "has a space in it 123"}, []string{"root_key", "visible ASCII"}, "has a space"},
		{"upload size", Values{}, map[string]string{"RUNTIME_MAX_UPLOAD_SIZE": "lots"}, []string{"max_upload_size", "RUNTIME_MAX_UPLOAD_SIZE", "100MiB"}, ""},
		{"negative upload size", Values{MaxUploadSize: -1}, nil, []string{"max_upload_size", "positive"}, ""},
		{"unpacked size", Values{}, map[string]string{"RUNTIME_MAX_UNPACKED_SIZE": "0"}, []string{"max_unpacked_size", "RUNTIME_MAX_UNPACKED_SIZE"}, ""},
		{"entries", Values{}, map[string]string{"RUNTIME_MAX_ARCHIVE_ENTRIES": "many"}, []string{"max_archive_entries", "whole number"}, ""},
		{"negative entries", Values{MaxArchiveEntries: -4}, nil, []string{"max_archive_entries", "positive"}, ""},
		{"pool size", Values{}, map[string]string{"RUNTIME_POOL_SIZE": "0"}, []string{"pool_size", "RUNTIME_POOL_SIZE"}, ""},
		{"empty worker dir", Values{}, map[string]string{"RUNTIME_WORKER_DIRS": "/a::/b"}, []string{"worker_dirs", "empty folder"}, ""},
		{"duplicate worker dir", Values{WorkerDirs: []string{"/a", "/a/"}}, nil, []string{"worker_dirs", "twice"}, ""},
		{"plugin dir shared", Values{WorkerDirs: []string{"/a"}, PluginDirs: []string{"/a"}}, nil, []string{"plugin_dirs", "also in worker_dirs"}, ""},
		{"state dir shared", Values{PluginDirs: []string{"/a"}, StateDir: "/a"}, nil, []string{"state_dir", "also in plugin_dirs"}, ""},
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

// TestREADMEDocumentsEverySetting keeps the README's configuration table true.
func TestREADMEDocumentsEverySetting(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range Definitions {
		row := "| `" + d.Name + "` | `" + d.Env + "` |"
		if !strings.Contains(string(readme), row) {
			t.Errorf("README.md has no configuration row starting %q", row)
		}
	}
}
