package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// storeRuntime is the global runtime option of an instance in sync mode on primary with an s3
// package store on store's bucket, its secret a placeholder for RUNTIME_S3_SECRET_ACCESS_KEY.
func storeRuntime(primary *testkit.Sqld, store *testkit.S3, bucket string) string {
	return syncRuntime(primary, "") + fmt.Sprintf("\n\t\tpackage_store s3 {\n\t\t\tendpoint %s\n\t\t\tbucket %s\n\t\t\tregion %s\n"+
		"\t\t\tprefix cluster-a\n\t\t\taccess_key_id %s\n\t\t\tsecret_access_key {env.RUNTIME_S3_SECRET_ACCESS_KEY}\n\t\t\tpath_style\n\t\t}",
		store.Endpoint, bucket, store.Region, store.AccessKey)
}

// TestPackageStoreSetting starts runtimes with package_store s3 against a real S3-compatible
// server (versitygw): one writes the store in the Caddyfile, another takes it all from the
// environment; a missing bucket, a wrong secret and an unreachable endpoint stop start-up
// saying which is wrong; the secret appears in no log line and not in the config the admin
// API shows.
func TestPackageStoreSetting(t *testing.T) {
	t.Parallel()
	primary := testkit.StartSqld(t)
	store := testkit.StartS3(t)
	bucket := store.Bucket(t, "units")

	t.Run("written in the Caddyfile", func(t *testing.T) {
		t.Parallel()
		s := harness.Start(t, harness.Config{App: storeRuntime(primary, store, bucket),
			Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_S3_SECRET_ACCESS_KEY": store.SecretKey}})
		line, err := s.WaitLog("package store", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		opts, _ := line["package_store"].(map[string]any)
		if opts["bucket"] != bucket || opts["endpoint"] != store.Endpoint || opts["prefix"] != "cluster-a" ||
			opts["access_key_id"] != store.AccessKey || opts["secret_access_key"] != "[redacted]" || opts["path_style"] != true {
			t.Errorf("the start-up line names the store as %v", line)
		}
		resp, err := http.Get(s.AdminURL + "/config/apps/runtime")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		config, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(config), `"secret_access_key":"{env.RUNTIME_S3_SECRET_ACCESS_KEY}"`) {
			t.Errorf("the runtime app's config as the admin API shows it:\n%s", config)
		}
		s.Stop()
		for where, text := range map[string]string{"the log": s.Logs(), "the admin API's config": string(config)} {
			if strings.Contains(text, store.SecretKey) {
				t.Errorf("the secret access key is in %s", where)
			}
		}
	})

	t.Run("from the environment", func(t *testing.T) {
		t.Parallel()
		s := harness.Start(t, harness.Config{App: syncRuntime(primary, ""), Env: map[string]string{
			"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_PACKAGE_STORE": "s3", "RUNTIME_S3_ENDPOINT": store.Endpoint, "RUNTIME_S3_BUCKET": bucket,
			"RUNTIME_S3_ACCESS_KEY_ID": store.AccessKey, "RUNTIME_S3_SECRET_ACCESS_KEY": store.SecretKey, "RUNTIME_S3_PATH_STYLE": "true",
		}})
		if _, err := s.WaitLog("package store", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		s.Stop()
		if strings.Contains(s.Logs(), store.SecretKey) {
			t.Error("the secret access key is in the log")
		}
	})

	t.Run("a secret written literally", func(t *testing.T) {
		t.Parallel()
		literal := strings.Replace(storeRuntime(primary, store, bucket), "{env.RUNTIME_S3_SECRET_ACCESS_KEY}", store.SecretKey, 1)
		s := harness.Start(t, harness.Config{App: literal, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
		line, err := s.WaitLog("package_store s3 secret_access_key is written literally in the config, where the admin API and adapted JSON show it; "+
			"use {env.RUNTIME_S3_SECRET_ACCESS_KEY} instead", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(fmt.Sprint(line), store.SecretKey) {
			t.Errorf("the warning shows the secret: %v", line)
		}
	})

	// Nothing listens there.
	unreachable := strings.Replace(storeRuntime(primary, store, bucket), store.Endpoint, fmt.Sprintf("http://127.0.0.1:%d", harness.FreePort(t)), 1)
	refused := []struct {
		name, app, secret string
		want              []string
	}{
		{"a missing bucket", storeRuntime(primary, store, "absent"), store.SecretKey,
			[]string{`bucket \"absent\"`, "the package store's bucket does not exist", "create the bucket"}},
		{"a wrong secret", storeRuntime(primary, store, bucket), "not-" + store.SecretKey,
			[]string{"the package store refused the credentials", "access_key_id and secret_access_key"}},
		{"an unreachable endpoint", unreachable, store.SecretKey, []string{"the package store is unavailable", "check package_store s3 endpoint"}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := harness.Launch(t, harness.Config{App: tt.app,
				Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_S3_SECRET_ACCESS_KEY": tt.secret}})
			if err != nil {
				t.Fatal(err)
			}
			if !s.WaitExit(60 * time.Second) {
				t.Fatalf("the runtime started with %s", tt.name)
			}
			logs := s.Logs()
			for _, w := range tt.want {
				if !strings.Contains(logs, w) {
					t.Errorf("the start-up output does not contain %q:\n%s", w, logs)
				}
			}
			if strings.Contains(logs, tt.secret) {
				t.Error("the secret access key is in the log")
			}
		})
	}
}

// TestPackageStoreValidate checks that caddy validate refuses a package store without
// key_store sync, saying why, and validates one with it without contacting the store (nothing
// listens on port 9).
func TestPackageStoreValidate(t *testing.T) {
	t.Parallel()
	const secret = "the-secret-access-key"
	store := "package_store s3 {\n\t\t\tendpoint http://127.0.0.1:9\n\t\t\tbucket units\n\t\t\taccess_key_id AKID\n" +
		"\t\t\tsecret_access_key {env.RUNTIME_S3_SECRET_ACCESS_KEY}\n\t\t}"
	tests := []struct {
		name, app string
		want      []string // nil: it validates
	}{
		{"without key_store sync", store, []string{`invalid package_store \"s3\": needs key_store sync`, "primary"}},
		{"with key_store sync", "key_store sync {\n\t\t\turl http://127.0.0.1:9\n\t\t}\n\t\t" + store, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			caddyfile := fmt.Sprintf("{\n\truntime {\n\t\t%s\n\t}\n}\n:%d {\n\truntime\n}\n", tt.app, harness.FreePort(t))
			if err := os.WriteFile(filepath.Join(dir, "Caddyfile"), []byte(caddyfile), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := harness.RunCommand(t, dir, map[string]string{"RUNTIME_S3_SECRET_ACCESS_KEY": secret},
				"validate", "--config", "Caddyfile", "--adapter", "caddyfile")
			if strings.Contains(out, secret) {
				t.Errorf("validate output reveals the secret:\n%s", out)
			}
			if tt.want == nil {
				if err != nil {
					t.Fatalf("validate failed: %v\n%s", err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("validate succeeded, want a failure; output:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("validate output does not contain %q:\n%s", w, out)
				}
			}
		})
	}
}
