package workers

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/packages"
)

// TestReadDotEnv: a .env is read as godotenv reads it; a line it cannot read, or a name no
// shell exports, fails naming the line.
func TestReadDotEnv(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       map[string]string
		err        string
	}{
		{"none", "", nil, ""},
		{"plain", "A=1\n# comment\nexport B='two words'\nC=\"x\\ny\"\nD=${A}-d\n", map[string]string{"A": "1", "B": "two words", "C": "x\ny", "D": "1-d"}, ""},
		{"a quoted value over lines", "A=\"one\ntwo\"\nB=2\n", map[string]string{"A": "one\ntwo", "B": "2"}, ""},
		{"a bad name", "A=1\nB=2\nC-D=3\n", nil, ".env line 3"},
		{"a name of a digit first", "A=1\n1B=2\n", nil, ".env line 2"},
		{"an unterminated quote", "A=1\nB=\"open\nC=3\n", nil, ".env line 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				os.WriteFile(filepath.Join(dir, DotEnvFile), []byte(tc.file), 0o644)
			}
			root, _ := os.OpenRoot(dir)
			defer root.Close()
			got, err := ReadDotEnv(root)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one naming %q", err, tc.err)
			case tc.err == "" && (err != nil || !maps.Equal(got, tc.want)):
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestReadVersionMergesDotEnv: a code worker's .env wins over its env for the same name; a
// static worker's .env is inert.
func TestReadVersionMergesDotEnv(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, DotEnvFile), []byte("SHARED=from-dotenv\nONLY=dotenv\n"), 0o644)
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	for kind, want := range map[string]map[string]string{
		"command: [/bin/true]\n":               {"SHARED": "from-dotenv", "ONLY": "dotenv", "KEPT": "env"},
		"runtime: wasm\nmodule: app.wasm\n":    {"SHARED": "from-dotenv", "ONLY": "dotenv", "KEPT": "env"},
		"runtime: bun\nentrypoint: index.js\n": {"SHARED": "from-dotenv", "ONLY": "dotenv", "KEPT": "env"},
		"entrypoint: index.html\n":             {"SHARED": "from-env", "KEPT": "env"},
	} {
		m, err := ReadVersion(manifestOnly(t, "name: a\n"+kind+"env: {SHARED: from-env, KEPT: env}\n"), root)
		if err != nil || !maps.Equal(m.Env, want) {
			t.Errorf("%q: env %v, %v; want %v", kind, m.Env, err, want)
		}
	}
}

// TestCheckProgramDotEnv: an upload whose .env cannot be read, or sets a variable of the
// runtime's, is refused naming it.
func TestCheckProgramDotEnv(t *testing.T) {
	for file, want := range map[string]string{
		"GOOD=1\n":             "",
		"GOOD=1\nBAD-NAME=2\n": ".env line 2",
		"PORT=8080\n":          ".env PORT is set by the runtime",
		"HTTP_X=1\n":           ".env HTTP_X is set by the runtime",
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, DotEnvFile), []byte(file), 0o644)
		root, _ := os.OpenRoot(dir)
		err := CheckProgram(manifestOnly(t, "name: a\ncommand: [/bin/true]\n"), root, 0)
		root.Close()
		switch {
		case want == "" && err != nil:
			t.Errorf("%q refused: %v", file, err)
		case want != "" && (err == nil || !packages.IsCode(err, packages.CodeInvalidManifest) || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: %v, want INVALID_MANIFEST naming %q", file, err, want)
		}
	}
}

// TestManifestTTLAndEnvPrefix: ttl: 0 written out is Fresh, an absent ttl the default;
// envPrefix defaults to PUBLIC_ and VITE_, and a list written replaces them.
func TestManifestTTLAndEnvPrefix(t *testing.T) {
	for _, tc := range []struct {
		keys   string
		ttl    TTL
		prefix []string
	}{
		{"", TTL{Duration: Duration(DefaultTTL)}, DefaultEnvPrefix},
		{"ttl: 0\n", TTL{Fresh: true}, DefaultEnvPrefix},
		{"ttl: 0s\n", TTL{Fresh: true}, DefaultEnvPrefix},
		{"ttl: \"0\"\n", TTL{Fresh: true}, DefaultEnvPrefix},
		{"ttl: 5\nenvPrefix: [APP_]\n", TTL{Duration: Duration(5e9)}, []string{"APP_"}},
		{"envPrefix: []\n", TTL{Duration: Duration(DefaultTTL)}, []string{}},
	} {
		m, err := ReadManifest(manifestOnly(t, "name: a\ncommand: [/bin/true]\n"+tc.keys))
		if err != nil || m.TTL != tc.ttl || !equalStrings(m.EnvPrefix, tc.prefix) {
			t.Errorf("%q: ttl %+v, envPrefix %q, %v; want %+v, %q", tc.keys, m.TTL, m.EnvPrefix, err, tc.ttl, tc.prefix)
		}
	}
	for _, bad := range []string{"ttl: -1\n", "envPrefix: [\"\"]\n", "envPrefix: PUBLIC_\n"} {
		if _, err := ReadManifest(manifestOnly(t, "name: a\ncommand: [/bin/true]\n"+bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func equalStrings(a, b []string) bool {
	return len(a) == len(b) && strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// TestPublicEnv: the variables with a prefix, less the secrets of any name.
func TestPublicEnv(t *testing.T) {
	env := map[string]string{"PUBLIC_A": "a", "VITE_B": "b", "PRIVATE": "p", "PUBLIC_TOKEN": "env's"}
	got := PublicEnv(env, DefaultEnvPrefix, func(name string) bool { return name == "PUBLIC_TOKEN" })
	if want := map[string]string{"PUBLIC_A": "a", "VITE_B": "b"}; !maps.Equal(got, want) {
		t.Errorf("PublicEnv = %v, want %v", got, want)
	}
	if got := PublicEnv(env, []string{}, func(string) bool { return false }); len(got) != 0 {
		t.Errorf("no prefixes: %v", got)
	}
}
