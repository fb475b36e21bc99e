package workers

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/caddy-runtime/runtime/packages"
)

// CodeInvalidEntrypoint refuses a process worker whose program, named by its entrypoint or as
// a path in its command, is not a file of its archive, or not executable.
const CodeInvalidEntrypoint = "INVALID_ENTRYPOINT"

// CheckProgram checks that the program a process worker version runs is in tree, its folder,
// when the manifest names a file of the package: the entrypoint, or a command whose first word
// is a relative path (./server, bin/app). That file must be a regular file there and, but on
// Windows, executable. A command found on the worker's PATH (node) or given as an absolute path
// (/usr/bin/python3) is the system's, not the archive's, and is not checked. Static workers
// pass. An upload that fails would install a version that cannot start, so it is refused
// before it replaces a working one; so would a JavaScript worker's module that does not parse
// or has no default export (checkScriptSource). A WebAssembly worker's module must be a module it may
// run, of at most maxModule bytes (wasm_max_module_size; see checkModule). A code worker's
// .env must be readable (ReadDotEnv) and set no variable the runtime sets, as env.
func CheckProgram(md packages.Metadata, tree *os.Root, maxModule int64) error {
	m, err := ReadManifest(md)
	if err != nil {
		return &packages.Error{Kind: packages.Invalid, Code: packages.CodeInvalidManifest, Message: err.Error()}
	}
	// Refused at upload only: a version on disk that says so is read as it is, the key ignored.
	if m.AutoInstall && m.Kind() != JS {
		return &packages.Error{Kind: packages.Invalid, Code: packages.CodeInvalidManifest, Message: fmt.Sprintf(
			"autoInstall: true installs a JavaScript worker's dependencies: a %s worker has none to install; remove the key", m.Kind())}
	}
	if m.Kind().Code() {
		vars, err := ReadDotEnv(tree)
		if err == nil {
			err = checkNames(DotEnvFile, vars)
		}
		if err != nil {
			return &packages.Error{Kind: packages.Invalid, Code: packages.CodeInvalidManifest, Message: err.Error()}
		}
	}
	if m.Kind() == Wasm {
		return checkModule(m, tree, maxModule)
	}
	named, key, ok := m.programFile()
	if !ok {
		return nil
	}
	file := path.Clean(filepath.ToSlash(named))
	refuse := func(format string, args ...any) error {
		return &packages.Error{Kind: packages.Invalid, Code: CodeInvalidEntrypoint, Message: fmt.Sprintf(format, args...)}
	}
	if named == "" {
		return refuse("command starts with an empty word: its first word is the program to run")
	}
	if file == ".." || strings.HasPrefix(file, "../") || path.IsAbs(file) {
		return refuse("%s %s is outside the worker's folder: name a file of the archive, relative to its top", key, named)
	}
	info, err := tree.Stat(filepath.FromSlash(file))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return refuse("%s %s is not in the archive: build it into the folder before packing it, or %s", key, named, elsewhere(key))
	case err != nil:
		return refuse("%s %s cannot be read in the archive: %v", key, named, err)
	case !info.Mode().IsRegular():
		return refuse("%s %s is not a file in the archive but a %s", key, named, kindOf(info.Mode()))
	case runtime.GOOS != "windows" && m.Kind() != JS && info.Mode().Perm()&0o111 == 0:
		return refuse("%s %s is not executable: chmod +x %s before packing (a script needs a #! line too)", key, named, file)
	}
	if m.Kind() == JS {
		if reason := checkScriptSource(tree, file); reason != "" {
			return refuse("entrypoint %s %s", file, reason)
		}
	}
	return nil
}

// programFile is the file of the package a process worker runs (a JavaScript worker's module),
// as the manifest writes it, and the key that names it; ok is false when the version runs none
// of its own.
func (m Manifest) programFile() (file, key string, ok bool) {
	if m.Kind() == JS {
		return m.Entrypoint, "entrypoint", true // the module the engine runs
	}
	if m.Kind() != Process {
		return "", "", false
	}
	if len(m.Command) == 0 {
		return m.Entrypoint, "entrypoint", true
	}
	program := m.Command[0]
	if program == "" {
		return "", "command", true
	}
	// The sandbox looks a name without a slash up on the worker's PATH, and runs a path with one
	// from the version's folder; a Windows path may also be written with backslashes.
	local := strings.Contains(program, "/") || runtime.GOOS == "windows" && strings.Contains(program, `\`)
	if !local || strings.HasPrefix(program, "/") || filepath.IsAbs(program) {
		return "", "", false
	}
	return program, "command", true
}

// elsewhere says how else a program could be named.
func elsewhere(key string) string {
	if key == "command" {
		return "name a program on the worker's PATH (node) or by its absolute path (/usr/bin/python3)"
	}
	return "use command to run a program on the worker's PATH (command: [node, server.js])"
}

// kindOf names a file mode that is not a regular file's.
func kindOf(mode fs.FileMode) string {
	switch {
	case mode.IsDir():
		return "folder"
	case mode&fs.ModeSymlink != 0:
		return "link"
	}
	return "special file"
}
