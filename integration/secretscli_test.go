package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// runWithInput runs the client's command args with stdin as its standard input.
func (c *cli) runWithInput(stdin string, args ...string) (string, string, int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append([]string{"runtime"}, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + c.config, "XDG_CONFIG_HOME=" + c.config}, c.env...)
	cmd.Stdin = strings.NewReader(stdin)
	stdout, stderr, code, err := testkit.Run(cmd)
	if err != nil {
		c.t.Fatalf("running %v: %v", args, err)
	}
	return stdout, stderr, code
}

// TestCLISecrets: secrets set reads the value from stdin (an argument is refused, pointing
// there), list shows names and never values, unset removes; deploy --secrets-file sets a
// .env file's secrets before the upload, so the new version starts with them, and with
// --dry-run names them and sends nothing. No value is ever printed.
func TestCLISecrets(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_SECRETS_KEY": newSecretsKey(t)}})
	c := newCLI(t)
	c.env = []string{"RUNTIME_URL=" + s.URL, "RUNTIME_API_KEY=" + rootKey}
	const value = "piped-value-93317"

	out, errOut, code := c.run("secrets", "set", "@team/api", "TOKEN", value)
	if code != 1 || !strings.Contains(errOut, "reads the value from standard input, never from an argument") {
		t.Errorf("secrets set with the value as an argument: exit %d, %q %q", code, out, errOut)
	}
	if out, errOut, code := c.runWithInput("", "secrets", "set", "@team/api", "TOKEN"); code != 1 || !strings.Contains(errOut, "no value for TOKEN on standard input") {
		t.Errorf("secrets set with nothing on stdin: exit %d, %q %q", code, out, errOut)
	}
	out, errOut, code = c.runWithInput(value+"\n", "secrets", "set", "@team/api", "TOKEN")
	if code != 0 || !strings.Contains(out, "Set secret TOKEN of @team/api") {
		t.Fatalf("secrets set: exit %d, %q %q", code, out, errOut)
	}
	c.runWithInput("second", "secrets", "set", "@team/api", "SECOND")
	out = c.ok("secrets", "list", "@team/api")
	if !strings.Contains(out, "TOKEN") || !strings.Contains(out, "SECOND") || !strings.Contains(out, "root") {
		t.Errorf("secrets list printed %q", out)
	}
	out = c.ok("secrets", "unset", "@team/api", "SECOND")
	if !strings.Contains(out, "Removed secret SECOND of @team/api") {
		t.Errorf("secrets unset printed %q", out)
	}
	if out := c.ok("secrets", "list", "@team/api", "--json"); strings.Contains(out, "SECOND") || !strings.Contains(out, `"TOKEN"`) {
		t.Errorf("after unset, secrets list --json printed %q", out)
	}
	if _, errOut, code := c.runWithInput("x", "secrets", "set", "@team/api", "PORT"); code != 1 || !strings.Contains(errOut, "INVALID_SECRET_NAME") {
		t.Errorf("secrets set PORT: exit %d, %q", code, errOut)
	}

	// deploy --secrets-file: the process worker's first process has them.
	dir := t.TempDir()
	server, err := os.ReadFile(harness.TestWorker(t))
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"manifest.yaml": "name: '@team/api'\nversion: 1.0.0\nentrypoint: server\n"})
	if err := os.WriteFile(filepath.Join(dir, "server"), server, 0o755); err != nil {
		t.Fatal(err)
	}
	envFile := filepath.Join(t.TempDir(), ".env")
	env := "# production\nexport DB_URL=\"postgres://u:p%40ss-1181@db/x\"\nFLAG='on # not a comment'\nPLAIN=plain-4471 # a comment\n\n"
	if err := os.WriteFile(envFile, []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	out = c.ok("deploy", dir, "--secrets-file", envFile, "--dry-run")
	if !strings.Contains(out, "Would set secrets DB_URL, FLAG, PLAIN (dry run: not sent)") {
		t.Errorf("deploy --dry-run printed %q", out)
	}
	if list := c.ok("secrets", "list", "@team/api"); strings.Contains(list, "DB_URL") {
		t.Error("a dry run set the secrets")
	}
	out = c.ok("deploy", dir, "--secrets-file", envFile)
	if !strings.Contains(out, "Set secrets DB_URL, FLAG, PLAIN") {
		t.Errorf("deploy printed %q", out)
	}
	e := echoOf(t, s.Get("/@team/api/"))
	for name, want := range map[string]string{"DB_URL": "postgres://u:p%40ss-1181@db/x", "FLAG": "on # not a comment", "PLAIN": "plain-4471", "TOKEN": value} {
		if got, _ := envOf(e, name); got != want {
			t.Errorf("the deployed worker's %s = %q, want %q", name, got, want)
		}
	}
	if _, errOut, code := c.run("deploy", dir, "--secrets-file", filepath.Join(dir, "missing.env")); code != 1 || !strings.Contains(errOut, "missing.env") {
		t.Errorf("deploy with a missing secrets file: exit %d, %q", code, errOut)
	}
}

