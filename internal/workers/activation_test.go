package workers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/sandbox"
	"github.com/caddy-runtime/runtime/internal/testkit"
	"github.com/caddy-runtime/runtime/packages"
)

func TestHealthcheckManifest(t *testing.T) {
	dir := t.TempDir()
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	read := func(manifest string) (Manifest, error) {
		os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte("name: a\n"+manifest), 0o644)
		md, err := packages.ReadMetadata(root, ".")
		if err != nil {
			t.Fatal(err)
		}
		return ReadManifest(md)
	}
	m, err := read("command: [srv]\nhealthcheck: { path: /healthz }\n")
	if err != nil || m.Healthcheck.Path != "/healthz" || m.Healthcheck.Timeout != Duration(DefaultHealthcheckTimeout) {
		t.Fatalf("healthcheck = %+v, %v; want /healthz with the default timeout", m.Healthcheck, err)
	}
	m, err = read("command: [srv]\nhealthcheck:\n  path: /ready?deep=1\n  timeout: 5s\n")
	if err != nil || m.Healthcheck.Path != "/ready?deep=1" || m.Healthcheck.Timeout != Duration(5*time.Second) {
		t.Fatalf("healthcheck = %+v, %v", m.Healthcheck, err)
	}
	for _, tt := range []struct{ manifest, says string }{
		{"command: [srv]\nhealthcheck: /healthz\n", "healthcheck must be a mapping such as { path: /healthz, timeout: 30s }"},
		{"command: [srv]\nhealthcheck: { timeout: 5s }\n", "healthcheck.path is missing"},
		{"command: [srv]\nhealthcheck: { path: healthz }\n", `healthcheck.path "healthz" must be a path on the worker starting with /`},
		{"command: [srv]\nhealthcheck: { path: //evil.example/x }\n", "must be a path on the worker"},
		{"command: [srv]\nhealthcheck: { path: 'http://x/healthz' }\n", "must be a path on the worker"},
		{"command: [srv]\nhealthcheck: { path: '/a b' }\n", "must be a path on the worker"},
		{"command: [srv]\nhealthcheck: { path: /h, timeout: soon }\n", `duration "soon"`},
		{"command: [srv]\nhealthcheck: { path: /h, timeout: 1h }\n", "healthcheck.timeout 1h0m0s is longer than 10m0s"},
		{"entrypoint: index.html\nhealthcheck: { path: /h }\n", "only process workers"},
		{"healthcheck: { path: /h }\n", "only process workers"},
	} {
		if _, err := read(tt.manifest); err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%q: %v; want an error saying %q", tt.manifest, err, tt.says)
		}
	}
}

func TestActiveVersion(t *testing.T) {
	versions := func(enabled ...string) packages.Unit {
		u := packages.Unit{Name: "app"}
		for _, v := range []string{"1.0.0", "1.1.0", "2.0.0", "latest"} {
			on := false
			for _, e := range enabled {
				on = on || e == v
			}
			u.Versions = append(u.Versions, packages.Version{Version: v, Enabled: on})
		}
		return u
	}
	failed := func(vs ...string) []Failure {
		var out []Failure
		for _, v := range vs {
			out = append(out, Failure{Version: v, Reason: "no"})
		}
		return out
	}
	for _, tt := range []struct {
		name string
		u    packages.Unit
		a    Activation
		want string
	}{
		{"nothing known: the newest", versions("1.0.0", "2.0.0"), Activation{}, "2.0.0"},
		{"latest counts as the newest", versions("1.0.0", "latest"), Activation{}, "latest"},
		{"the active version, older than the newest", versions("1.0.0", "2.0.0"), Activation{Active: "1.0.0"}, "1.0.0"},
		{"the newest is being checked", versions("1.0.0", "2.0.0"), Activation{Checking: []string{"2.0.0"}}, "1.0.0"},
		{"the newest failed", versions("1.0.0", "1.1.0", "2.0.0"), Activation{Failed: failed("2.0.0")}, "1.1.0"},
		{"the active version disabled: the newest healthy", versions("1.0.0", "1.1.0"), Activation{Active: "2.0.0", Failed: failed("1.1.0")}, "1.0.0"},
		{"every version held: the newest", versions("1.0.0", "2.0.0"), Activation{Failed: failed("1.0.0"), Checking: []string{"2.0.0"}}, "2.0.0"},
		{"none enabled", versions(), Activation{Active: "1.0.0"}, ""},
	} {
		v, ok := ActiveVersion(tt.u, tt.a)
		if ok != (tt.want != "") || v.Version != tt.want {
			t.Errorf("%s: ActiveVersion = %q, %v; want %q", tt.name, v.Version, ok, tt.want)
		}
	}
}

