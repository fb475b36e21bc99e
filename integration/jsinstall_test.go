package integration

import (
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// npmRegistry is an npm-compatible registry in the test process, on 127.0.0.1: it serves the
// packages left-greet@1.0.0 and big-greet@1.0.0 (256 KiB of module; their metadata and .tgz,
// made here) and counts the tarballs' downloads; a request for slow-greet waits until the test
// ends.
type npmRegistry struct {
	*httptest.Server
	downloads atomic.Int64
}

// leftGreet is the module of the package left-greet.
const leftGreet = "export function greet(who) { return \"hello, \" + who + \", from left-greet\"; }\n"

func startRegistry(t *testing.T) *npmRegistry {
	t.Helper()
	tarballs := map[string][]byte{}
	for name, module := range map[string]string{"left-greet": leftGreet, "big-greet": leftGreet + "// " + strings.Repeat("x", 256<<10) + "\n"} {
		tarballs[name] = harness.TarGz(t, harness.File{Name: "package/package.json", Body: `{"name":"` + name + `","version":"1.0.0","type":"module","main":"index.js","exports":"./index.js"}`},
			harness.File{Name: "package/index.js", Body: module})
	}
	reg := &npmRegistry{}
	done := make(chan struct{})
	reg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, file, isTarball := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/-/")
		tgz, ok := tarballs[name]
		switch {
		case name == "slow-greet":
			select {
			case <-r.Context().Done():
			case <-done:
			}
		case !ok || isTarball && file != name+"-1.0.0.tgz":
			http.NotFound(w, r)
		case isTarball:
			reg.downloads.Add(1)
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(tgz)
		default:
			sha1sum, sha512sum := sha1.Sum(tgz), sha512.Sum512(tgz)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"name": name, "dist-tags": map[string]string{"latest": "1.0.0"},
				"versions": map[string]any{"1.0.0": map[string]any{"name": name, "version": "1.0.0", "type": "module", "main": "index.js",
					"dist": map[string]string{"tarball": reg.URL + "/" + name + "/-/" + name + "-1.0.0.tgz", "shasum": hex.EncodeToString(sha1sum[:]),
						"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sha512sum[:])}}}})
		}
	}))
	t.Cleanup(func() { close(done); reg.Close() })
	return reg
}

// installCase is how a test makes one engine's lock file: the command that writes it (run
// here, against the test's registry) and the file; and the settings of the runtime the install
// runs in (an isolated network, which reaches the registry through the install's proxy
// alone, or another account).
type installCase struct {
	engine  jsEngine
	lock    func(binary string) []string
	file    string
	setting string
}

func bunLock(bun string) []string {
	return []string{bun, "install", "--lockfile-only", "--ignore-scripts"}
}

var installCases = []installCase{
	{jsEngines[0], bunLock, "bun.lock", ""},
	{jsEngines[0], bunLock, "bun.lock", "worker_network isolated"},
	{jsEngines[0], bunLock, "bun.lock", "worker_user nobody"},
	{jsEngines[1], func(deno string) []string { return []string{deno, "install"} }, "deno.lock", ""},
	{jsEngines[2], func(string) []string {
		return []string{"/usr/bin/npm", "install", "--package-lock-only", "--ignore-scripts"}
	}, "package-lock.json", ""},
}

// lockFile writes package.json in a folder of its own and returns the lock file the engine
// makes of it, resolved against reg.
func (c installCase) lockFile(t *testing.T, binary, packageJSON string, reg *npmRegistry) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(packageJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := c.lock(binary)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "BUN_CONFIG_REGISTRY=" + reg.URL + "/", "NPM_CONFIG_REGISTRY=" + reg.URL + "/",
		"npm_config_registry=" + reg.URL + "/", "DENO_DIR=" + filepath.Join(dir, ".deno"), "BUN_INSTALL_CACHE_DIR=" + filepath.Join(dir, ".bun"), "NO_COLOR=1"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, out)
	}
	lock, err := os.ReadFile(filepath.Join(dir, c.file))
	if err != nil {
		t.Fatal(err)
	}
	return string(lock)
}

