package workers

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"os"

	"github.com/caddy-runtime/runtime/internal/wasm"
	"github.com/caddy-runtime/runtime/packages"
)

// CodeInvalidModule refuses a WebAssembly worker whose module is not a file of its archive,
// not a WebAssembly module, or imports something other than WASI preview 1.
const CodeInvalidModule = "INVALID_MODULE"

// checkModule checks the module of a WebAssembly worker in tree, its folder: a regular file
// of the archive of at most maxModule bytes (wasm_max_module_size), refused before it is read,
// that wasm.Check accepts.
func checkModule(m Manifest, tree *os.Root, maxModule int64) error {
	refuse := func(format string, args ...any) error {
		return &packages.Error{Kind: packages.Invalid, Code: CodeInvalidModule, Message: fmt.Sprintf(format, args...)}
	}
	file := path.Clean(filepath.ToSlash(m.Module))
	if file == ".." || strings.HasPrefix(file, "../") || path.IsAbs(file) {
		return refuse("module %s is outside the worker's folder: name a file of the archive, relative to its top", m.Module)
	}
	info, err := tree.Stat(filepath.FromSlash(file))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return refuse("module %s is not in the archive: build it into the folder before packing it (GOOS=wasip1 GOARCH=wasm go build -o %s)", m.Module, file)
	case err != nil:
		return refuse("module %s cannot be read in the archive: %v", m.Module, err)
	case !info.Mode().IsRegular():
		return refuse("module %s is not a file in the archive but a %s", m.Module, kindOf(info.Mode()))
	}
	binary, err := wasm.ReadModule(tree.FS(), file, maxModule)
	var tooLarge *wasm.SizeError
	switch {
	case errors.As(err, &tooLarge):
		return refuse("module %s %v", m.Module, tooLarge)
	case err != nil:
		return refuse("module %s cannot be read in the archive: %v", m.Module, err)
	}
	if err := wasm.Check(binary, m.Database); err != nil {
		return refuse("module %s %v", m.Module, err)
	}
	return nil
}