// TestSecretsRotate: rotate re-seals every secret under the new key (the old from
// RUNTIME_SECRETS_KEY_OLD), the runtime started with the new key gives the worker the same
// value, and one still holding the old key does not start the worker without it; a second
// rotation has nothing to do, and a wrong old key changes nothing.
func TestSecretsRotate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	oldKey, newKey := newSecretsKey(t), newSecretsKey(t)
	start := func(key string) *harness.Server {
		return harness.Start(t, harness.Config{Dir: dir, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_SECRETS_KEY": key}})
	}
	s := start(oldKey)
	processWorker(t, s, "app", "1.0.0", "")
	const value = "rotate-me-55190"
	setSecret(t, s, rootKey, "app", "TOKEN", value)
	setSecret(t, s, rootKey, "app", "OTHER", "other-value")
	s.Stop()

	rotate := func(old, new string) (string, error) {
		return harness.RunCommand(t, dir, map[string]string{"RUNTIME_SECRETS_KEY_OLD": old, "RUNTIME_SECRETS_KEY": new},
			"runtime", "secrets", "rotate", "--config", filepath.Join(dir, "Caddyfile"), "--adapter", "caddyfile")
	}
	if out, err := rotate(newSecretsKey(t), newKey); err == nil || !strings.Contains(out, "neither the old key") {
		t.Fatalf("rotate with a wrong old key: %v\n%s", err, out)
	}
	out, err := rotate(oldKey, newKey)
	if err != nil || !strings.Contains(out, "re-sealed 2 secrets under key") {
		t.Fatalf("rotate: %v\n%s", err, out)
	}
	if out, err := rotate(oldKey, newKey); err != nil || !strings.Contains(out, "re-sealed 0 secrets") {
		t.Errorf("a second rotate: %v\n%s", err, out)
	}
	if strings.Contains(out, value) {
		t.Error("rotate printed a value")
	}

	s = start(newKey)
	if got, _ := envOf(echoOf(t, s.Get("/app/")), "TOKEN"); got != value {
		t.Errorf("after rotation the worker's TOKEN = %q, want %q", got, value)
	}
	s.Stop()

	s = start(oldKey)
	resp := s.Get("/app/")
	if resp.Status == 200 || !strings.Contains(string(resp.Body), "sealed under another secrets key") {
		t.Errorf("with the old key after rotation, /app/ = %s; want the worker not started, saying why", resp)
	}
	// The log line is written as the answer goes out: wait for it rather than race it.
	if _, err := s.WaitLog("worker did not start", 5*time.Second); err != nil {
		t.Errorf("with the old key after rotation, no log says why the worker did not start: %v", err)
	}
	var list api.WorkerSecrets
	if resp := s.Get(secretsPath(s, "app"), harness.WithKey(rootKey)); resp.Status != 200 || resp.JSON(&list) != nil || len(list.Secrets) != 2 {
		t.Errorf("GET secrets with the old key = %s", resp)
	}
}

// TestSecretsRotateOnline: a runtime given the new key as secrets_key and the old one as
// secrets_key_old (by a reload) opens what either sealed and seals with the new one; secrets
// rotate, run while it serves, re-seals the rest (in sync mode through a replica of its own,
// the instance getting the values with its pulls); once secrets_key_old is gone, every secret
// still opens.
func TestSecretsRotateOnline(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"local", "sync"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			store := ""
			if mode == "sync" {
				store = syncRuntime(testkit.StartSqld(t), "") + "\n\t\t"
			}
			rotateOnline(t, store)
		})
	}
}

