package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// cli runs the runtime binary as the command-line client, with its own config folder.
type cli struct {
	t      *testing.T
	bin    string
	config string // XDG_CONFIG_HOME and HOME of the client
	env    []string
}

func newCLI(t *testing.T) *cli {
	return &cli{t: t, bin: harness.Binary(t), config: t.TempDir()}
}

// run runs the client's command args (runtime args, as in every build with the module) and
// returns its stdout, stderr and exit code.
func (c *cli) run(args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	return c.runTop(append([]string{"runtime"}, args...)...)
}

// runTop runs the binary with args as they are: bin/runtime's short forms (runtime deploy …).
func (c *cli) runTop(args ...string) (string, string, int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second) // a safety net
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + c.config, "XDG_CONFIG_HOME=" + c.config}, c.env...)
	stdout, stderr, code, err := testkit.Run(cmd)
	if err != nil {
		c.t.Fatalf("running %v: %v", args, err)
	}
	return stdout, stderr, code
}

// ok runs the client and fails the test unless it exits 0.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("%v exited %d:\n%s%s", args, code, out, errOut)
	}
	return out
}

// TestCLIDeploy logs in (a profile file of mode 0600), deploys the examples (a static app,
// and a process worker whose .runtimeignore leaves its sources out) and sees them served,
// checks a dry run installs nothing, compares --json with the API, rolls back to the previous
// version, follows a worker's logs, and logs out.
func TestCLIDeploy(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	c := newCLI(t)
	if out := c.ok("login", "--url", s.URL, "--key", rootKey, "--profile", "local"); !strings.Contains(out, "as root (admin)") {
		t.Errorf("login says %q", out)
	}
	file := filepath.Join(c.config, "caddy-runtime", "profiles.json")
	if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the profiles file: %v, mode %v; want 0600", err, info.Mode().Perm())
	}

	// The static example, straight from the repository; the profile supplies URL and key.
	out := c.ok("deploy", "../examples/static-app", "--wait")
	if !strings.Contains(out, s.URL+"/hello-static/") || !strings.Contains(out, s.URL+"/hello-static@1.0.0/") || !strings.Contains(out, "sha256 ") {
		t.Errorf("deploy printed %q", out)
	}
	if page := s.Get("/hello-static/"); page.Status != 200 || !strings.Contains(body(page), "Hello from a static worker") {
		t.Fatalf("the deployed static app = %s", page)
	}

	// The process example, built in a copy of its folder, its Go sources ignored.
	proc := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(proc, "hello"), ".")
	build.Dir, build.Env = "../examples/hello-process", append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the process example: %v\n%s", err, out)
	}
	copyFile(t, "../examples/hello-process/manifest.yaml", filepath.Join(proc, "manifest.yaml"))
	copyFile(t, "../examples/hello-process/main.go", filepath.Join(proc, "main.go"))
	if err := os.WriteFile(filepath.Join(proc, ".runtimeignore"), []byte("*.go\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var deployed struct {
		Name, Version, SHA256 string
		URLs                  []string
		Upload                struct {
			Data struct {
				Worker struct{ Name, Version, SHA256 string }
			}
		}
	}
	out = c.ok("deploy", proc, "--json")
	if err := json.Unmarshal([]byte(out), &deployed); err != nil || deployed.Name != "hello-process" || deployed.SHA256 == "" ||
		deployed.Upload.Data.Worker.SHA256 != deployed.SHA256 || len(deployed.URLs) != 2 {
		t.Fatalf("deploy --json = %v: %s", err, out)
	}
	if resp := s.Get("/hello-process/"); resp.Status != 200 || !strings.Contains(body(resp), "Hello from a process worker") {
		t.Fatalf("the deployed process worker = %s", resp)
	}
	installed := filepath.Join(s.DataDir, "apps", "hello-process", "1.0.0")
	if _, err := os.Stat(filepath.Join(installed, "main.go")); !os.IsNotExist(err) {
		t.Errorf(".runtimeignore did not leave main.go out: %v", err)
	}

	// Logs, followed: the process's start-up line arrives.
	follow := exec.Command(c.bin, "runtime", "workers", "logs", "hello-process", "-f")
	follow.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + c.config, "XDG_CONFIG_HOME=" + c.config}
	stdout, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case line := <-lines:
		if !strings.Contains(line, "hello listening on") {
			t.Errorf("the first followed line is %q", line)
		}
	case <-time.After(30 * time.Second): // a safety net, not a timed assertion
		t.Error("no log line followed")
	}
	_ = follow.Process.Kill()
	_ = follow.Wait()

	// A dry run installs nothing.
	next := t.TempDir()
	copyFile(t, "../examples/static-app/index.html", filepath.Join(next, "index.html"))
	if err := os.WriteFile(filepath.Join(next, "manifest.yaml"), []byte("name: hello-static\nversion: 1.1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := c.ok("deploy", next, "--dry-run"); !strings.Contains(out, "dry run") {
		t.Errorf("deploy --dry-run printed %q", out)
	}
	if _, err := os.Stat(filepath.Join(s.DataDir, "apps", "hello-static", "1.1.0")); !os.IsNotExist(err) {
		t.Fatalf("a dry run installed 1.1.0: %v", err)
	}

	// Deployed for real, then rolled back: 1.0.0 serves again.
	c.ok("deploy", next)
	if out := c.ok("rollback", "hello-static"); !strings.Contains(out, "1.0.0 is served now") {
		t.Errorf("rollback said %q", out)
	}
	var listed []workerRecord
	if err := json.Unmarshal([]byte(c.ok("workers", "list", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	api := workers(t, s, rootKey)
	for _, w := range listed {
		if a := api[w.Name]; a.Name != w.Name || strings.Join(a.Versions, ",") != strings.Join(w.Versions, ",") ||
			strings.Join(a.DisabledVersions, ",") != strings.Join(w.DisabledVersions, ",") {
			t.Errorf("workers list --json gave %+v, the API %+v", w, a)
		}
	}
	if w := api["hello-static"]; strings.Join(w.DisabledVersions, ",") != "1.1.0" {
		t.Errorf("after the rollback hello-static = %+v", w)
	}

	if out := c.ok("logout"); !strings.Contains(out, `"local"`) {
		t.Errorf("logout said %q", out)
	}
	if _, errOut, code := c.run("workers", "list"); code != 1 || !strings.Contains(errOut, "--url") {
		t.Errorf("after logout: exit %d, %q; want 1 and a hint at --url", code, errOut)
	}
}

// TestCLIKeysAndExitCodes manages keys from the command line in CI style (environment
// variables, --json), and checks the exit code of each failure class, a namespaced key
// refused outside its scope with the server's message among them.
func TestCLIKeysAndExitCodes(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	c := newCLI(t)
	c.env = []string{"RUNTIME_URL=" + s.URL, "RUNTIME_API_KEY=" + rootKey}

	var created struct {
		Data struct {
			ID  int64
			Key string
		}
	}
	if err := json.Unmarshal([]byte(c.ok("keys", "create", "team-ci", "--role", "editor", "--namespace", "@team", "--json")), &created); err != nil || created.Data.Key == "" {
		t.Fatalf("keys create --json: %v %+v", err, created)
	}
	var listed struct {
		Keys []struct {
			ID   int64
			Name string
		}
	}
	if err := json.Unmarshal([]byte(c.ok("keys", "list", "--json")), &listed); err != nil || len(listed.Keys) != 1 || listed.Keys[0].Name != "team-ci" {
		t.Fatalf("keys list --json: %v %+v", err, listed)
	}

	// The new key works, within its namespace only.
	team := t.TempDir()
	if err := os.WriteFile(filepath.Join(team, "manifest.yaml"), []byte("name: other\nversion: 1.0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := c.run("deploy", team, "--key", created.Data.Key)
	if code != 1 || !strings.Contains(errOut, "NAMESPACE_DENIED") {
		t.Errorf("a namespaced key deploying outside its scope: exit %d, %q; want 1 with the server's refusal", code, errOut)
	}
	if err := os.WriteFile(filepath.Join(team, "manifest.yaml"), []byte("name: '@team/app'\nversion: 1.0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ok("deploy", team, "--key", created.Data.Key)

	c.ok("keys", "revoke", strings.TrimSpace(jsonNumber(created.Data.ID)))
	for _, tt := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"revoked key", []string{"workers", "list", "--key", created.Data.Key}, 4, "AUTH_REQUIRED"},
		{"wrong key", []string{"health", "--key", "nope"}, 0, ""}, // health is public
		{"unreachable", []string{"health", "--url", "http://127.0.0.1:1"}, 3, "cannot reach"},
		{"bad URL", []string{"health", "--url", "ftp://x"}, 1, "http(s)"},
		{"usage", []string{"workers", "enable", "shop"}, 1, "name the version"},
		{"no manifest", []string{"deploy", t.TempDir()}, 1, "no manifest.yaml"},
		{"refused", []string{"workers", "delete", "missing"}, 1, "WORKER_NOT_FOUND"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := c.run(tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.says) {
				t.Errorf("runtime %v: exit %d, %q; want %d and %q", tt.args, code, errOut, tt.code, tt.says)
			}
			// bin/runtime's short form is the same command.
			_, errOut, code = c.runTop(tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.says) {
				t.Errorf("%v: exit %d, %q; want %d and %q", tt.args, code, errOut, tt.code, tt.says)
			}
		})
	}
}

func jsonNumber(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCLIPlugins deploys the example plugin with --plugin (which reloads the plugins), sees it
// loaded and serving, disables it, and finds the actions in the audit trail.
func TestCLIPlugins(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	c := newCLI(t)
	c.env = []string{"RUNTIME_URL=" + s.URL, "RUNTIME_API_KEY=" + rootKey}
	if out := c.ok("deploy", "--plugin", "../examples/hello-plugin"); !strings.Contains(out, "Installed plugin hello-plugin 1.0.0 and reloaded") {
		t.Errorf("deploy --plugin printed %q", out)
	}
	if out := c.ok("plugins", "loaded"); !strings.Contains(out, "hello-plugin") || !strings.Contains(out, "/hello-plugin") {
		t.Errorf("plugins loaded printed %q", out)
	}
	if resp := s.Get("/hello-plugin/api/greeting"); resp.Status != 200 || !strings.Contains(body(resp), "Hello from a plugin") {
		t.Fatalf("the deployed plugin = %s", resp)
	}
	c.ok("plugins", "disable", "hello-plugin")
	if resp := s.Get("/hello-plugin/api/greeting"); resp.Status == 200 {
		t.Errorf("the disabled plugin still answers: %s", resp)
	}
	var trail struct{ Entries []struct{ Action string } }
	if err := json.Unmarshal([]byte(c.ok("audit", "--json", "--limit", "10")), &trail); err != nil || len(trail.Entries) == 0 {
		t.Fatalf("audit --json: %v %+v", err, trail)
	}
	var actions []string
	for _, e := range trail.Entries {
		actions = append(actions, e.Action)
	}
	if got := strings.Join(actions, " "); !strings.Contains(got, "plugin.disable") || !strings.Contains(got, "plugin.upload") {
		t.Errorf("the audit trail has %q", got)
	}
}
