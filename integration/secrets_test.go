package integration

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// newSecretsKey returns a secrets key as openssl rand -base64 32 prints one.
func newSecretsKey(t *testing.T) string {
	t.Helper()
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// secretsPath is the API path of a worker's secrets, or of one of them.
func secretsPath(s *harness.Server, worker string, name ...string) string {
	scope := "_/" + worker
	if strings.HasPrefix(worker, "@") {
		scope = worker
	}
	return s.API + "/workers/" + scope + "/secrets" + strings.Join(append([]string{""}, name...), "/")
}

// setSecret sets worker's secret name through the API and returns the answer's body.
func setSecret(t *testing.T, s *harness.Server, key, worker, name, value string) api.SecretsChanged {
	t.Helper()
	resp := s.Do("PUT", secretsPath(s, worker, name), harness.WithKey(key), harness.WithOrigin(""), harness.WithJSON(api.SecretValue{Value: value}))
	var body api.SecretsChanged
	if resp.Status != 200 || resp.JSON(&body) != nil || !body.Success {
		t.Fatalf("PUT secret %s of %s = %s", name, worker, resp)
	}
	return body
}

// envOf returns the value of the variable name in a worker's echoed environment, and whether
// it is there.
func envOf(e echoBody, name string) (string, bool) {
	for _, kv := range e.Env {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v, true
		}
	}
	return "", false
}

