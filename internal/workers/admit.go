package workers

import (
	"fmt"

	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/packages"
)

// Policy is what the operator lets workers do.
type Policy struct {
	// ProcessWorkers are the namespaces whose workers may run processes (process_workers).
	ProcessWorkers config.Namespaces
	// WasmWorkers are the namespaces whose workers may run WebAssembly (wasm_workers).
	WasmWorkers config.Namespaces
	// Reserved are the first path segments the runtime keeps (packages.ReservedNames).
	Reserved []string
	// MaxModuleSize caps a WebAssembly worker's module (wasm_max_module_size); 0 is
	// wasm.DefaultMaxModuleSize.
	MaxModuleSize int64
	// JSEngines are the engines JavaScript workers may ask for (js_runtime).
	JSEngines config.JSEngines
}

// Error codes of worker admission.
const (
	// CodeProcessWorkersDisabled refuses a process worker where process_workers does not
	// allow one.
	CodeProcessWorkersDisabled = "PROCESS_WORKERS_DISABLED"
	// CodeWasmWorkersDisabled refuses a WebAssembly worker where wasm_workers does not allow
	// one.
	CodeWasmWorkersDisabled = "WASM_WORKERS_DISABLED"
	// CodeConflict refuses a worker a plugin's base would hide.
	CodeConflict = "WORKER_CONFLICT"
)

// Admit decides whether the worker version md describes (name and version already valid) may
// be installed or enabled: its name must not be reserved, its manifest must be valid (its env
// naming no variable of the runtime's: checkEnv), a
// process worker (command, or an entrypoint that is not HTML) or a JavaScript worker must be
// allowed in its namespace by process_workers, a JavaScript worker's engine must be one this
// server has (js_runtime), a WebAssembly worker must be allowed by wasm_workers, and no enabled plugin may serve its path (bases: base → plugin name).
func Admit(md packages.Metadata, policy Policy, bases map[string]string) error {
	if err := packages.CheckReserved(md.Name, policy.Reserved); err != nil {
		return err
	}
	m, err := ReadManifest(md)
	if err == nil {
		err = m.checkEnv()
	}
	if err == nil && m.Database {
		err = checkDatabase(m)
	}
	if err != nil {
		return &packages.Error{Kind: packages.Invalid, Code: packages.CodeInvalidManifest, Message: err.Error()}
	}
	if m.Kind().Runs() && !policy.ProcessWorkers.Allows(md.Name) {
		what := "a process worker (it declares command or a program as entrypoint)"
		if m.Kind() == JS {
			what = "a JavaScript worker (its entrypoint " + m.Entrypoint + " runs in a process of its own)"
		}
		return &packages.Error{Kind: packages.Forbidden, Code: CodeProcessWorkersDisabled, Message: fmt.Sprintf(
			"%s is %s, and the setting process_workers (%s) does not allow them for %s; "+
				"serve static files, or ask the operator to allow the namespace", md.Name, what, policy.ProcessWorkers, namespaceOf(md.Name))}
	}
	if m.Kind() == JS {
		if err := checkEngine(m, policy.JSEngines); err != nil {
			return &packages.Error{Kind: packages.Invalid, Code: CodeJSEngineUnavailable, Message: err.Error()}
		}
	}
	if m.Kind() == Wasm && !policy.WasmWorkers.Allows(md.Name) {
		return &packages.Error{Kind: packages.Forbidden, Code: CodeWasmWorkersDisabled, Message: fmt.Sprintf(
			"%s is a WebAssembly worker (runtime: wasm), and the setting wasm_workers (%s) does not allow them for %s; "+
				"serve static files, or ask the operator to allow the namespace", md.Name, policy.WasmWorkers, namespaceOf(md.Name))}
	}
	if plugin, ok := bases["/"+md.Name]; ok {
		return &packages.Error{Kind: packages.Conflict, Code: CodeConflict, Message: fmt.Sprintf(
			"plugin %s serves base /%s, which would hide this worker; choose another name, or remove or disable the plugin first", plugin, md.Name)}
	}
	return nil
}

// namespaceOf names a worker's namespace in messages.
func namespaceOf(name string) string {
	if scope, _ := packages.SplitName(name); scope != "" {
		return "namespace " + scope
	}
	return "unscoped workers"
}

// checkDatabase refuses database: true to a worker without code.
func checkDatabase(m Manifest) error {
	switch {
	case m.Kind() != Process && m.Kind() != Wasm && m.Kind() != JS:
		return fmt.Errorf("database: true needs code (a process, JavaScript or WebAssembly worker): a %s worker has no database", m.Kind())
	}
	return nil
}
