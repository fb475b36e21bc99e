package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Surfaces are the parts of the runtime a handler serves.
type Surfaces struct {
	API     bool // the management API, discovery and the docs
	CPanel  bool // the cpanel
	Workers bool // workers, plugin routes and onRequest hooks
}

// All reports whether every surface is served.
func (s Surfaces) All() bool { return s.API && s.CPanel && s.Workers }

// SharesOrigin reports whether workers are served beside the API or the cpanel, where a
// worker page runs on the same origin as an admin's session.
func (s Surfaces) SharesOrigin() bool { return s.Workers && (s.API || s.CPanel) }

func parseSurfaces(list []string) (Surfaces, error) {
	var s Surfaces
	if len(list) == 0 {
		return s, fmt.Errorf("name at least one of api, cpanel, workers (or all)")
	}
	for _, name := range list {
		switch strings.ToLower(name) {
		case "all":
			s = Surfaces{true, true, true}
		case "api":
			s.API = true
		case "cpanel":
			s.CPanel = true
		case "workers":
			s.Workers = true
		default:
			return s, fmt.Errorf("unknown surface %q; use api, cpanel, workers or all", name)
		}
	}
	return s, nil
}

// Namespaces is a set of package scopes: all of them, none, or the listed ones.
type Namespaces struct {
	All  bool
	List []string // "@team" entries, used when All is false
}

// Allows reports whether a package name (possibly "@scope/name") falls in the set. Unscoped
// names only fall in "all".
func (n Namespaces) Allows(name string) bool {
	if n.All {
		return true
	}
	scope, _, ok := strings.Cut(name, "/")
	return ok && strings.HasPrefix(scope, "@") && slices.Contains(n.List, scope)
}

// String describes the set as written.
func (n Namespaces) String() string {
	switch {
	case n.All:
		return "on"
	case len(n.List) == 0:
		return "off"
	}
	return strings.Join(n.List, " ")
}

var scopeRe = regexp.MustCompile(`^@[a-z0-9][a-z0-9._-]*$`)

func parseNamespaces(list []string) (Namespaces, error) {
	if len(list) == 1 {
		switch strings.ToLower(list[0]) {
		case "all", "*":
			return Namespaces{All: true}, nil
		case "none":
			return Namespaces{}, nil
		}
		if on, err := ParseBool(list[0]); err == nil {
			return Namespaces{All: on}, nil
		}
	}
	var n Namespaces
	for _, s := range list {
		if !scopeRe.MatchString(s) {
			return n, fmt.Errorf("%q is not a namespace; write on or off ("+BoolWords+"), or namespaces such as @team", s)
		}
		if !slices.Contains(n.List, s) {
			n.List = append(n.List, s)
		}
	}
	if len(n.List) == 0 {
		return n, fmt.Errorf("write on, off, or namespaces such as @team")
	}
	return n, nil
}