// TestSecretsReachTheWorkerAndNothingElse: a secret set through the API reaches the process
// worker's environment, and nothing else: no log line of the runtime, no audit entry (which
// records the name and who set it), no metric, no listing or answer of the API, no file of the
// key store, and in the worker's own logged output it shows replaced. Setting and removing
// one restarts the worker's processes, with no failed request under a load loop.
func TestSecretsReachTheWorkerAndNothingElse(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_SECRETS_KEY": newSecretsKey(t)}})
	processWorker(t, s, "app", "1.0.0", "env:\n  MODE: test\n")
	processWorker(t, s, "@team/api", "1.0.0", "")
	editor := s.CreateKey(rootKey, map[string]any{"name": "deployer", "role": "editor"})
	before := echoOf(t, s.Get("/app/"))

	// Requests run throughout; none may fail while the secrets change.
	load := harness.Hammer(t, 4, func(int, int) error {
		resp, err := s.Send("GET", "/app/")
		if err == nil && resp.Status != 200 {
			err = fmt.Errorf("GET /app/ = %s", resp)
		}
		return err
	})

	const value = "sk_live_Zq8r4XbT1mW9vK2pL7nY"
	body := setSecret(t, s, editor.Secret, "app", "API_TOKEN", value)
	if !slices.Equal(body.Data.Set, []string{"API_TOKEN"}) || !slices.Equal(body.Data.Restarted, []string{"1.0.0"}) {
		t.Errorf("PUT answer data = %+v, want API_TOKEN set and 1.0.0 restarted", body.Data)
	}
	setSecret(t, s, rootKey, "app", "OTHER", "to-be-removed-4471")
	e := echoOf(t, s.Get("/app/"))
	if got, _ := envOf(e, "API_TOKEN"); got != value || e.PID == before.PID {
		t.Fatalf("after the PUT the worker (pid %d, was %d) has API_TOKEN %q, want %q in a new process", e.PID, before.PID, got, value)
	}
	if got, _ := envOf(e, "MODE"); got != "test" {
		t.Errorf("the manifest's env is lost: MODE=%q", got)
	}
	if resp := s.Do("DELETE", secretsPath(s, "app", "OTHER"), harness.WithKey(editor.Secret), harness.WithOrigin("")); resp.Status != 200 {
		t.Fatalf("DELETE secret = %s", resp)
	}
	if _, ok := envOf(echoOf(t, s.Get("/app/")), "OTHER"); ok {
		t.Error("a removed secret is still in the worker's environment")
	}
	if _, ok := envOf(echoOf(t, s.Get("/@team/api/")), "API_TOKEN"); ok {
		t.Error("another worker got app's secret")
	}
	// Several at once: one change, one restart.
	resp := s.Do("PATCH", secretsPath(s, "app"), harness.WithKey(editor.Secret), harness.WithOrigin(""),
		harness.WithJSON(api.SecretsChange{Set: map[string]string{"DB_URL": "postgres://u:pw-88213@db/x", "FLAG": "on"}}))
	if resp.Status != 200 {
		t.Fatalf("PATCH secrets = %s", resp)
	}
	if err := load.Stop(20); err != nil {
		t.Errorf("while the secrets changed: %v", err)
	}

	// The listing: names, when and who; never a value.
	resp = s.Get(secretsPath(s, "app"), harness.WithKey(editor.Secret))
	var list api.WorkerSecrets
	if resp.Status != 200 || resp.JSON(&list) != nil {
		t.Fatalf("GET secrets = %s", resp)
	}
	var names []string
	for _, sec := range list.Secrets {
		names = append(names, sec.Name)
		if sec.UpdatedAt == "" {
			t.Errorf("secret %s has no updatedAt", sec.Name)
		}
	}
	if !slices.Equal(names, []string{"API_TOKEN", "DB_URL", "FLAG"}) || list.Secrets[0].UpdatedBy.Name != "deployer" ||
		list.Secrets[0].UpdatedBy.KeyPrefix != editor.KeyPrefix {
		t.Errorf("GET secrets = %s", resp)
	}

	// The worker prints its secret: its logged output shows it replaced.
	if resp := s.Get("/app/sayenv?name=API_TOKEN"); resp.Status != 200 {
		t.Fatalf("GET /app/sayenv = %s", resp)
	}
	var logs api.WorkerLogs
	harness.Eventually(t, "the worker's line in its logs", 10*time.Second, func() bool {
		resp := s.Get(s.API+"/workers/_/app/logs", harness.WithKey(rootKey))
		return resp.Status == 200 && resp.JSON(&logs) == nil && slices.ContainsFunc(logs.Lines, func(l api.WorkerLogLine) bool {
			return strings.HasPrefix(l.Text, "API_TOKEN is ")
		})
	})
	if !slices.ContainsFunc(logs.Lines, func(l api.WorkerLogLine) bool { return l.Text == "API_TOKEN is [secret API_TOKEN]." }) {
		t.Errorf("the worker's logged line is not redacted: %+v", logs.Lines)
	}

	// The audit trail names the secrets and who changed them.
	resp = s.Get(s.API+"/audit?action=worker.secrets", harness.WithKey(rootKey))
	if resp.Status != 200 || !strings.Contains(string(resp.Body), `"API_TOKEN"`) || !strings.Contains(string(resp.Body), "deployer") {
		t.Errorf("GET audit = %s, want the secrets' names and who set them", resp)
	}

	// Every place a value could leak to.
	values := []string{value, "to-be-removed-4471", "pw-88213"}
	places := map[string]string{"the runtime's log": s.Logs()}
	for _, path := range []string{
		secretsPath(s, "app"), s.API + "/workers", s.API + "/workers/pool", s.API + "/audit", s.API + "/keys", s.API + "/stats",
		s.API + "/workers/_/app/stats", s.API + "/workers/_/app/logs", s.API + "/workers/files/list?path=apps/app/1.0.0",
		s.API + "/openapi.json",
	} {
		resp := s.Get(path, harness.WithKey(rootKey))
		if resp.Status != 200 {
			t.Errorf("GET %s = %s", path, resp)
		}
		places["GET "+path] = string(resp.Body)
	}
	metrics, err := http.Get(s.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	places["/metrics"] = string(text)
	state := filepath.Join(s.DataDir, "state")
	files, _ := os.ReadDir(state)
	for _, f := range files {
		b, _ := os.ReadFile(filepath.Join(state, f.Name()))
		places["state file "+f.Name()] = string(b)
	}
	if len(files) == 0 {
		t.Fatal("no files in the state folder")
	}
	for where, text := range places {
		for _, v := range values {
			if strings.Contains(text, v) {
				t.Errorf("a secret's value is in %s", where)
			}
		}
	}
}

// TestSecretsRefusals: a key of another namespace can neither list nor set a worker's
// secrets; a key without workers:secrets neither; names the runtime sets are refused; a
// runtime without secrets_key answers with the code that says how to configure one.
func TestSecretsRefusals(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_SECRETS_KEY": newSecretsKey(t)}})
	setSecret(t, s, rootKey, "@team/app", "TOKEN", "team-secret-value-1")
	other := s.CreateKey(rootKey, map[string]any{"name": "other", "role": "editor", "namespaces": []string{"@other"}})
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "custom", "permissions": []string{"workers:secrets"}, "namespaces": []string{"@team"}})
	viewer := s.CreateKey(rootKey, map[string]any{"name": "viewer", "role": "viewer"})
	for _, tt := range []struct {
		name, method, path, key, code string
		status                        int
	}{
		{"other namespace lists", "GET", secretsPath(s, "@team/app"), other.Secret, "NAMESPACE_DENIED", 403},
		{"other namespace sets", "PUT", secretsPath(s, "@team/app", "TOKEN"), other.Secret, "NAMESPACE_DENIED", 403},
		{"other namespace removes", "DELETE", secretsPath(s, "@team/app", "TOKEN"), other.Secret, "NAMESPACE_DENIED", 403},
		{"namespaced key, unscoped worker", "PUT", secretsPath(s, "app", "TOKEN"), team.Secret, "NAMESPACE_DENIED", 403},
		{"viewer lists", "GET", secretsPath(s, "@team/app"), viewer.Secret, "PERMISSION_DENIED", 403},
		{"viewer sets", "PUT", secretsPath(s, "@team/app", "TOKEN"), viewer.Secret, "PERMISSION_DENIED", 403},
		{"PORT", "PUT", secretsPath(s, "@team/app", "PORT"), team.Secret, "INVALID_SECRET_NAME", 400},
		{"TMPDIR", "PUT", secretsPath(s, "@team/app", "TMPDIR"), team.Secret, "INVALID_SECRET_NAME", 400},
		{"LISTEN_FDS", "PUT", secretsPath(s, "@team/app", "LISTEN_FDS"), team.Secret, "INVALID_SECRET_NAME", 400},
		{"not a variable name", "PUT", secretsPath(s, "@team/app", "A-B"), team.Secret, "INVALID_SECRET_NAME", 400},
		{"unknown secret", "DELETE", secretsPath(s, "@team/app", "NOPE"), team.Secret, "SECRET_NOT_FOUND", 404},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := s.Do(tt.method, tt.path, harness.WithKey(tt.key), harness.WithOrigin(""), harness.WithJSON(api.SecretValue{Value: "x-refused-value"}))
			if resp.Status != tt.status || resp.ErrorCode() != tt.code {
				t.Errorf("%s %s = %s, want %d %s", tt.method, tt.path, resp, tt.status, tt.code)
			}
		})
	}
	// The namespace's own key lists it; the other's listing of its own worker shows nothing.
	resp := s.Get(secretsPath(s, "@team/app"), harness.WithKey(team.Secret))
	if resp.Status != 200 || !strings.Contains(string(resp.Body), `"TOKEN"`) || strings.Contains(string(resp.Body), "team-secret-value-1") {
		t.Errorf("GET as the team = %s", resp)
	}
	resp = s.Get(secretsPath(s, "@other/app"), harness.WithKey(other.Secret))
	if resp.Status != 200 || strings.Contains(string(resp.Body), "TOKEN") {
		t.Errorf("GET of another worker = %s", resp)
	}
	// Values of secrets never reach an error either.
	resp = s.Do("PUT", secretsPath(s, "@team/app", "BIG"), harness.WithKey(rootKey), harness.WithOrigin(""), harness.WithJSON(api.SecretValue{Value: strings.Repeat("v", 33<<10)}))
	if resp.Status != 400 || resp.ErrorCode() != "INVALID_SECRET_VALUE" || strings.Contains(string(resp.Body), "vvvv") {
		t.Errorf("a value over the limit = %s", resp)
	}

	bare := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	for _, method := range []string{"GET", "PUT", "DELETE"} {
		path := secretsPath(bare, "app")
		if method != "GET" {
			path = secretsPath(bare, "app", "TOKEN")
		}
		resp := bare.Do(method, path, harness.WithKey(rootKey), harness.WithOrigin(""), harness.WithJSON(api.SecretValue{Value: "v"}))
		if resp.Status != 503 || resp.ErrorCode() != "SECRETS_NOT_CONFIGURED" ||
			!strings.Contains(string(resp.Body), "RUNTIME_SECRETS_KEY") || !strings.Contains(string(resp.Body), "openssl rand -base64 32") {
			t.Errorf("%s without secrets_key = %s", method, resp)
		}
	}
}

