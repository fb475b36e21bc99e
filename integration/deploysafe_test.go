package integration

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// TestUploadRefusesMissingProgram: a process worker whose program is not in its archive, or
// not executable, is refused at upload and in the dry run, with a message naming the file,
// and the working version it would have replaced goes on serving; a program on PATH or given
// by absolute path is the system's and passes. The command line prints the refusal.
func TestUploadRefusesMissingProgram(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	server := testWorkerFile(t)
	const manifest = "name: app\nversion: 1.0.0\n"
	uploadOK(t, s, "workers", "app.tgz", testWorkerArchive(t, "app", "1.0.0", ""), rootKey)
	pid := echoOf(t, s.Get("/app/")).PID
	before := contents(t, filepath.Join(s.DataDir, "apps"))

	for _, tt := range []struct {
		name  string
		files []harness.File
		says  string
	}{
		{"command missing", pkg(manifest + "command: [./missing, --port]\n"), "command ./missing is not in the archive"},
		{"command in a folder missing", pkg(manifest+"command: [bin/server]\n", server),
			"command bin/server is not in the archive"},
		{"entrypoint missing", pkg(manifest + "entrypoint: server\n"), "entrypoint server is not in the archive"},
		{"entrypoint not executable", pkg(manifest+"entrypoint: server\n", harness.File{Name: "server", Body: server.Body, Mode: 0o644}),
			"entrypoint server is not executable: chmod +x server"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			archive := harness.TarGz(t, tt.files...)
			for _, path := range []string{"/workers/upload", "/workers/upload?dryRun=1"} {
				resp := s.Upload(s.API+path, "app.tgz", archive, harness.WithKey(rootKey))
				if resp.Status != 400 || resp.ErrorCode() != "INVALID_ENTRYPOINT" || !strings.Contains(string(resp.Body), tt.says) {
					t.Errorf("POST %s = %s, want 400 INVALID_ENTRYPOINT saying %q", path, resp, tt.says)
				}
			}
		})
	}
	if after := contents(t, filepath.Join(s.DataDir, "apps")); !reflect.DeepEqual(before, after) {
		t.Error("a refused upload changed the workers' folder")
	}
	if got := echoOf(t, s.Get("/app/")).PID; got != pid {
		t.Errorf("after the refusals /app/ is served by pid %d, want the working version's %d", got, pid)
	}

	for _, command := range []string{"[sh, -c, 'exec sleep 60']", "[/bin/sh, -c, 'exec sleep 60']"} {
		dryRunOK(t, s, "workers", harness.TarGz(t, pkg("name: sys\nversion: 1.0.0\ncommand: "+command+"\n")...), rootKey)
	}

	// Through the command line: the refusal, its code and the file, in the dry run as in the
	// deploy.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest+"command: [./server]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t)
	c.env = []string{"RUNTIME_URL=" + s.URL, "RUNTIME_API_KEY=" + rootKey}
	for _, args := range [][]string{{"deploy", dir, "--dry-run"}, {"deploy", dir}} {
		out, errOut, code := c.runTop(args...)
		if code != 1 || out != "" || !strings.Contains(errOut, "error: INVALID_ENTRYPOINT: command ./server is not in the archive") {
			t.Errorf("runtime %v: exit %d, %q %q; want 1 with the refusal", args, code, out, errOut)
		}
	}
}

// caddyNamed finds the program named caddy (not Caddy the project, nor xcaddy).
var caddyNamed = regexp.MustCompile(`\bcaddy\b`)