// isolation resolves the settings that keep uploaded code in its box.
func (r resolver) isolation(v AppValues, s *Settings) error {
	var err error
	raw, fromEnv := r.list("process_workers", v.ProcessWorkers)
	if s.ProcessWorkers, err = parseNamespaces(raw); err != nil {
		return r.fail("process_workers", fromEnv, strings.Join(raw, " "), err)
	}
	s.WorkerUser, _ = r.pick("worker_user", v.WorkerUser)
	s.WorkerGroup, fromEnv = r.pick("worker_group", v.WorkerGroup)
	if s.WorkerGroup != "" && s.WorkerUser == "" {
		return r.fail("worker_group", fromEnv, s.WorkerGroup, fmt.Errorf("set worker_user too; a group alone is not used"))
	}
	if s.WorkerReadDirs, err = r.optionalDirs("worker_read_dirs", v.WorkerReadDirs); err != nil {
		return err
	}
	one, fromEnv := r.pick("scratch_dir", v.ScratchDir)
	if s.ScratchDir, err = absDir(one); err != nil {
		return r.fail("scratch_dir", fromEnv, one, err)
	}
	if err := scratchApart(*s); err != nil {
		return r.fail("scratch_dir", fromEnv, one, err)
	}
	one, fromEnv = r.pick("worker_network", v.WorkerNetwork)
	if s.WorkerNetwork, err = parseWorkerNetwork(one); err != nil {
		return r.fail("worker_network", fromEnv, one, err)
	}
	if s.WorkerScratch, err = r.size("worker_scratch", v.WorkerScratch); err != nil {
		return err
	}
	if s.WorkerDatabase, err = r.size("worker_database_size", v.WorkerDatabaseSize); err != nil {
		return err
	}
	if s.WorkerMemory, err = r.size("worker_memory", v.WorkerMemory); err != nil {
		return err
	}
	if s.WorkerProcesses, err = r.count("worker_processes", v.WorkerProcesses); err != nil {
		return err
	}
	if s.WorkerMaxFiles, err = r.count("worker_max_files", v.WorkerMaxFiles); err != nil {
		return err
	}
	one, fromEnv = r.pick("worker_cpu", v.WorkerCPU)
	if s.WorkerCPU, err = ParseCPU(one); err != nil {
		return r.fail("worker_cpu", fromEnv, one, err)
	}
	if s.WorkerLogRate, err = r.count("worker_log_rate", v.WorkerLogRate); err != nil {
		return err
	}
	if s.WorkerLogLines, err = r.count("worker_log_lines", v.WorkerLogLines); err != nil {
		return err
	}
	if s.WorkerFreshConcurrency, err = r.count("worker_fresh_concurrency", v.WorkerFreshConcurrency); err != nil {
		return err
	}
	if s.WorkerFreshQueue, err = r.count("worker_fresh_queue", v.WorkerFreshQueue); err != nil {
		return err
	}
	raw, _ = r.list("plugin_handlers", v.PluginHandlers)
	s.PluginHandlers = raw
	raw, fromEnv = r.list("wasm_workers", v.WasmWorkers)
	if s.WasmWorkers, err = parseNamespaces(raw); err != nil {
		return r.fail("wasm_workers", fromEnv, strings.Join(raw, " "), err)
	}
	if s.WasmMemory, err = r.size("wasm_memory", v.WasmMemory); err != nil {
		return err
	}
	if s.WasmCompiledMemory, err = r.size("wasm_compiled_memory", v.WasmCompiledMemory); err != nil {
		return err
	}
	if s.WasmCacheSize, err = r.size("wasm_cache_size", v.WasmCacheSize); err != nil {
		return err
	}
	if s.WasmConcurrency, err = r.count("wasm_concurrency", v.WasmConcurrency); err != nil {
		return err
	}
	if s.WasmMemoryBudget, err = r.size("wasm_memory_budget", v.WasmMemoryBudget); err != nil {
		return err
	}
	if s.WasmMaxModuleSize, err = r.size("wasm_max_module_size", v.WasmMaxModuleSize); err != nil {
		return err
	}
	if s.JSEngines, err = r.jsEngines(v); err != nil {
		return err
	}
	if s.JSRegistry, err = r.jsRegistry(v.JSRegistry); err != nil {
		return err
	}
	timeout, fromEnv := r.pick("js_install_timeout", v.JSInstallTimeout)
	if s.JSInstallTimeout, err = ParseJSInstallTimeout(timeout); err != nil {
		return r.fail("js_install_timeout", fromEnv, timeout, err)
	}
	if s.WorkerMaxHeaderSize, err = r.size("worker_max_header_size", v.WorkerMaxHeaderSize); err != nil {
		return err
	}
	return nil
}

// The values of worker_network.
const (
	NetworkHost     = "host"     // workers share the host's network, loopback included
	NetworkIsolated = "isolated" // each worker has a network namespace of its own
)

func parseWorkerNetwork(raw string) (string, error) {
	switch v := strings.ToLower(strings.TrimSpace(raw)); v {
	case NetworkHost, NetworkIsolated:
		return v, nil
	}
	return "", fmt.Errorf("want host or isolated")
}

