package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJSRuntime: js_runtime names an engine on PATH or the absolute path of one's binary; unset,
// the first of bun, deno and node on PATH is the default, and the others on PATH are known too.
func TestJSRuntime(t *testing.T) {
	bin, other := t.TempDir(), t.TempDir()
	for _, name := range []string{"deno", "node"} {
		os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755)
	}
	os.WriteFile(filepath.Join(other, "bun-1.4"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(other, "python3"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(other, "bun"), []byte("not executable"), 0o644)
	path := "relative:" + other + ":" + bin
	for _, tt := range []struct {
		written, env string
		want         string // the engines, as String lists them
		says         string
	}{
		{"", "", "deno (default), node", ""},
		{"node", "", "deno, node (default)", ""},
		{"", "node", "deno, node (default)", ""},
		{filepath.Join(other, "bun-1.4"), "", "bun (default), deno, node", ""},
		{"bun", "", "", "invalid js_runtime \"bun\": bun is not on the PATH"},
		{"", "bun", "", "invalid js_runtime \"bun\" (from environment variable RUNTIME_JS_RUNTIME): bun is not on the PATH"},
		{filepath.Join(other, "python3"), "", "", "the file name does not tell the engine"},
		{filepath.Join(other, "bun"), "", "", "is not an executable file"},
		{"/no/such/deno", "", "", "cannot be found"},
		{"v8", "", "", "write bun, deno, node or the absolute path"},
	} {
		s, err := ResolveApp(AppValues{JSRuntime: tt.written}, envMap(map[string]string{"PATH": path, "RUNTIME_JS_RUNTIME": tt.env}))
		if tt.says != "" {
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("js_runtime %q (env %q): %v; want an error saying %q", tt.written, tt.env, err, tt.says)
			}
			continue
		}
		if err != nil || s.JSEngines.String() != tt.want {
			t.Errorf("js_runtime %q (env %q): %v, %v; want %s", tt.written, tt.env, s.JSEngines, err, tt.want)
		}
	}
	s, _ := ResolveApp(AppValues{}, envMap(map[string]string{"PATH": bin}))
	if name, binary, ok := s.JSEngines.Path("js"); name != "deno" || binary != filepath.Join(bin, "deno") || !ok {
		t.Errorf("runtime: js runs %s at %s, %v", name, binary, ok)
	}
	if _, _, ok := s.JSEngines.Path("bun"); ok {
		t.Error("runtime: bun found with no bun")
	}
}

// TestJSInstallSettings: js_registry is the http(s) URL of a registry, given a final slash,
// npm's (every engine's default) unset; js_install_timeout is a duration from 1s to 30m, 2m unset.
func TestJSInstallSettings(t *testing.T) {
	for _, tt := range []struct {
		registry, timeout, env string
		wantRegistry           string
		wantTimeout            time.Duration
		says                   string
	}{
		{"", "", "", DefaultJSRegistry, 2 * time.Minute, ""},
		{"https://registry.npmjs.org", "90s", "", "https://registry.npmjs.org/", 90 * time.Second, ""},
		{"http://127.0.0.1:4873/npm", "", "", "http://127.0.0.1:4873/npm/", 2 * time.Minute, ""},
		{"", "", "http://mirror.internal/", "http://mirror.internal/", 2 * time.Minute, ""},
		{"registry.npmjs.org", "", "", "", 0, "invalid js_registry"},
		{"https://user:pass@registry.npmjs.org/", "", "", "", 0, "without credentials"},
		{"ftp://registry.npmjs.org/", "", "", "", 0, "the http or https URL"},
		{"", "500ms", "", "", 0, "invalid js_install_timeout \"500ms\": too short"},
		{"", "1h", "", "", 0, "too long"},
		{"", "two minutes", "", "", 0, "want a duration"},
	} {
		s, err := ResolveApp(AppValues{JSRegistry: tt.registry, JSInstallTimeout: tt.timeout}, envMap(map[string]string{"RUNTIME_JS_REGISTRY": tt.env}))
		if tt.says != "" {
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("js_registry %q, js_install_timeout %q: %v; want an error saying %q", tt.registry, tt.timeout, err, tt.says)
			}
			continue
		}
		if err != nil || s.JSRegistry != tt.wantRegistry || s.JSInstallTimeout != tt.wantTimeout {
			t.Errorf("js_registry %q, js_install_timeout %q: %q, %v, %v; want %q, %v", tt.registry, tt.timeout, s.JSRegistry, s.JSInstallTimeout, err, tt.wantRegistry, tt.wantTimeout)
		}
	}
}