// TestCLIProgramName runs bin/runtime as a user does: help and messages name runtime, not
// caddy; an unknown command exits 1 with the usage; Caddy's upgrade and package commands,
// which would replace the binary with a stock Caddy, refuse; deploy refuses a plugin's folder
// without --plugin.
func TestCLIProgramName(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	if out, _, code := c.runTop("--help"); code != 0 || !strings.HasPrefix(out, "runtime is Caddy") || !strings.Contains(out, "\n  runtime [command]") {
		t.Errorf("runtime --help: exit %d, %q; want the runtime's description and usage", code, out)
	}
	out, _, code := c.runTop("deploy", "--help")
	if code != 0 || !strings.Contains(out, "\n  runtime deploy [DIR]") || !strings.Contains(out, "\n  runtime deploy ./site") || strings.Contains(out, "caddy runtime") {
		t.Errorf("runtime deploy --help: exit %d, %q; want runtime's usage and examples", code, out)
	}
	if out, _, code := c.runTop("workers", "--help"); code != 0 || !strings.Contains(out, `Use "runtime workers [command] --help"`) {
		t.Errorf("runtime workers --help: exit %d, %q", code, out)
	}
	// Under caddy runtime, the same help names caddy runtime.
	if out, _, code := c.run("deploy", "--help"); code != 0 || !strings.Contains(out, "\n  runtime runtime deploy [DIR]") {
		t.Errorf("runtime runtime deploy --help: exit %d, %q", code, out)
	}

	for _, tt := range []struct {
		name string
		args []string
		says []string
	}{
		{"unknown command", []string{"frobnicate"}, []string{`error: runtime has no command "frobnicate"`, "Usage:\n  runtime <command>", "\n  deploy "}},
		{"unknown subcommand", []string{"workers", "frob"}, []string{`error: runtime workers has no command "frob"`, "Usage:\n  runtime workers", "Available Commands:"}},
		{"upgrade", []string{"upgrade"}, []string{"error: runtime upgrade is not available: this binary is built from the runtime project"}},
		{"add-package", []string{"add-package", "github.com/x/y"}, []string{"runtime add-package is not available"}},
		{"remove-package", []string{"remove-package", "github.com/x/y"}, []string{"runtime remove-package is not available"}},
		{"no runtime", []string{"workers", "list"}, []string{"save one with runtime login"}},
		{"plugin as a worker", []string{"deploy", "../examples/hello-plugin", "--url", "http://127.0.0.1:1"},
			[]string{"is a plugin's folder (its manifest declares routes, base): deploy it with --plugin, as in runtime deploy --plugin ../examples/hello-plugin"}},
		{"worker as a plugin", []string{"deploy", "--plugin", "../examples/static-app", "--url", "http://127.0.0.1:1"},
			[]string{"is a worker's folder", "deploy it without --plugin, as in runtime deploy ../examples/static-app"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := c.runTop(tt.args...)
			if code != 1 || out != "" {
				t.Errorf("runtime %v: exit %d, stdout %q; want 1 and nothing", tt.args, code, out)
			}
			for _, want := range tt.says {
				if !strings.Contains(errOut, want) {
					t.Errorf("runtime %v printed %q, want %q in it", tt.args, errOut, want)
				}
			}
			if caddyNamed.MatchString(errOut) {
				t.Errorf("runtime %v names caddy: %q", tt.args, errOut)
			}
		})
	}
}

// TestCLIDeployWaitFailingWorker: deploy (--wait or not) of a process worker that cannot start
// exits 1 with the runtime's message (its upload answers HEALTHCHECK_FAILED: it did not listen
// on PORT) and the worker's last output lines.
func TestCLIDeployWaitFailingWorker(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "manifest.yaml"),
		[]byte("name: crash\nversion: 1.0.0\ncommand: [sh, -c, 'echo missing DATABASE_URL >&2; exit 2']\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t)
	c.env = []string{"RUNTIME_URL=" + s.URL, "RUNTIME_API_KEY=" + rootKey}
	for _, args := range [][]string{{"deploy", dir, "--wait"}, {"deploy", dir}} {
		out, errOut, code := c.runTop(args...)
		for _, want := range []string{"error: installed crash 1.0.0, but it did not pass its check: HEALTHCHECK_FAILED: crash 1.0.0 failed its check and nothing healthier exists: it is served, failing",
			"it exited before listening on PORT", "Its last output lines:\n  stderr: missing DATABASE_URL\n"} {
			if code != 1 || out != "" || !strings.Contains(errOut, want) {
				t.Errorf("runtime %v of a crashing worker: exit %d, %q %q; want 1 and %q", args, code, out, errOut, want)
			}
		}
		if strings.Contains(errOut, "<nil>") {
			t.Errorf("runtime %v printed <nil>: %q", args, errOut)
		}
	}
}