// TestJSAutoInstall: autoInstall: true installs a JavaScript worker's dependency from its
// lock file at upload, from the registry js_registry names (one in the test, no network),
// under each engine (Bun's install, Deno's, npm ci for Node): the upload answers with the
// engine's output, the worker imports the dependency and answers with it; a lock file that
// does not match package.json refuses the upload with 422 INSTALL_FAILED and the engine's
// output, installing nothing; an install that outlasts js_install_timeout is refused naming it.
func TestJSAutoInstall(t *testing.T) {
	t.Parallel()
	for _, c := range installCases {
		t.Run(strings.TrimSpace(c.engine.name+" "+c.setting), func(t *testing.T) {
			t.Parallel()
			if c.setting != "" && os.Geteuid() != 0 {
				t.Skip(c.setting + " needs root")
			}
			binary := c.engine.binary(t)
			reg := startRegistry(t)
			packageJSON := `{"name":"app","version":"1.0.0","type":"module","dependencies":{"left-greet":"1.0.0"}}`
			lock := c.lockFile(t, binary, packageJSON, reg)
			s := startJS(t, binary, "js_registry "+reg.URL, c.setting)
			if strings.HasPrefix(c.setting, "worker_user") {
				// The test's temporary folders are its own: the account passes them as it
				// would a deployment's (state_dir stays closed).
				openToOthers(filepath.Dir(binary))
				for _, dir := range []string{filepath.Join(s.DataDir, "apps"), filepath.Join(s.DataDir, "scratch")} {
					if err := os.MkdirAll(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					openToOthers(dir)
				}
			}
			worker := harness.File{Name: "index.js", Body: "import { greet } from \"left-greet\";\nexport default { fetch: () => new Response(greet(\"runtime\")) };\n"}

			before := reg.downloads.Load()
			resp := s.Upload(s.API+"/workers/upload", "app.tgz", jsArchive(t, "app", "autoInstall: true\n", worker,
				harness.File{Name: "package.json", Body: packageJSON}, harness.File{Name: c.file, Body: lock}), harness.WithKey(rootKey))
			var up struct {
				Data struct{ Worker struct{ Install string } }
			}
			if resp.Status != 200 || resp.JSON(&up) != nil {
				t.Fatalf("upload with autoInstall = %s", resp)
			}
			if reg.downloads.Load() == before {
				t.Errorf("the install downloaded nothing from the registry; its output: %q", up.Data.Worker.Install)
			}
			if got := body(s.Get("/app/")); got != "hello, runtime, from left-greet" {
				t.Errorf("GET /app/ = %q; want the dependency's greeting (install output %q)", got, up.Data.Worker.Install)
			}
			if _, err := os.Stat(filepath.Join(s.DataDir, "apps", "app", "1.0.0", "node_modules", "left-greet", "index.js")); err != nil {
				t.Errorf("the version folder has no node_modules/left-greet: %v", err)
			}

			// The lock file says 1.0.0, package.json now asks for 2.0.0: a frozen install fails.
			changed := strings.Replace(packageJSON, `"left-greet":"1.0.0"`, `"left-greet":"2.0.0"`, 1)
			resp = s.Upload(s.API+"/workers/upload", "bad.tgz", jsArchive(t, "bad", "autoInstall: true\n", worker,
				harness.File{Name: "package.json", Body: strings.Replace(changed, `"app"`, `"bad"`, 1)}, harness.File{Name: c.file, Body: lock}), harness.WithKey(rootKey))
			if resp.Status != 422 || resp.ErrorCode() != "INSTALL_FAILED" || !strings.Contains(string(resp.Body), "its output:") {
				t.Errorf("upload with a lock file that does not match = %s; want 422 INSTALL_FAILED with the engine's output", resp)
			}
			if _, err := os.Stat(filepath.Join(s.DataDir, "apps", "bad")); err == nil {
				t.Errorf("the refused upload was installed")
			}
		})
	}
}

// TestJSAutoInstallLimits: an install that outlasts js_install_timeout is stopped, and one
// whose node_modules passes what max_unpacked_size leaves beside the upload's files is
// refused, each with 422 naming its setting.
func TestJSAutoInstallLimits(t *testing.T) {
	t.Parallel()
	bun := jsEngines[0].binary(t)
	reg := startRegistry(t)
	s := startJS(t, bun, "js_registry "+reg.URL, "js_install_timeout 1s", "max_unpacked_size 128KiB")
	packageJSON := `{"name":"big","version":"1.0.0","type":"module","dependencies":{"big-greet":"1.0.0"}}`
	lock := installCases[0].lockFile(t, bun, packageJSON, reg)
	resp := s.Upload(s.API+"/workers/upload", "big.tgz", jsArchive(t, "big", "autoInstall: true\n",
		harness.File{Name: "index.js", Body: "export default { fetch: () => new Response(\"big\") };\n"},
		harness.File{Name: "package.json", Body: packageJSON}, harness.File{Name: "bun.lock", Body: lock}), harness.WithKey(rootKey))
	if resp.Status != 422 || resp.ErrorCode() != "INSTALL_FAILED" || !strings.Contains(string(resp.Body), "max_unpacked_size") {
		t.Errorf("upload whose node_modules passes max_unpacked_size = %s; want 422 INSTALL_FAILED naming it", resp)
	}

	resp = s.Upload(s.API+"/workers/upload", "slow.tgz", jsArchive(t, "slow", "autoInstall: true\n",
		harness.File{Name: "index.js", Body: "export default { fetch: () => new Response(\"slow\") };\n"},
		harness.File{Name: "package.json", Body: `{"name":"slow","version":"1.0.0","dependencies":{"slow-greet":"1.0.0"}}`}), harness.WithKey(rootKey))
	if resp.Status != 422 || resp.ErrorCode() != "INSTALL_FAILED" || !strings.Contains(string(resp.Body), "js_install_timeout") {
		t.Errorf("upload whose install hangs = %s; want 422 INSTALL_FAILED naming js_install_timeout", resp)
	}
}

// TestJSAutoInstallRefusedInCluster: in a cluster every instance installs the archive as
// published, without what an install at one of them would add, so an upload with autoInstall:
// true is refused with 400 INVALID_MANIFEST saying to install before packing and ship
// node_modules, and nothing is published; the same worker shipping node_modules uploads and
// serves.
func TestJSAutoInstallRefusedInCluster(t *testing.T) {
	t.Parallel()
	bun := jsEngines[0].binary(t)
	c := startCluster(t, 0)
	cfg := c.Config("A")
	cfg.App += "\njs_runtime " + bun
	s := harness.StartAll(t, cfg)[0]
	worker := harness.File{Name: "index.js", Body: "import { greet } from \"left-greet\";\nexport default { fetch: () => new Response(greet(\"cluster\")) };\n"}
	packageJSON := harness.File{Name: "package.json", Body: `{"name":"app","version":"1.0.0","type":"module","dependencies":{"left-greet":"1.0.0"}}`}

	resp := s.Upload(s.API+"/workers/upload", "app.tgz", jsArchive(t, "app", "autoInstall: true\n", worker, packageJSON), harness.WithKey(rootKey))
	if resp.Status != 400 || resp.ErrorCode() != "INVALID_MANIFEST" || !strings.Contains(string(resp.Body), "ship node_modules, without autoInstall") {
		t.Errorf("upload with autoInstall in a cluster = %s; want 400 INVALID_MANIFEST saying to ship node_modules", resp)
	}
	if err := listed("app", "", false)(s); err != nil {
		t.Errorf("after the refused upload: %v", err)
	}
	if objects := c.Objects(t); len(objects) != 0 {
		t.Errorf("the refused upload was published: %v", objects)
	}

	uploadOK(t, s, "workers", "app.tgz", jsArchive(t, "app", "", worker, packageJSON,
		harness.File{Name: "node_modules/left-greet/package.json", Body: `{"name":"left-greet","version":"1.0.0","type":"module","main":"index.js"}`},
		harness.File{Name: "node_modules/left-greet/index.js", Body: "export const greet = (who) => `hello, ${who}, from left-greet`;\n"}), rootKey)
	harness.EventuallyNil(t, converge, func() error { return answer(s, "/app/", 200, "hello, cluster, from left-greet") })
}
