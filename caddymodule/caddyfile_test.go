package caddymodule

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

var update = flag.Bool("update", false, "rewrite the golden JSON files in testdata")

func adapt(t *testing.T, src []byte) ([]byte, error) {
	t.Helper()
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt(src, map[string]any{"filename": "Caddyfile"})
	for _, w := range warnings {
		t.Logf("adapt warning: %s", w.String())
	}
	return out, err
}

// TestCaddyfileGolden adapts every testdata/*.caddyfile and compares it with its .json twin.
func TestCaddyfileGolden(t *testing.T) {
	t.Setenv("STATE_DIR", "/srv/state")
	files, _ := filepath.Glob("testdata/*.caddyfile")
	if len(files) == 0 {
		t.Fatal("no golden Caddyfiles")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			out, err := adapt(t, src)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := json.Indent(&got, out, "", "\t"); err != nil {
				t.Fatal(err)
			}
			got.WriteByte('\n')
			golden := strings.TrimSuffix(file, ".caddyfile") + ".json"
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestCaddyfileGolden -update to create it)", err)
			}
			if got.String() != string(want) {
				t.Fatalf("adapted JSON differs from %s:\n%s", golden, got.String())
			}
		})
	}
}

func TestCaddyfileErrors(t *testing.T) {
	tests := []struct {
		name, body string
		want       []string
	}{
		{"argument", "runtime foo", []string{"no arguments"}},
		{"unknown setting", "runtime {\n\tworkers ./x\n}", []string{`unknown runtime setting "workers"`, "worker_dirs"}},
		{"set twice", "runtime {\n\tstate_dir a\n\tstate_dir b\n}", []string{"state_dir is set twice"}},
		{"missing value", "runtime {\n\tstate_dir\n}", []string{"state_dir takes exactly one value"}},
		{"two values", "runtime {\n\tsession_ttl 1h 2h\n}", []string{"session_ttl takes exactly one value"}},
		{"no dirs", "runtime {\n\tworker_dirs\n}", []string{"worker_dirs needs at least one value"}},
		{"bad size", "runtime {\n\tmax_upload_size huge\n}", []string{"max_upload_size", "100MiB"}},
		{"bad prefix", "runtime {\n\tapi_prefix /a//b\n}", []string{"invalid api_prefix", "double slash"}},
		{"bare ttl", "runtime {\n\tsession_ttl 3600\n}", []string{"invalid session_ttl", "bare number"}},
		{"long ttl", "runtime {\n\tsession_ttl 401d\n}", []string{"invalid session_ttl", "400d"}},
		{"sync url with a token", "runtime {\n\tkey_store sync {\n\t\turl http://h?authToken=s3cret\n\t}\n}", []string{"invalid sync_url", "credentials"}},
		{"sync interval", "runtime {\n\tkey_store sync {\n\t\turl http://h\n\t\tinterval 2h\n\t}\n}", []string{"invalid sync_interval", "1s to 1h"}},
		{"block after local", "runtime {\n\tkey_store local {\n\t\turl http://h\n\t}\n}", []string{"only key_store sync takes a block"}},
		{"unknown sync setting", "runtime {\n\tkey_store sync {\n\t\tpassword x\n\t}\n}", []string{`unknown key_store sync setting "password"`}},
		{"sync setting twice", "runtime {\n\tkey_store sync {\n\t\turl http://h\n\t\turl http://i\n\t}\n}", []string{"url is set twice"}},
		{"admin url with credentials", "runtime {\n\tkey_store sync {\n\t\turl http://h\n\t\tadmin_url http://u:p@h:8081\n\t}\n}", []string{"invalid sync_admin_url", "admin_token"}},
		{"database size", "runtime {\n\tworker_database_size lots\n}", []string{"worker_database_size"}},
		{"sync setting without value", "runtime {\n\tkey_store sync {\n\t\ttoken\n\t}\n}", []string{"wrong argument count"}},
		{"weak root key", "runtime {\n\troot_key short\n}", []string{"invalid root_key", "at least 16"}},
		{"shared dir", "runtime {\n\tworker_dirs /x\n\tplugin_dirs /x\n}", []string{"invalid plugin_dirs", "worker_dirs"}},
		{"network", "runtime {\n\tworker_network none\n}", []string{`invalid worker_network "none"`, "host or isolated"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := adapt(t, []byte(":8080 {\n"+tt.body+"\n}\n"))
			if err == nil {
				t.Fatal("adapt succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), "Caddyfile:") {
				t.Errorf("error %q does not name the file and line", err)
			}
			// Every value here is written in the Caddyfile, so no environment variable is named.
			if strings.Contains(err.Error(), "RUNTIME_") {
				t.Errorf("error %q names an environment variable for a value written in the Caddyfile", err)
			}
		})
	}
}

// TestDocumentedCaddyfilesAreFormatted adapts Caddyfile.example, examples/Caddyfile.sync and
// the caddyfile blocks of the README and of docs/ and refuses any warning, so `caddy run` on
// them prints no "not formatted" warning.
func TestDocumentedCaddyfilesAreFormatted(t *testing.T) {
	sources := map[string][]byte{}
	for _, name := range []string{"Caddyfile.example", "examples/Caddyfile.sync"} {
		data, err := os.ReadFile("../" + name)
		if err != nil {
			t.Fatal(err)
		}
		sources[name] = data
	}
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no page in docs/: %v", err)
	}
	for _, page := range append([]string{"../README.md"}, pages...) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(page, "../")
		for i, block := range strings.Split(string(text), "```caddyfile\n")[1:] {
			block, _, _ = strings.Cut(block, "```")
			sources[fmt.Sprintf("%s caddyfile block %d", name, i+1)] = []byte(block)
		}
	}
	for name, src := range sources {
		_, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt(src, map[string]any{"filename": name})
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		for _, w := range warnings {
			t.Errorf("%s: %s", name, w.String())
		}
	}
}

