package caddymodule

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestPackageStoreValidate runs caddy validate on configs with a package store: it refuses a
// store without key_store sync or without a bucket, naming the setting (and the variable when
// the environment chose), never showing the secret; it sends nothing, so a store nobody
// answers for validates.
func TestPackageStoreValidate(t *testing.T) {
	const secret = "the-secret-access-key"
	t.Setenv("S3_SECRET", secret)
	root := t.TempDir()
	sync := map[string]any{"key_store": "sync", "sync_url": "http://127.0.0.1:9"}
	s3 := map[string]any{"store": "s3", "endpoint": "http://127.0.0.1:9", "bucket": "units", "path_style": true,
		"access_key_id": "AKID", "secret_access_key": "{env.S3_SECRET}"}
	app := func(extra ...map[string]any) map[string]any {
		out := dirsIn(root)
		for _, e := range extra {
			for k, v := range e {
				out[k] = v
			}
		}
		return out
	}
	tests := []struct {
		name    string
		app     map[string]any
		handler map[string]any
		env     map[string]string
		want    []string // nil: it validates
	}{
		{"s3 with sync", app(sync, map[string]any{"package_store": s3}), nil, nil, nil},
		{"s3 from the environment with sync", app(sync), nil,
			map[string]string{"RUNTIME_PACKAGE_STORE": "s3", "RUNTIME_S3_BUCKET": "units", "RUNTIME_S3_SECRET_ACCESS_KEY": secret, "RUNTIME_S3_ACCESS_KEY_ID": "AKID"}, nil},
		{"written local wins over the environment", app(map[string]any{"package_store": map[string]any{"store": "local"}}), nil,
			map[string]string{"RUNTIME_PACKAGE_STORE": "s3"}, nil},
		{"key_store sync in the handler (deprecated form)", app(map[string]any{"package_store": s3}), sync, nil, nil},
		{"s3 without sync", app(map[string]any{"package_store": s3}), nil, nil,
			[]string{`invalid package_store "s3": needs key_store sync`, "primary"}},
		{"s3 from the environment without sync", app(), nil, map[string]string{"RUNTIME_PACKAGE_STORE": "s3", "RUNTIME_S3_BUCKET": "units"},
			[]string{"package_store", "RUNTIME_PACKAGE_STORE", "needs key_store sync"}},
		{"unknown store from the environment", app(), nil, map[string]string{"RUNTIME_PACKAGE_STORE": "gcs"},
			[]string{`invalid package_store "gcs" (from environment variable RUNTIME_PACKAGE_STORE)`, "local or s3"}},
		{"no bucket", app(sync, map[string]any{"package_store": with(s3, "bucket", "")}), nil, nil,
			[]string{"invalid package_store s3 bucket", "RUNTIME_S3_BUCKET"}},
		{"path_style from the environment", app(sync, map[string]any{"package_store": map[string]any{"store": "s3", "bucket": "b"}}), nil,
			map[string]string{"RUNTIME_S3_PATH_STYLE": "1"}, []string{"path_style", "RUNTIME_S3_PATH_STYLE", "on, off, true, false, yes or no"}},
		{"uploads larger than the store takes", app(sync, map[string]any{"package_store": s3, "max_upload_size": 6 << 30}), nil, nil,
			[]string{"invalid max_upload_size", "5GiB"}},
		{"unknown field", app(sync, map[string]any{"package_store": with(s3, "secret", "x")}), nil, nil, []string{"secret"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			handler := map[string]any{}
			for k, v := range tt.handler {
				handler[k] = v
			}
			var cfg caddy.Config
			if err := json.Unmarshal(siteConfig(t, testkit.FreePort(t), tt.app, handler), &cfg); err != nil {
				t.Fatal(err)
			}
			err := caddy.Validate(&cfg)
			if held := heldStates(); len(held) != 0 {
				t.Errorf("validate left %d states held", len(held))
			}
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("validate succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("validate error = %v, want one containing %q", err, w)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
}

// TestPackageStoreKeyHidesTheSecret: the state key tells stores with different secrets apart
// without holding the secret.
func TestPackageStoreKeyHidesTheSecret(t *testing.T) {
	s, err := config.Resolve(config.Values{AppValues: config.AppValues{StateDir: filepath.Join(t.TempDir(), "s")}}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	s.PackageStore = s3Store(func(o *config.S3Settings) { o.SecretAccessKey = "the-secret-access-key" })
	if key := stateKey(s); strings.Contains(key, "the-secret-access-key") {
		t.Fatalf("the state key holds the secret: %s", key)
	}
}
