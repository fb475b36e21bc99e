package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/caddy-runtime/runtime/internal/testkit"
	"github.com/caddy-runtime/runtime/internal/version"
)

// This test binary is what an xcaddy build takes from the module (this package and what it
// imports, not cmd/runtime) plus another module that registers a top-level deploy command, as
// a module does, in its init. Caddy panics on a command name registered twice, so the binary
// starts only when the module's commands are not top-level.
func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "deploy",
		Short: "Another module's deploy",
		Func: func(caddycmd.Flags) (int, error) {
			fmt.Println("another module's deploy ran")
			return caddy.ExitCodeSuccess, nil
		},
	})
}

func TestMain(m *testing.M) {
	if testkit.Reexeced() {
		caddycmd.Main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// caddyMain runs this test binary as Caddy's command line with args.
func caddyMain(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return testkit.Reexec(t, []string{"HOME=" + t.TempDir()}, args...)
}

// TestCommandsBesideAnotherModules checks that the module's commands live under one runtime
// command, beside another module's top-level deploy, and that the module leaves the host's
// version alone while runtime version reports the module's.
func TestCommandsBesideAnotherModules(t *testing.T) {
	t.Parallel()
	if out, errOut, code := caddyMain(t, "deploy"); code != 0 || out != "another module's deploy ran\n" {
		t.Errorf("caddy deploy: exit %d, %q %q; want the other module's command", code, out, errOut)
	}
	out, errOut, code := caddyMain(t, "runtime", "--help")
	if code != 0 {
		t.Fatalf("caddy runtime --help: exit %d, %s", code, errOut)
	}
	for _, sub := range []string{"login", "logout", "deploy", "rollback", "workers", "plugins", "keys", "health", "cluster", "audit",
		"version", "build-info", "keystore-migrate", "backup", "secrets"} {
		if !strings.Contains(out, "\n  "+sub+" ") {
			t.Errorf("caddy runtime --help lists no %s:\n%s", sub, out)
		}
	}
	if out, _, code := caddyMain(t, "runtime", "deploy", "--help"); code != 0 || !strings.Contains(out, "caddy runtime deploy ./site") {
		t.Errorf("caddy runtime deploy --help: exit %d, %q; want the runtime's deploy", code, out)
	}
	if out, _, code := caddyMain(t, "runtime", "cluster", "--help"); code != 0 || !strings.Contains(out, "\n  publish ") {
		t.Errorf("caddy runtime cluster --help: exit %d, %q; want its publish", code, out)
	}
	for _, name := range []string{"login", "keys", "health", "keystore-migrate", "cluster"} {
		if _, ok := caddycmd.Commands()[name]; ok {
			t.Errorf("the module registers a top-level %s command", name)
		}
	}

	if caddy.CustomVersion != "" {
		t.Errorf("the module set caddy.CustomVersion to %q", caddy.CustomVersion)
	}
	if out, _, _ := caddyMain(t, "version"); strings.Contains(out, "runtime") {
		t.Errorf("caddy version prints %q: the module changed the host's version", out)
	}
	if out, _, code := caddyMain(t, "runtime", "version"); code != 0 || out != version.Line()+"\n" {
		t.Errorf("caddy runtime version: exit %d, %q; want the module's version", code, out)
	}
}

// TestClusterPublishRefuses: cluster publish needs a config, and one whose runtime app names a
// sync-mode key store and a package store; each refusal says what to set.
func TestClusterPublishRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	local := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(local, []byte("{\n\truntime {\n\t\tstate_dir "+filepath.Join(dir, "state")+"\n\t}\n}\n:0 {\n\truntime\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noStore := filepath.Join(dir, "Caddyfile.sync")
	if err := os.WriteFile(noStore, []byte("{\n\truntime {\n\t\tstate_dir "+filepath.Join(dir, "state")+
		"\n\t\tkey_store sync {\n\t\t\turl http://127.0.0.1:9\n\t\t}\n\t}\n}\n:0 {\n\truntime\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no config", nil, "--config"},
		{"local key store", []string{"--config", local, "--adapter", "caddyfile"}, "key_store sync"},
		{"no package store", []string{"--config", noStore, "--adapter", "caddyfile"}, "package_store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := caddyMain(t, append([]string{"runtime", "cluster", "publish"}, tc.args...)...)
			if code == 0 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, %s; want a refusal naming %s", code, errOut, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
		t.Error("a refused publish created the state folder")
	}
}
