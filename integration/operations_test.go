package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestBackupRestore backs the key store up while the runtime runs and writes, then restores
// it as the README says: stop, put the backup in place of api-keys.db, start. The keys made
// before the backup work again; one made after it is gone, so the store is the backup's.
func TestBackupRestore(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Config{})
	admin := s.BootstrapKey()
	before := []harness.Key{
		s.CreateKey(admin, map[string]any{"name": "deploy", "role": "editor"}),
		s.CreateKey(admin, map[string]any{"name": "viewer", "role": "viewer"}),
	}
	out, err := harness.RunCommand(t, s.Dir, nil, "backup", "keys-backup.db")
	if err != nil {
		t.Fatalf("runtime backup: %v\n%s", err, out)
	}
	if !strings.Contains(out, "to keys-backup.db: 3 keys") {
		t.Errorf("runtime backup printed %q, want the file and its 3 keys", out)
	}
	backup, err := os.ReadFile(filepath.Join(s.Dir, "keys-backup.db"))
	if err != nil {
		t.Fatal(err)
	}
	out, err = harness.RunCommand(t, s.Dir, nil, "runtime", "backup", "--config", "Caddyfile", "--adapter", "caddyfile", "keys-backup.db")
	if err == nil || !strings.Contains(out, "exists") {
		t.Errorf("a backup over an existing file: %v, %q; want a refusal", err, out)
	}
	if again, _ := os.ReadFile(filepath.Join(s.Dir, "keys-backup.db")); string(again) != string(backup) {
		t.Error("the refused backup changed the existing file")
	}
	out, err = harness.RunCommand(t, s.Dir, nil, "backup", "--json", "second.db")
	var got map[string]any
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || got["to"] != "second.db" || got["keys"] != 3.0 ||
		got["from"] != filepath.Join("data", "state", "api-keys.db") || got["replica"] != false {
		t.Errorf("runtime backup --json: %v, %s", err, out)
	}
	after := s.CreateKey(admin, map[string]any{"name": "after the backup", "role": "viewer"})
	s.Stop()

	state := filepath.Join(s.DataDir, "state")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(filepath.Join(state, "api-keys.db"+suffix)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(state, "api-keys.db"), backup, 0o600); err != nil {
		t.Fatal(err)
	}
	restored := harness.Start(t, harness.Config{Dir: s.Dir})
	for _, k := range append(before, harness.Key{Name: "bootstrap", Secret: admin}) {
		if resp := restored.Get(restored.API+"/admin/session", harness.WithKey(k.Secret)); resp.Status != 200 {
			t.Errorf("key %s after the restore = %s", k.Name, resp)
		}
	}
	if resp := restored.Get(restored.API+"/admin/session", harness.WithKey(after.Secret)); resp.Status != 401 {
		t.Errorf("the key made after the backup, after the restore = %s; want 401", resp)
	}
}

// TestBackupSyncMode backs up a sync-mode instance's replica while it runs: the copy holds the
// primary's keys, and the command says the primary is the source of truth.
func TestBackupSyncMode(t *testing.T) {
	t.Parallel()
	primary := testkit.StartSqld(t)
	s := startSync(t, primary, "")
	s.CreateKey(rootKey, map[string]any{"name": "shared", "role": "viewer"})
	out, err := harness.RunCommand(t, s.Dir, nil, "backup", "--from", filepath.Join("data", "state", "api-keys.db"), "replica.db")
	if err != nil {
		t.Fatalf("runtime backup: %v\n%s", err, out)
	}
	if !strings.Contains(out, "1 keys") || !strings.Contains(out, "source of truth") {
		t.Errorf("runtime backup in sync mode printed %q, want the key and that the primary is the source of truth", out)
	}
}

// TestSystemdUnit checks examples/systemd: systemd-analyze verify finds nothing to say about
// the unit (its ExecStart pointed at this checkout's binary, as verify requires the program to
// exist), the unit delegates cgroups, keeps the umask that lets the workers' account read the
// unpacked folders, and its Caddyfile adapts with worker_user and the admin
// socket that ExecReload names. Where systemd-analyze is missing (not a systemd system) the
// verification is skipped, in CI too: the rest still runs.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	unit, err := os.ReadFile("../examples/systemd/runtime.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nDelegate=yes\n", "\nExecStart=/usr/local/bin/runtime run ", "--config /etc/runtime/Caddyfile",
		"--address unix//run/runtime/admin.sock", "\nRuntimeDirectory=runtime\n", "\nRuntimeDirectoryMode=0700\n",
		"\nUMask=0022\n"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("runtime.service has no %q", want)
		}
	}
	for _, breaks := range []string{"ProtectControlGroups=yes", "RestrictNamespaces=", "SystemCallFilter=", "CapabilityBoundingSet=", "\nUser="} {
		if strings.Contains(string(unit), breaks) {
			t.Errorf("runtime.service sets %s, which takes from the sandbox what it needs", strings.TrimSpace(breaks))
		}
	}
	for _, line := range strings.Split(string(unit), "\n") {
		if strings.HasPrefix(line, "ExecStart=") && strings.Contains(line, "--environ") {
			t.Error("runtime.service runs with --environ, which logs RUNTIME_ROOT_KEY")
		}
	}

	dir := t.TempDir()
	caddyfile, err := filepath.Abs("../examples/systemd/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	out, err := harness.RunCommand(t, dir, nil, "adapt", "--config", caddyfile, "--adapter", "caddyfile")
	if err != nil {
		t.Fatalf("adapting examples/systemd/Caddyfile: %v\n%s", err, out)
	}
	var cfg struct {
		Admin struct {
			Listen string `json:"listen"`
		} `json:"admin"`
		Apps struct {
			Runtime struct {
				WorkerUser string `json:"worker_user"`
			} `json:"runtime"`
		} `json:"apps"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &cfg); err != nil {
		t.Fatalf("reading the adapted config: %v\n%s", err, out)
	}
	if cfg.Admin.Listen != "unix//run/runtime/admin.sock" || cfg.Apps.Runtime.WorkerUser != "runtime-worker" {
		t.Errorf("examples/systemd/Caddyfile: admin %q, worker_user %q; want the unit's socket and runtime-worker", cfg.Admin.Listen, cfg.Apps.Runtime.WorkerUser)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skipf("no systemd-analyze here (%v): the unit is not verified; it is on systemd systems (apt-get install systemd)", err)
	}
	verified := filepath.Join(dir, "runtime.service")
	must(t, os.WriteFile(verified, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/runtime", harness.Binary(t))), 0o644))
	got, err := exec.Command(analyze, "verify", "--man=no", verified).CombinedOutput()
	if err != nil || len(got) > 0 {
		t.Errorf("systemd-analyze verify runtime.service: %v\n%s", err, got)
	}
}