// CheckPlatform refuses settings this process cannot honour on its system and account:
// worker_network isolated needs Linux and root. Provisioning (start-up and caddy validate)
// calls it; adapting a Caddyfile does not, so a config may be adapted on another machine.
func CheckPlatform(s Settings, goos string, euid int) error {
	if s.WorkerNetwork != NetworkIsolated {
		return nil
	}
	fail := func(reason string) error {
		return &Error{Setting: Lookup("worker_network"), Value: s.WorkerNetwork, Reason: reason}
	}
	if goos != "linux" {
		return fail("network namespaces need Linux; use host")
	}
	if euid != 0 {
		return fail("the runtime must run as root to give each worker a network namespace of its own " +
			"(set worker_user to run the workers under another account); run it as root or use host")
	}
	return nil
}

// list returns a list setting as written, else from its environment variable (separated by
// spaces or commas), else its default.
func (r resolver) list(name string, written []string) ([]string, bool) {
	if len(written) > 0 {
		return written, false
	}
	raw, fromEnv := r.pick(name, "")
	return strings.FieldsFunc(raw, func(c rune) bool { return c == ' ' || c == ',' || c == '\t' }), fromEnv
}

// optionalDirs is like dirs for a list that may be empty.
func (r resolver) optionalDirs(name string, written []string) ([]string, error) {
	if len(written) == 0 {
		if raw, _ := r.pick(name, ""); raw == "" {
			return nil, nil
		}
	}
	return r.dirs(name, written)
}

// ParseCPU parses a number of cores such as "0.5", "1" or "2".
func ParseCPU(s string) (float64, error) {
	n, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || n < 0.01 || n > 1024 {
		return 0, fmt.Errorf("want a number of cores from 0.01 to 1024, e.g. 0.5 or 2")
	}
	return n, nil
}

func checkWorkersURL(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("want an absolute http(s) URL such as https://apps.example.com")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("no user, query or fragment is allowed")
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// scratchApart keeps the scratch folder, which workers write, away from the runtime's state and
// the unit folders.
func scratchApart(s Settings) error {
	for _, other := range append([]string{s.StateDir}, append(s.WorkerDirs, s.PluginDirs...)...) {
		if within(s.ScratchDir, other) || within(other, s.ScratchDir) {
			return fmt.Errorf("workers write here, so it must not overlap %s; use a separate folder", other)
		}
	}
	return nil
}

// within reports whether path is dir or lies beneath it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// StringFields are the written string settings, which may hold placeholders such as
// {env.X}.
func (v *Values) StringFields() []*string {
	return append(v.SiteValues.StringFields(), v.AppValues.StringFields()...)
}

// ListFields are the written list settings, which may hold placeholders.
func (v *Values) ListFields() []*[]string {
	return append(v.SiteValues.ListFields(), v.AppValues.ListFields()...)
}

// StringFields are the written per-site string settings.
func (v *SiteValues) StringFields() []*string { return []*string{&v.APIPrefix, &v.WorkersURL} }

// ListFields are the written per-site list settings.
func (v *SiteValues) ListFields() []*[]string { return []*[]string{&v.Serve} }

// StringFields are the written process-wide string settings.
func (v *AppValues) StringFields() []*string {
	return []*string{&v.StateDir, &v.RootKey, &v.SecretsKey, &v.SecretsKeyOld, &v.SessionTTL, &v.AuditRetention, &v.RetireDelay, &v.SplitHeader, &v.KeyStore, &v.SyncURL, &v.SyncToken, &v.SyncInterval,
		&v.WorkerUser, &v.WorkerGroup, &v.ScratchDir, &v.WorkerNetwork, &v.WorkerCPU, &v.WorkersDomain, &v.JSRegistry, &v.JSInstallTimeout}
}

// ListFields are the written process-wide list settings.
func (v *AppValues) ListFields() []*[]string {
	return []*[]string{&v.WorkerDirs, &v.PluginDirs, &v.WorkerReadDirs, &v.ProcessWorkers, &v.PluginHandlers, &v.WasmWorkers, &v.DomainResolvers}
}