// TestActivationsSurviveRestart: the active and failed versions are read again from the file;
// a check the runtime did not see to its end is a failure.
func TestActivationsSurviveRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), ActivationsFile)
	a := NewActivations(path, nil)
	if err := a.Load(); err != nil {
		t.Fatal(err)
	}
	gen := a.Gen()
	a.Expect("app", "1.0.0")
	a.Settle("app", "1.0.0", "")
	a.Expect("app", "2.0.0")
	a.Settle("app", "2.0.0", "GET /healthz answered 503")
	a.Expect("app", "3.0.0")
	a.Expect("@t/tool", "1.0.0")
	a.Unexpect("@t/tool", "1.0.0")
	if a.Gen() == gen {
		t.Error("the generation did not change")
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("activations file: %v, %v; want mode 0600", info, err)
	}

	b := NewActivations(path, nil)
	if err := b.Load(); err != nil {
		t.Fatal(err)
	}
	got := b.Get("app")
	if got.Active != "1.0.0" || len(got.Checking) != 0 || len(got.Failed) != 2 ||
		got.Failed[0].Version != "2.0.0" || got.Failed[0].Reason != "GET /healthz answered 503" ||
		got.Failed[1].Version != "3.0.0" || got.Failed[1].Reason != interruptedReason {
		t.Errorf("after a restart app = %+v", got)
	}
	if tool := b.Get("@t/tool"); tool.Active != "" || len(tool.Failed)+len(tool.Checking) != 0 {
		t.Errorf("after a restart @t/tool = %+v, want nothing", tool)
	}
	b.Settle("app", "2.0.0", "")
	b.Drop("app", "1.0.0")
	if got := b.Get("app"); got.Active != "2.0.0" || len(got.Failed) != 1 || got.Failed[0].Version != "3.0.0" {
		t.Errorf("after 2.0.0 passed and 1.0.0 was removed, app = %+v", got)
	}
	b.Settle("app", "2.0.0", "replaced in place by one that fails")
	if got := b.Get("app"); got.Active != "" || len(got.Failed) != 2 {
		t.Errorf("after the active version failed: %+v", got)
	}
	b.Drop("app", "")
	if got := b.Get("app"); got.Active != "" || got.Failed != nil {
		t.Errorf("after app was removed: %+v", got)
	}

	os.WriteFile(path, []byte("{not json"), 0o600)
	if err := NewActivations(path, nil).Load(); err == nil || !strings.Contains(err.Error(), "remove the file to start afresh") {
		t.Errorf("a damaged file: %v", err)
	}
}