// TestSecretsGoWithTheWorker: removing a worker whole removes its secrets (audited), so a
// worker uploaded later under its name starts without them; removing one version keeps them.
func TestSecretsGoWithTheWorker(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_SECRETS_KEY": newSecretsKey(t)}})
	root := harness.WithKey(rootKey)
	for _, v := range []string{"1.0.0", "2.0.0"} {
		if resp := s.Upload(s.API+"/workers/upload", "app.tgz", siteArchive(t, "@team/app", v, "the app"), root); resp.Status != 200 {
			t.Fatalf("upload %s = %s", v, resp)
		}
	}
	setSecret(t, s, rootKey, "@team/app", "TOKEN", "gone-with-the-worker-1")
	setSecret(t, s, rootKey, "@team/app", "OTHER", "gone-with-the-worker-2")
	names := func() []string {
		t.Helper()
		var list api.WorkerSecrets
		if resp := s.Get(secretsPath(s, "@team/app"), root); resp.Status != 200 || resp.JSON(&list) != nil {
			t.Fatalf("GET secrets = %s", resp)
		}
		var out []string
		for _, sec := range list.Secrets {
			out = append(out, sec.Name)
		}
		slices.Sort(out)
		return out
	}
	if resp := s.Do("DELETE", s.API+"/workers/@team/app/1.0.0", root); resp.Status != 200 {
		t.Fatalf("DELETE a version = %s", resp)
	}
	if got := names(); !slices.Equal(got, []string{"OTHER", "TOKEN"}) {
		t.Errorf("secrets after removing one version = %v, want both kept", got)
	}
	if resp := s.Do("DELETE", s.API+"/workers/@team/app", root); resp.Status != 200 {
		t.Fatalf("DELETE the worker = %s", resp)
	}
	if got := names(); len(got) != 0 {
		t.Errorf("secrets after removing the worker = %v, want none", got)
	}
	var trail struct {
		Entries []struct {
			Action, Target, Outcome string
			Details                 map[string]any
		}
	}
	if resp := s.Get(s.API+"/audit?action=worker.secrets", root); resp.Status != 200 || resp.JSON(&trail) != nil {
		t.Fatalf("GET audit = %s", resp)
	}
	if len(trail.Entries) == 0 || trail.Entries[0].Outcome != "success" || !strings.Contains(fmt.Sprint(trail.Entries[0].Details), "OTHER TOKEN") {
		t.Errorf("the audit trail's latest worker.secrets entry = %+v, want the removal of OTHER and TOKEN", trail.Entries)
	}
	if strings.Contains(s.Logs(), "gone-with-the-worker") {
		t.Error("a secret's value reached the log")
	}
}

