package workers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/joho/godotenv"

	"github.com/caddy-runtime/runtime/packages"
)

// DotEnvFile is the file at the top of a code worker's version folder whose variables are
// merged over the manifest's env, winning for the same name.
const DotEnvFile = ".env"

// maxDotEnv bounds a .env file: it holds settings, not data.
const maxDotEnv = 64 << 10

// envName is what a variable of a .env may be called: what a shell can export.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ReadDotEnv reads the .env file of the version folder root, nil when it has none. Its lines
// are NAME=value, as godotenv reads them (quotes, export, comments, ${NAME} of an earlier
// line); a line it cannot read, or a name a shell could not export, is an error naming the line.
func ReadDotEnv(root *os.Root) (map[string]string, error) {
	f, err := root.Open(DotEnvFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read: %w", DotEnvFile, err)
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", DotEnvFile)
	}
	src, err := io.ReadAll(io.LimitReader(f, maxDotEnv+1))
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read: %w", DotEnvFile, err)
	}
	if len(src) > maxDotEnv {
		return nil, fmt.Errorf("%s is larger than %d bytes: keep settings there, and data in files of the folder", DotEnvFile, maxDotEnv)
	}
	vars, err := godotenv.UnmarshalBytes(src)
	if err != nil {
		return nil, fmt.Errorf("%s line %d: %s; write NAME=value, one a line", DotEnvFile, failingLine(src), firstLine(err.Error()))
	}
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		if !envName.MatchString(name) {
			return nil, fmt.Errorf("%s line %d: %q is not a variable name: letters, digits and _, not starting with a digit",
				DotEnvFile, lineOf(src, name), name)
		}
	}
	return vars, nil
}

// failingLine is the line where the statement godotenv cannot read begins: the first line
// from which on every longer part of src fails too (a quoted value may span lines).
func failingLine(src []byte) int {
	lines := bytes.SplitAfter(src, []byte("\n"))
	at := len(lines)
	for at > 1 {
		if _, err := godotenv.UnmarshalBytes(bytes.Join(lines[:at-1], nil)); err == nil {
			break
		}
		at--
	}
	return at
}

// lineOf is the line of src that sets name, 0 when none is found.
func lineOf(src []byte, name string) int {
	for i, line := range strings.Split(string(src), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "export ")
		if strings.HasPrefix(strings.TrimSpace(line), name) {
			return i + 1
		}
	}
	return 0
}

// firstLine cuts a message at its first line break: godotenv quotes the rest of the file.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// withDotEnv merges the variables of the version's .env over the manifest's env, for a code
// worker (a process, JavaScript or WebAssembly one); a static worker runs nothing, its .env is
// inert.
func (m *Manifest) withDotEnv(root *os.Root) error {
	if !m.Kind().Code() {
		return nil
	}
	vars, err := ReadDotEnv(root)
	if err != nil || len(vars) == 0 {
		return err
	}
	env := maps.Clone(m.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, vars)
	m.Env = env
	return nil
}

// ReadVersion reads the serving keys of a version in the folder root: its manifest
// (ReadManifest) with its .env merged over env. What serves or starts a version reads it so.
func ReadVersion(md packages.Metadata, root *os.Root) (Manifest, error) {
	m, err := ReadManifest(md)
	if err != nil {
		return m, err
	}
	return m, m.withDotEnv(root)
}

// ReadVersionAt is ReadVersion for the version folder dir.
func ReadVersionAt(md packages.Metadata, dir string) (Manifest, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Manifest{}, err
	}
	defer root.Close()
	return ReadVersion(md, root)
}

// PublicEnv are the variables of env whose names start with one of prefixes, less those
// secret tells are secrets: what an HTML answer may show as window.__env__.
func PublicEnv(env map[string]string, prefixes []string, secret func(name string) bool) map[string]string {
	var out map[string]string
	for name, value := range env {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) || secret(name) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = value
	}
	return out
}
