package workers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-runtime/runtime/internal/sandbox"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// newSecretPool returns a pool whose workers get secrets from source.
func newSecretPool(t *testing.T, source func(context.Context, string) (map[string]string, error)) (*Pool, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	sb, err := sandbox.New(sandbox.Options{ReadDirs: []string{filepath.Dir(testkit.TestWorker(t))}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPool(PoolOptions{Size: 4, Logger: zap.New(core), Path: os.Getenv("PATH"), Sandbox: sb, ScratchDir: t.TempDir(), Secrets: source})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, logs
}

// TestPoolSecrets: a worker's secrets join its environment; every other variable in it is the
// manifest's or one RuntimeVariable names (so a secret can never be one the runtime sets); and
// its output lines show each secret's value replaced, in the log book and the runtime's log.
func TestPoolSecrets(t *testing.T) {
	const token, short = "tok-0123456789abcdef", "pw"
	p, logs := newSecretPool(t, func(_ context.Context, worker string) (map[string]string, error) {
		if worker != "app" {
			return nil, nil
		}
		return map[string]string{"API_TOKEN": token, "DB_PASSWORD": short, "EMPTY": ""}, nil
	})
	dir := t.TempDir()
	m := manifest(t, map[string]string{"GREETING": "hi"})
	e, err := get(t, p, "app", dir, m, "/")
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string]bool{"GREETING": true, "API_TOKEN": true, "DB_PASSWORD": true, "EMPTY": true}
	got := map[string]string{}
	for _, kv := range e.Env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
		if !mine[k] && !RuntimeVariable(k) {
			t.Errorf("the worker's environment has %s, which RuntimeVariable does not name: a secret of that name would be accepted", k)
		}
	}
	if got["API_TOKEN"] != token || got["DB_PASSWORD"] != short {
		t.Errorf("the worker's secrets: %v", e.Env)
	}
	for _, name := range []string{"PORT", "HOST", "TMPDIR", "PATH", "HOME"} {
		if _, ok := got[name]; !ok || !RuntimeVariable(name) {
			t.Errorf("%s: in the environment %v, RuntimeVariable %v", name, ok, RuntimeVariable(name))
		}
	}

	// The worker prints its secrets, and a line that holds one inside another word.
	for _, path := range []string{"/sayenv?name=API_TOKEN", "/sayenv?name=DB_PASSWORD", "/sayenv?name=GREETING"} {
		if _, err := get(t, p, "app", dir, m, path); err != nil && !strings.Contains(err.Error(), "invalid character") {
			t.Fatal(err)
		}
	}
	var text string
	testkit.Eventually(t, "the worker's three lines in the log book", 10*time.Second, func() bool {
		var book []string
		for _, l := range p.Logs().Lines("app", LogQuery{}) {
			book = append(book, l.Text)
		}
		text = strings.Join(book, "\n")
		return strings.Contains(text, "GREETING is")
	})
	for _, want := range []string{"API_TOKEN is [secret API_TOKEN].", "DB_PASSWORD is [secret DB_PASSWORD].", "GREETING is hi."} {
		if !strings.Contains(text, want) {
			t.Errorf("the log book lacks %q:\n%s", want, text)
		}
	}
	var logged []string
	for _, entry := range logs.All() {
		logged = append(logged, entry.Message)
	}
	for _, where := range []string{text, strings.Join(logged, "\n")} {
		if strings.Contains(where, token) || strings.Contains(where, " is "+short+".") {
			t.Errorf("a secret's value is in the worker's logged output:\n%s", where)
		}
	}
}

// TestPoolSecretsUnreadable: a worker whose secrets cannot be read does not start without
// them, and says why.
func TestPoolSecretsUnreadable(t *testing.T) {
	p, _ := newSecretPool(t, func(context.Context, string) (map[string]string, error) {
		return nil, errors.New("no secrets_key is configured")
	})
	_, err := get(t, p, "app", t.TempDir(), manifest(t, nil), "/")
	var ue *UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "its secrets cannot be read: no secrets_key is configured") {
		t.Fatalf("start = %v, want unavailable saying the secrets cannot be read", err)
	}
}