// TestCaddyfileSyncBlock checks that the key_store sync block adapts to the sync_* settings and
// that a token written as a placeholder stays one in the adapted JSON.
func TestCaddyfileSyncBlock(t *testing.T) {
	t.Setenv("SYNC_TOKEN", "the-secret-token")
	out, err := adapt(t, []byte(":8080 {\n\truntime {\n\t\tkey_store sync {\n\t\t\turl http://127.0.0.1:8081\n"+
		"\t\t\ttoken {env.SYNC_TOKEN}\n\t\t\tinterval 5s\n\t\t}\n\t}\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"key_store":"sync"`, `"sync_url":"http://127.0.0.1:8081"`, `"sync_token":"{env.SYNC_TOKEN}"`, `"sync_interval":"5s"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("adapted JSON lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "the-secret-token") {
		t.Errorf("the token is in the adapted JSON:\n%s", out)
	}
}

// TestCaddyfileScopes checks where settings may be written: the global runtime option takes
// the process-wide ones only; a site block's runtime directive may still carry them (the
// deprecated form) when every directive carries the same and the option agrees.
func TestCaddyfileScopes(t *testing.T) {
	const site2 = "\n:8081 {\n\truntime {\n\t\tserve workers\n\t}\n}\n"
	tests := []struct {
		name, src string
		want      []string // nil: it adapts
	}{
		{"site setting in the option", "{\n\truntime {\n\t\tserve api\n\t}\n}\n:8080 {\n\truntime\n}\n",
			[]string{"serve is a setting of a site block", "Caddyfile:3"}},
		{"unknown setting in the option", "{\n\truntime {\n\t\tworkers_url x\n\t}\n}\n",
			[]string{"workers_url is a setting of a site block"}},
		{"typo in the option", "{\n\truntime {\n\t\tstatedir x\n\t}\n}\n",
			[]string{`unknown runtime setting "statedir"`, "state_dir"}},
		{"option with an argument", "{\n\truntime on\n}\n", []string{"takes no arguments"}},
		{"bad value in the option", "{\n\truntime {\n\t\tsession_ttl 3600\n\t}\n}\n", []string{"invalid session_ttl", "bare number", "Caddyfile:"}},
		{"option alone", "{\n\truntime {\n\t\tpool_size 4\n\t}\n}\n:8080 {\n\trespond ok\n}\n", nil},
		{"copies equal", ":8080 {\n\truntime {\n\t\tpool_size 4\n\t}\n}\n:8081 {\n\truntime {\n\t\tpool_size 4\n\t\tserve workers\n\t}\n}\n", nil},
		{"copy equal to the option", "{\n\truntime {\n\t\tpool_size 4\n\t}\n}\n:8080 {\n\truntime {\n\t\tpool_size 4\n\t}\n}\n" + site2, nil},
		{"copies differ", ":8080 {\n\truntime {\n\t\tpool_size 4\n\t}\n}\n:8081 {\n\truntime {\n\t\tpool_size 5\n\t}\n}\n",
			[]string{"pool_size", "otherwise than the one at Caddyfile:2", "global runtime option", "Caddyfile:7"}},
		{"copy and none", ":8080 {\n\truntime {\n\t\tstate_dir /a\n\t\tpool_size 4\n\t}\n}\n" + site2,
			[]string{"state_dir, pool_size", "otherwise than the one at Caddyfile:2"}},
		{"copy differs from the option", "{\n\truntime {\n\t\tstate_dir /a\n\t}\n}\n:8080 {\n\truntime {\n\t\tstate_dir /b\n\t}\n}\n",
			[]string{"state_dir", "set in the global runtime option and, to another value, in this runtime directive", "Caddyfile:7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := adapt(t, []byte(tt.src))
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("adapt succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestCaddyfilePackageStore checks that package_store adapts to the runtime app's module of
// the runtime.package_stores namespace, with credentials written as placeholders kept as
// placeholders.
func TestCaddyfilePackageStore(t *testing.T) {
	t.Setenv("S3_KEY", "AKID-FROM-ENV")
	t.Setenv("S3_SECRET", "the-secret-access-key")
	tests := []struct {
		name, block string
		want        string
	}{
		{"s3", "package_store s3 {\n\t\t\tendpoint http://127.0.0.1:7070\n\t\t\tbucket units\n\t\t\tregion us-east-1\n\t\t\tprefix prod\n" +
			"\t\t\taccess_key_id {env.S3_KEY}\n\t\t\tsecret_access_key {env.S3_SECRET}\n\t\t\tpath_style\n\t\t}",
			`"package_store":{"access_key_id":"{env.S3_KEY}","bucket":"units","endpoint":"http://127.0.0.1:7070","path_style":true,` +
				`"prefix":"prod","region":"us-east-1","secret_access_key":"{env.S3_SECRET}","store":"s3"}`},
		{"s3 without a block", "package_store s3", `"package_store":{"store":"s3"}`},
		{"path_style false", "package_store s3 {\n\t\t\tpath_style false\n\t\t}", `"package_store":{"path_style":false,"store":"s3"}`},
		{"path_style on", "package_store s3 {\n\t\t\tpath_style on\n\t\t}", `"package_store":{"path_style":true,"store":"s3"}`},
		{"path_style off", "package_store s3 {\n\t\t\tpath_style off\n\t\t}", `"package_store":{"path_style":false,"store":"s3"}`},
		{"path_style yes", "package_store s3 {\n\t\t\tpath_style YES\n\t\t}", `"package_store":{"path_style":true,"store":"s3"}`},
		{"local", "package_store local", `"package_store":{"store":"local"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := adapt(t, []byte("{\n\truntime {\n\t\t"+tt.block+"\n\t}\n}\n:8080 {\n\truntime\n}\n"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("adapted JSON lacks %s:\n%s", tt.want, out)
			}
			if strings.Contains(string(out), "the-secret-access-key") || strings.Contains(string(out), "AKID-FROM-ENV") {
				t.Errorf("a credential is in the adapted JSON:\n%s", out)
			}
		})
	}
}

func TestCaddyfilePackageStoreErrors(t *testing.T) {
	option := func(block string) string { return "{\n\truntime {\n\t\t" + block + "\n\t}\n}\n:8080 {\n\truntime\n}\n" }
	tests := []struct {
		name, src string
		want      []string
	}{
		{"no store", option("package_store"), []string{"package_store takes the store", "local", "s3", "Caddyfile:3"}},
		{"unknown store", option("package_store minio"), []string{`package_store "minio": no such store`, "local", "s3"}},
		{"block after local", option("package_store local {\n\t\t\tbucket b\n\t\t}"), []string{"package_store local takes no arguments and no block", "Caddyfile:4"}},
		{"argument after local", option("package_store local s3"), []string{"package_store local takes no arguments"}},
		{"argument after s3", option("package_store s3 units"), []string{"package_store s3 takes a block"}},
		{"unknown setting", option("package_store s3 {\n\t\t\tsecret hunter2\n\t\t}"),
			[]string{`unknown package_store s3 setting "secret"`, "secret_access_key", "Caddyfile:4"}},
		{"setting twice", option("package_store s3 {\n\t\t\tbucket a\n\t\t\tbucket b\n\t\t}"), []string{"package_store s3: bucket is set twice", "Caddyfile:5"}},
		{"setting without value", option("package_store s3 {\n\t\t\tbucket\n\t\t}"), []string{"package_store s3: bucket takes exactly one value"}},
		{"path_style value", option("package_store s3 {\n\t\t\tpath_style maybe\n\t\t}"), []string{`path_style "maybe" is not a boolean: write on, off, true, false, yes or no`}},
		{"path_style values", option("package_store s3 {\n\t\t\tpath_style on off\n\t\t}"), []string{"path_style takes one of on, off"}},
		{"store twice", option("package_store local\n\t\tpackage_store s3"), []string{"package_store is set twice"}},
		{"a store's setting outside its block", option("bucket units"), []string{`unknown runtime setting "bucket"`, "package_store"}},
		{"in a site block", ":8080 {\n\truntime {\n\t\tpackage_store s3\n\t}\n}\n", []string{"package_store is a setting of the global runtime option only"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := adapt(t, []byte(tt.src))
			if err == nil {
				t.Fatal("adapt succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
