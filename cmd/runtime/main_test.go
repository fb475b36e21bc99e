package main

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/caddy-runtime/runtime/internal/version"
)

// TestSetUp checks what makes this binary the runtime's: its version names the runtime before
// Caddy, and the runtime's commands are offered at the top level too, but for the names Caddy
// keeps. TestVersionCommand and the CLI tests in integration/ run the real binary.
func TestSetUp(t *testing.T) {
	if caddy.CustomVersion != "" || caddy.CustomBinaryName != "" {
		t.Fatalf("caddy.CustomVersion = %q, CustomBinaryName %q before setUp: the module set them", caddy.CustomVersion, caddy.CustomBinaryName)
	}
	caddys := setUp()
	if caddy.CustomBinaryName != "runtime" || !strings.HasPrefix(caddy.CustomLongDescription, "runtime is Caddy") {
		t.Errorf("caddy.CustomBinaryName = %q, CustomLongDescription %q: help would name caddy", caddy.CustomBinaryName, caddy.CustomLongDescription)
	}
	// A test binary records no dependencies, so Caddy's own version is missing here.
	if _, full := caddy.Version(); !strings.HasPrefix(full, version.Line()+", Caddy") {
		t.Errorf("caddy.Version() full = %q, want it to start with runtime's", full)
	}
	if got, want := customVersion("v2.11.9-debian"), version.Line()+", Caddy v2.11.9-debian"; got != want {
		t.Errorf("customVersion kept the packager's version as %q, want %q", got, want)
	}
	if got, want := versionText(caddys), version.Line()+"\nCaddy "+caddys+"\n"; got != want {
		t.Errorf("versionText = %q, want %q", got, want)
	}
	commands := caddycmd.Commands()
	for _, name := range []string{"runtime", "login", "deploy", "workers", "keys", "health", "keystore-migrate"} {
		if _, ok := commands[name]; !ok {
			t.Errorf("no top-level %s command", name)
		}
	}
	for name, caddys := range map[string]string{"version": "Prints the version", "build-info": "Prints information about this build"} {
		if c := commands[name]; c.Short != caddys {
			t.Errorf("the top-level %s command is %q, not Caddy's", name, c.Short)
		}
	}
}

// TestRefuse: the commands that would replace this binary with a stock Caddy are refused, an
// unknown command gets the list of commands, and every other command line goes to Caddy's.
// TestCLIProgramName in integration/ runs the real binary.
func TestRefuse(t *testing.T) {
	setUp()
	tests := []struct {
		args []string
		done bool
		says []string
	}{
		{[]string{"upgrade"}, true, []string{"error: runtime upgrade is not available: this binary is built from the runtime project", "stock Caddy"}},
		{[]string{"add-package", "github.com/x/y"}, true, []string{"runtime add-package is not available"}},
		{[]string{"remove-package", "github.com/x/y"}, true, []string{"runtime remove-package is not available"}},
		{[]string{"frobnicate"}, true, []string{"error: runtime has no command \"frobnicate\"", "Usage:\n  runtime <command> [flags]", "\n  deploy ", "\n  run "}},
		{[]string{"deploy", "x"}, false, nil},
		{[]string{"run"}, false, nil},
		{[]string{"help"}, false, nil},
		{[]string{"--help"}, false, nil},
		{nil, false, nil},
	}
	for _, tt := range tests {
		var stderr strings.Builder
		code, done := refuse(tt.args, &stderr)
		if done != tt.done || done && code != 1 || !done && stderr.Len() > 0 {
			t.Errorf("refuse(%q) = %d, %v, %q", tt.args, code, done, stderr.String())
		}
		for _, want := range tt.says {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("refuse(%q) printed %q, want %q in it", tt.args, stderr.String(), want)
			}
		}
		if strings.Contains(stderr.String(), "\n  upgrade ") {
			t.Errorf("refuse(%q) lists upgrade", tt.args)
		}
	}
}