// TestSecretsKeySetting: a secrets key that is not 32 bytes of base64 stops start-up with the
// way to make one, never showing it; one written literally in the Caddyfile is warned about.
func TestSecretsKeySetting(t *testing.T) {
	t.Parallel()
	const bad = "my-passphrase-is-not-a-key"
	s, err := harness.Launch(t, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_SECRETS_KEY": bad}})
	if err != nil {
		t.Fatal(err)
	}
	if !s.WaitExit(30 * time.Second) {
		t.Fatal("the runtime started with a bad secrets key")
	}
	for _, want := range []string{"invalid secrets_key", "RUNTIME_SECRETS_KEY", "openssl rand -base64 32"} {
		if !strings.Contains(s.Logs(), want) {
			t.Errorf("the start-up output lacks %q:\n%s", want, s.Logs())
		}
	}
	if strings.Contains(s.Logs(), bad) {
		t.Error("the start-up output shows the bad key")
	}

	literal := newSecretsKey(t)
	s = harness.Start(t, harness.Config{App: "secrets_key " + literal, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	if _, err := s.WaitLog("secrets_key is written literally in the config, where the admin API and adapted JSON show it; use {env.RUNTIME_SECRETS_KEY} instead", 10*time.Second); err != nil {
		t.Error(err)
	}
	setSecret(t, s, rootKey, "app", "TOKEN", "v") // the literal key works
}

// TestSecretsAcrossInstances: in sync mode a secret set on one instance reaches a worker on
// another by the key store's replica: the other instance restarts its running process with
// it, and with its removal, with no failed request there.
func TestSecretsAcrossInstances(t *testing.T) {
	t.Parallel()
	primary := testkit.StartSqld(t)
	key := newSecretsKey(t)
	start := func() *harness.Server {
		return harness.Start(t, harness.Config{App: syncRuntime(primary, ""),
			Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_SECRETS_KEY": key}})
	}
	a, b := start(), start()
	processWorker(t, a, "app", "1.0.0", "")
	processWorker(t, b, "app", "1.0.0", "")
	// A worker with ttl: 0 starts a process for each request, with its secrets as each
	// instance keeps them opened between starts: a change, made here or pulled, drops them.
	for _, s := range []*harness.Server{a, b} {
		processWorker(t, s, "fresh", "1.0.0", "ttl: 0\n")
		if _, ok := envOf(echoOf(t, s.Get("/fresh/")), "TOKEN"); ok {
			t.Fatal("the ttl: 0 worker has TOKEN before it was set")
		}
	}
	if _, ok := envOf(echoOf(t, b.Get("/app/")), "TOKEN"); ok {
		t.Fatal("the worker has TOKEN before it was set")
	}
	load := harness.Hammer(t, 2, func(int, int) error {
		resp, err := b.Send("GET", "/app/")
		if err == nil && resp.Status != 200 {
			err = fmt.Errorf("GET /app/ on B = %s", resp)
		}
		return err
	})
	const value = "shared-across-instances-6620"
	setSecret(t, a, rootKey, "app", "TOKEN", value)
	harness.Eventually(t, "B's worker to have TOKEN", 20*time.Second, func() bool {
		got, _ := envOf(echoOf(t, b.Get("/app/")), "TOKEN")
		return got == value
	})
	setSecret(t, a, rootKey, "fresh", "TOKEN", value)
	if got, _ := envOf(echoOf(t, a.Get("/fresh/")), "TOKEN"); got != value {
		t.Errorf("A's ttl: 0 worker, right after the secret was set, has TOKEN %q", got)
	}
	harness.Eventually(t, "B's ttl: 0 worker to have TOKEN", 20*time.Second, func() bool {
		got, _ := envOf(echoOf(t, b.Get("/fresh/")), "TOKEN")
		return got == value
	})
	if resp := a.Do("DELETE", secretsPath(a, "fresh", "TOKEN"), harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("DELETE on A = %s", resp)
	}
	if _, ok := envOf(echoOf(t, a.Get("/fresh/")), "TOKEN"); ok {
		t.Error("A's ttl: 0 worker still has TOKEN right after it was removed")
	}
	harness.Eventually(t, "B's ttl: 0 worker to lose TOKEN", 20*time.Second, func() bool {
		_, ok := envOf(echoOf(t, b.Get("/fresh/")), "TOKEN")
		return !ok
	})
	if resp := a.Do("DELETE", secretsPath(a, "app", "TOKEN"), harness.WithKey(rootKey)); resp.Status != 200 {
		t.Fatalf("DELETE on A = %s", resp)
	}
	harness.Eventually(t, "B's worker to lose TOKEN", 20*time.Second, func() bool {
		_, ok := envOf(echoOf(t, b.Get("/app/")), "TOKEN")
		return !ok
	})
	if err := load.Stop(10); err != nil {
		t.Errorf("on B while the secret changed on A: %v", err)
	}
	if strings.Contains(b.Logs(), value) || strings.Contains(a.Logs(), value) {
		t.Error("a secret's value is in an instance's log")
	}
}