// rotateOnline runs TestSecretsRotateOnline with store, the key store's lines of the runtime
// option.
func rotateOnline(t *testing.T, store string) {
	dir := t.TempDir()
	oldKey, newKey := newSecretsKey(t), newSecretsKey(t)
	s := harness.Start(t, harness.Config{Dir: dir, App: store, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_SECRETS_KEY": oldKey}})
	processWorker(t, s, "app", "1.0.0", "")
	const before, after = "sealed-under-the-old-key-4410", "sealed-under-the-new-key-8821"
	setSecret(t, s, rootKey, "app", "BEFORE", before)

	restart := func(why string) echoBody {
		t.Helper()
		if resp := s.Do("POST", s.API+"/workers/_/app/restart", harness.WithKey(rootKey)); resp.Status != 200 {
			t.Fatalf("restart %s = %s", why, resp)
		}
		// A start that failed before waits out its back-off first.
		harness.Eventually(t, "the worker to serve "+why, 10*time.Second, func() bool { return s.Get("/app/").Status == 200 })
		return echoOf(t, s.Get("/app/"))
	}
	reload := func(app string) {
		t.Helper()
		if err := s.Reload(harness.Config{Dir: dir, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}, App: store + app}); err != nil {
			t.Fatal(err)
		}
	}
	// Without the old key, the new one alone opens nothing sealed before.
	reload("secrets_key " + newKey)
	if resp := s.Do("POST", s.API+"/workers/_/app/restart", harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("restart = %s", resp)
	}
	if resp := s.Get("/app/"); resp.Status == 200 || !strings.Contains(string(resp.Body), "sealed under another secrets key") {
		t.Errorf("with the new key alone, /app/ = %s; want the worker not started, saying why", resp)
	}

	reload("secrets_key " + newKey + "\n\t\tsecrets_key_old " + oldKey)
	if got, _ := envOf(restart("with both keys"), "BEFORE"); got != before {
		t.Errorf("with both keys, BEFORE = %q, want the value sealed under the old key", got)
	}
	setSecret(t, s, rootKey, "app", "AFTER", after)
	e := echoOf(t, s.Get("/app/"))
	if got, _ := envOf(e, "AFTER"); got != after {
		t.Errorf("with both keys, AFTER = %q, want the value set then", got)
	}

	out, err := harness.RunCommand(t, dir, map[string]string{"RUNTIME_SECRETS_KEY_OLD": oldKey, "RUNTIME_SECRETS_KEY": newKey},
		"runtime", "secrets", "rotate", "--config", filepath.Join(dir, "Caddyfile"), "--adapter", "caddyfile")
	if err != nil || !strings.Contains(out, "re-sealed 1 secrets under key") {
		t.Fatalf("rotate while the runtime runs: %v\n%s", err, out)
	}
	if resp := s.Get("/app/"); resp.Status != 200 {
		t.Errorf("/app/ after the rotation = %s", resp)
	}

	reload("secrets_key " + newKey)
	e = restart("with the new key alone, after the rotation")
	for name, want := range map[string]string{"BEFORE": before, "AFTER": after} {
		if got, _ := envOf(e, name); got != want {
			t.Errorf("after the rotation, with the new key alone, %s = %q, want %q", name, got, want)
		}
	}
	// secrets_key_old without secrets_key is refused, saying why.
	if err := s.Reload(harness.Config{Dir: dir, App: store + "secrets_key_old " + oldKey}); err == nil || !strings.Contains(err.Error(), "set secrets_key too") {
		t.Errorf("a reload with secrets_key_old alone: %v", err)
	}
}
