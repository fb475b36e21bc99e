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
	if caddy.CustomVersion != "" {
		t.Fatalf("caddy.CustomVersion = %q before setUp: the module set it", caddy.CustomVersion)
	}
	caddys := setUp()
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