// TestActivator: a process worker's version is activated once its health check answers 2xx,
// is held back and reported with its output when it never does or does not start, and a
// static version is served at once, as the newest enabled one.
func TestActivator(t *testing.T) {
	pool, _ := newPool(t, 8)
	dir := t.TempDir()
	worker := testkit.TestWorker(t)
	write := func(name, version, manifest string) {
		p := filepath.Join(dir, name, version)
		os.MkdirAll(p, 0o755)
		os.WriteFile(filepath.Join(p, "manifest.yaml"), []byte("name: "+name+"\nversion: "+version+"\n"+manifest), 0o644)
	}
	cmd := "command: [" + worker + "]\n"
	write("ok", "1.0.0", cmd+"healthcheck: { path: /healthz, timeout: 5s }\n")
	write("sick", "1.0.0", cmd+"healthcheck: { path: '/read?path=/no/such/file', timeout: 1s }\n")
	write("dead", "1.0.0", cmd+"env: { EXIT_AT_START: '1' }\n")
	write("plain", "1.0.0", cmd)
	write("site", "1.0.0", "entrypoint: index.html\n")
	write("off", "1.0.0", cmd+"enabled: false\n")
	c := packages.NewCatalog(packages.WorkerLayout, []string{dir}, packages.DefaultLimits)
	acts := NewActivations("", nil)
	act := NewActivator(ActivatorOptions{Workers: c, Pool: func() *Pool { return pool }, Activations: acts})
	t.Cleanup(act.Close)

	for _, tt := range []struct {
		name          string
		active        string
		reason, lines string
	}{
		{"ok", "1.0.0", "", ""},
		{"plain", "1.0.0", "", ""},
		{"site", "", "", ""},
		{"off", "", "", ""},
		{"sick", "", "its health check GET /read?path=/no/such/file did not answer 2xx within 1s; the last attempt: GET /read?path=/no/such/file answered 403 Forbidden", "testworker listening on"},
		{"dead", "", "did not start", "exiting at start as asked"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			md := mustVersion(t, c, tt.name).Metadata
			act.Expect(md)
			if held := acts.Get(tt.name).Held("1.0.0"); held != (tt.name != "site" && tt.name != "off") {
				t.Errorf("held before the install: %v", held)
			}
			act.Changed(packages.Change{Op: packages.OpInstalled, Name: tt.name, Version: "1.0.0"})
			err := act.Wait(context.Background(), tt.name, "1.0.0")
			got := acts.Get(tt.name)
			if tt.reason == "" {
				if err != nil || got.Active != tt.active || got.Held("1.0.0") {
					t.Errorf("Wait = %v, activation %+v; want %q active", err, got, tt.active)
				}
				return
			}
			var ce *CheckError
			if !errors.As(err, &ce) || !strings.Contains(ce.Reason, tt.reason) {
				t.Fatalf("Wait = %v; want a CheckError saying %q", err, tt.reason)
			}
			var out []string
			for _, l := range ce.Output {
				out = append(out, l.Stream+": "+l.Text)
			}
			if !strings.Contains(strings.Join(out, "\n"), tt.lines) {
				t.Errorf("output %q; want %q", out, tt.lines)
			}
			if got.Active != "" || len(got.Failed) != 1 || got.Failed[0].Reason != ce.Reason || len(got.Checking) != 0 {
				t.Errorf("activation %+v; want 1.0.0 failed", got)
			}
		})
	}
	if n := pool.Running(); n != 2 {
		t.Errorf("%d processes run; want those of ok and plain (the failed ones stopped)", n)
	}

	// A change that left the files as they were is checked all the same, once.
	n := act.Started()
	act.CheckSince("ok", "1.0.0", n)
	if err := act.Wait(context.Background(), "ok", "1.0.0"); err != nil || act.Started() != n+1 {
		t.Errorf("CheckSince with none since: %d checks, %v", act.Started()-n, err)
	}
	act.CheckSince("ok", "1.0.0", n)
	if act.Started() != n+1 {
		t.Errorf("CheckSince started a check though one started since")
	}

	// Disabling a version ends its check, and removing it forgets it.
	act.Changed(packages.Change{Op: packages.OpRemoved, Name: "sick"})
	if got := acts.Get("sick"); got.Active != "" || len(got.Failed) != 0 {
		t.Errorf("after removal: %+v", got)
	}
}

func mustVersion(t *testing.T, c *packages.Catalog, name string) packages.Version {
	t.Helper()
	u, err := c.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return u.Versions[0]
}

// TestActivatorIsolatedNetwork: in a network of its own a worker's health check is asked on
// the listener it was handed.
func TestActivatorIsolatedNetwork(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a network namespace per worker needs root")
	}
	pool, _ := newPoolWith(t, 4, sandbox.Options{IsolateNetwork: true})
	dir := t.TempDir()
	p := filepath.Join(dir, "app", "1.0.0")
	os.MkdirAll(p, 0o755)
	os.WriteFile(filepath.Join(p, "manifest.yaml"), []byte("name: app\nversion: 1.0.0\ncommand: ["+testkit.TestWorker(t)+"]\n"+
		"healthcheck: { path: /healthz, timeout: 10s }\n"), 0o644)
	acts := NewActivations("", nil)
	act := NewActivator(ActivatorOptions{Workers: packages.NewCatalog(packages.WorkerLayout, []string{dir}, packages.DefaultLimits),
		Pool: func() *Pool { return pool }, Activations: acts})
	t.Cleanup(act.Close)
	act.Changed(packages.Change{Op: packages.OpInstalled, Name: "app", Version: "1.0.0"})
	if err := act.Wait(context.Background(), "app", "1.0.0"); err != nil || acts.Get("app").Active != "1.0.0" {
		t.Errorf("Wait = %v, activation %+v; want 1.0.0 active", err, acts.Get("app"))
	}
}
