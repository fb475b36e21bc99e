package caddymodule

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/rewrite"

	"github.com/caddy-runtime/runtime/internal/config"
)

func init() {
	httpcaddyfile.RegisterGlobalOption(appID, parseGlobalOption)
	httpcaddyfile.RegisterDirective("runtime", parseDirective)
	// Before respond, so a site block needs no order. The runtime answers every request it
	// gets and never calls the next handler: a "respond" or "file_server" in the same site
	// serves only what a matcher on runtime leaves out.
	httpcaddyfile.RegisterDirectiveOrder("runtime", httpcaddyfile.Before, "respond")
}

// parseDirective builds the runtime's route. A path matcher of the form /x/* (inline, or in a
// named matcher) mounts the runtime at /x: the route strips /x in front of the handler, as
// handle_path does, so the runtime serves its API, discovery, cpanel and workers below /x.
// Any other matcher only selects the requests the runtime answers.
func parseDirective(h httpcaddyfile.Helper) ([]httpcaddyfile.ConfigValue, error) {
	if !h.Next() {
		return nil, h.ArgErr()
	}
	directive := h.Token()
	matchers, err := h.ExtractMatcherSet()
	if err != nil {
		return nil, err
	}
	m := new(Handler)
	if err := m.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	if err := checkCopy(h, m.AppValues, directive); err != nil {
		return nil, err
	}
	values := h.NewRoute(matchers, m)
	at, err := mountAt(matchers)
	if err != nil || at == "" || len(values) != 1 {
		return values, err
	}
	route := values[0].Value.(caddyhttp.Route)
	strip := caddyconfig.JSONModuleObject(rewrite.Rewrite{StripPathPrefix: at}, "handler", "rewrite", nil)
	route.HandlersRaw = append([]json.RawMessage{strip}, route.HandlersRaw...)
	values[0].Value = route
	return values, nil
}

// mountAt returns /x when the matcher set has a path matcher with the one pattern /x/*, else
// "". Other matchers in the set (host, method, …) only select requests.
func mountAt(matchers caddy.ModuleMap) (string, error) {
	raw, ok := matchers["path"]
	if !ok {
		return "", nil
	}
	var paths caddyhttp.MatchPath
	if err := json.Unmarshal(raw, &paths); err != nil {
		return "", err
	}
	return mountOf(paths), nil
}

// mountOf is the path a path matcher mounts below: "/rt" for /rt/*; "" for any other form
// (several paths, /*, a wildcard inside).
func mountOf(paths []string) string {
	if len(paths) != 1 {
		return ""
	}
	at, ok := strings.CutSuffix(paths[0], "/*")
	if !ok || at == "" || strings.Contains(at, "*") {
		return ""
	}
	return at
}

// parseGlobalOption reads the global runtime option, the runtime app's settings:
//
//	{
//		runtime {
//			worker_dirs     <dir...>
//			plugin_dirs     <dir...>
//			state_dir       <dir>
//			root_key        <key>
//			secrets_key     <32 random bytes in base64, e.g. {env.RUNTIME_SECRETS_KEY}>
//			secrets_key_old <the previous secrets_key, while secrets rotate runs>
//			session_ttl     <duration>
//			audit_retention <duration>
//			retire_delay    <duration>
//			split_header    <header name>
//			max_upload_size <size>
//			max_unpacked_size <size>
//			max_archive_entries <count>
//			pool_size       <count>
//			key_store       local|sync [{
//				url      <libSQL primary URL>
//				token    <auth token, e.g. {env.RUNTIME_AUTH_DB_SYNC_TOKEN}>
//				interval <pull interval, e.g. 10s>
//				admin_url   <the primary's admin API, for the workers' databases>
//				admin_token <its key, e.g. {env.RUNTIME_AUTH_DB_SYNC_ADMIN_TOKEN}>
//			}]
//			package_store   local|s3 [{ … }]   # a module of runtime.package_stores; see S3Store
//			process_workers on|off|<@namespace...>
//			worker_user     <user>
//			worker_group    <group>
//			worker_read_dirs <dir...>
//			scratch_dir     <dir>
//			worker_network  host|isolated
//			worker_scratch  <size>
//			worker_database_size <size>
//			worker_memory   <size>
//			worker_processes <count>
//			worker_max_files <count>
//			worker_cpu      <cores>
//			worker_log_rate <lines per second>
//			worker_log_lines <lines kept per worker>
//			worker_fresh_concurrency <processes>
//			worker_fresh_queue <requests>
//			worker_max_header_size <size>
//			js_runtime      bun|deno|node|<absolute path of one>
//			js_registry     <npm registry URL>
//			js_install_timeout <duration>
//			plugin_handlers <module...>
//			workers_domain  <domain or base URL>
//			domain_resolvers <host[:port]...>
//			max_pending_domains <count per namespace>
//		}
//	}
func parseGlobalOption(d *caddyfile.Dispenser, existing any) (any, error) {
	d.Next() // the option name
	if existing != nil {
		return nil, d.Errf("the runtime global option is given twice; write its settings in one block")
	}
	if d.NextArg() {
		return nil, d.Errf("the runtime global option takes no arguments, only a block of settings")
	}
	var v config.Values
	var store json.RawMessage
	if err := unmarshalSettings(d, &v, &store); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: appID, Value: caddyconfig.JSON(&App{AppValues: v.AppValues, PackageStoreRaw: store}, nil)}, nil
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	runtime [<matcher>] {   # a path matcher /x/* mounts the runtime at /x
//		api_prefix      <path>
//		serve           all|api|cpanel|workers...
//		workers_url     <url>
//	}
//
// The block also takes the settings of the global runtime option, deprecated there: they hold
// for the whole process, so every runtime directive must write the same ones.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.Errf("runtime takes no arguments, only a block of settings")
	}
	return unmarshalSettings(d, &h.Values, nil)
}

// unmarshalSettings reads a block of settings into v, the one parser of the global option
// and the directive. store is where the global option puts its package store; the directive
// has none (nil): a site block takes the per-site and the process-wide settings, the global
// option the process-wide ones and the package store.
func unmarshalSettings(d *caddyfile.Dispenser, v *config.Values, store *json.RawMessage) error {
	site := store == nil
	lists := map[string]*[]string{
		"worker_dirs": &v.WorkerDirs, "plugin_dirs": &v.PluginDirs, "worker_read_dirs": &v.WorkerReadDirs,
		"serve": &v.Serve, "process_workers": &v.ProcessWorkers, "plugin_handlers": &v.PluginHandlers,
		"wasm_workers":     &v.WasmWorkers,
		"domain_resolvers": &v.DomainResolvers,
	}
	sizes := map[string]*int64{"max_upload_size": &v.MaxUploadSize, "max_unpacked_size": &v.MaxUnpackedSize, "worker_memory": &v.WorkerMemory,
		"worker_scratch": &v.WorkerScratch, "worker_database_size": &v.WorkerDatabaseSize, "wasm_memory": &v.WasmMemory, "wasm_compiled_memory": &v.WasmCompiledMemory,
		"wasm_cache_size": &v.WasmCacheSize, "wasm_memory_budget": &v.WasmMemoryBudget, "wasm_max_module_size": &v.WasmMaxModuleSize,
		"worker_max_header_size": &v.WorkerMaxHeaderSize}
	counts := map[string]*int{"max_archive_entries": &v.MaxArchiveEntries, "pool_size": &v.PoolSize,
		"worker_processes": &v.WorkerProcesses, "worker_max_files": &v.WorkerMaxFiles, "worker_log_rate": &v.WorkerLogRate,
		"worker_log_lines": &v.WorkerLogLines, "worker_fresh_concurrency": &v.WorkerFreshConcurrency, "worker_fresh_queue": &v.WorkerFreshQueue, "max_pending_domains": &v.MaxPendingDomains, "wasm_concurrency": &v.WasmConcurrency}
	strs := map[string]*string{"api_prefix": &v.APIPrefix, "state_dir": &v.StateDir, "root_key": &v.RootKey, "secrets_key": &v.SecretsKey,
		"secrets_key_old": &v.SecretsKeyOld,
		"session_ttl":     &v.SessionTTL, "audit_retention": &v.AuditRetention, "retire_delay": &v.RetireDelay, "split_header": &v.SplitHeader, "key_store": &v.KeyStore, "workers_url": &v.WorkersURL, "worker_user": &v.WorkerUser,
		"worker_group": &v.WorkerGroup, "scratch_dir": &v.ScratchDir, "worker_network": &v.WorkerNetwork, "worker_cpu": &v.WorkerCPU,
		"sync_url": &v.SyncURL, "sync_token": &v.SyncToken, "sync_interval": &v.SyncInterval,
		"workers_domain": &v.WorkersDomain, "js_runtime": &v.JSRuntime,
		"js_registry": &v.JSRegistry, "js_install_timeout": &v.JSInstallTimeout}
	seen := map[string]bool{}
	for d.NextBlock(0) {
		name := d.Val()
		def, known := definition(name)
		switch {
		case !known || !listed(def, site):
			if known && def.Scope == config.Store && site {
				return d.Errf("%s is a setting of the global runtime option only: write it in { runtime { package_store … } } at the top of the Caddyfile", name)
			}
			return d.Errf("unknown runtime setting %q; known settings: %s", name, knownSettings(site))
		case def.Scope == config.Site && !site:
			return d.Errf("%s is a setting of a site block: write it in the site's runtime directive, not in the global runtime option", name)
		case seen[name]:
			return d.Errf("%s is set twice", name)
		}
		seen[name] = true
		if name == "package_store" {
			raw, err := unmarshalPackageStore(d)
			if err != nil {
				return err
			}
			*store = raw
			continue
		}
		args := d.RemainingArgs()
		switch {
		case name == "key_store":
			if err := unmarshalKeyStore(d, v, args); err != nil {
				return err
			}
		case lists[name] != nil:
			if len(args) == 0 {
				return d.Errf("%s needs at least one value", name)
			}
			*lists[name] = args
		case sizes[name] != nil:
			if len(args) != 1 {
				return d.Errf("%s takes one size, e.g. 100MiB", name)
			}
			size, err := config.ParseSize(args[0])
			if err != nil {
				return d.Errf("%s %q: %v", name, args[0], err)
			}
			*sizes[name] = size
		case counts[name] != nil:
			if len(args) != 1 {
				return d.Errf("%s takes one number", name)
			}
			n, err := config.ParseCount(args[0])
			if err != nil {
				return d.Errf("%s %q: %v", name, args[0], err)
			}
			*counts[name] = n
		case strs[name] != nil:
			if len(args) != 1 {
				return d.Errf("%s takes exactly one value", name)
			}
			*strs[name] = args[0]
		}
	}
	return checkWritten(d, *v)
}

// definition returns the definition of the named setting, if there is one.
func definition(name string) (config.Definition, bool) {
	for _, def := range config.Definitions {
		if def.Name == name {
			return def, true
		}
	}
	return config.Definition{}, false
}

// firstCopyKey keys, in the adapter's state, the process-wide settings of the first runtime
// directive, which the others must repeat.
const firstCopyKey = "runtime.first_copy"

// firstCopy is what the adapter remembers of the first runtime directive: the process-wide
// settings written for it (the global option's and its own), and where it is.
type firstCopy struct {
	written config.AppValues
	at      caddyfile.Token
}

// checkCopy refuses, at adapt time, process-wide settings in a runtime directive (the
// deprecated form) that the global runtime option or another directive sets otherwise, or
// that another directive leaves to the option: one process has one value of each. The adapter sees every site block here; directives in
// named routes are adapted apart, and the App checks those as the config loads.
func checkCopy(h httpcaddyfile.Helper, own config.AppValues, at caddyfile.Token) error {
	var global config.AppValues
	if app, ok := h.Option(appID).(httpcaddyfile.App); ok {
		if err := json.Unmarshal(app.Value, &global); err != nil {
			return err
		}
	}
	if names := config.Differing(global, own, false); len(names) > 0 {
		return fmt.Errorf("%s: set in the global runtime option and, to another value, in this runtime directive; "+
			"remove them here, at %s:%d", strings.Join(names, ", "), at.File, at.Line)
	}
	written := own.Over(global)
	first, ok := h.State[firstCopyKey].(firstCopy)
	if !ok {
		h.State[firstCopyKey] = firstCopy{written, at}
		return nil
	}
	if names := config.Differing(first.written, written, true); len(names) > 0 {
		return fmt.Errorf("%s: this runtime directive sets these otherwise than the one at %s:%d, but they hold for the whole process: "+
			"%s, at %s:%d", strings.Join(names, ", "), first.at.File, first.at.Line, moveToApp, at.File, at.Line)
	}
	return nil
}

// unmarshalKeyStore reads key_store local|sync, and after sync an optional block of the
// primary's url, token and interval and its admin API's admin_url and admin_token (the sync_url,
// sync_token, sync_interval, sync_admin_url and sync_admin_token settings).
func unmarshalKeyStore(d *caddyfile.Dispenser, v *config.Values, args []string) error {
	if len(args) != 1 {
		return d.Errf("key_store takes local or sync")
	}
	v.KeyStore = args[0]
	fields := map[string]*string{"url": &v.SyncURL, "token": &v.SyncToken, "interval": &v.SyncInterval,
		"admin_url": &v.SyncAdminURL, "admin_token": &v.SyncAdminToken}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if !strings.EqualFold(args[0], "sync") {
			return d.Errf("only key_store sync takes a block (url, token, interval, admin_url, admin_token)")
		}
		sub := d.Val()
		field := fields[sub]
		switch {
		case field == nil:
			return d.Errf("unknown key_store sync setting %q; known settings: url, token, interval, admin_url, admin_token", sub)
		case *field != "":
			return d.Errf("key_store sync: %s is set twice", sub)
		case !d.NextArg():
			return d.ArgErr()
		}
		*field = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

// checkWritten validates the values written in the Caddyfile at adapt time, so mistakes are
// reported with their file and line; values holding placeholders are checked at provisioning.
func checkWritten(d *caddyfile.Dispenser, v config.Values) error {
	for _, field := range v.StringFields() {
		if strings.Contains(*field, "{") {
			*field = ""
		}
	}
	for _, list := range v.ListFields() {
		if hasPlaceholder(*list) {
			*list = nil
		}
	}
	if v.SyncURL == "" {
		v.SyncURL = "libsql://from-the-environment" // RUNTIME_AUTH_DB_SYNC_URL may give it at start
	}
	if _, err := config.Resolve(v, func(string) string { return "" }); err != nil {
		return d.Errf("%v", err)
	}
	return nil
}

func hasPlaceholder(list []string) bool {
	for _, s := range list {
		if strings.Contains(s, "{") {
			return true
		}
	}
	return false
}

// knownSettings lists the settings a block takes.
func knownSettings(site bool) string {
	var names []string
	for _, def := range config.Definitions {
		if listed(def, site) && (site || def.Scope != config.Site) {
			names = append(names, def.Name)
		}
	}
	return strings.Join(names, ", ")
}

// listed reports whether a block lists the setting among its own: a site's every per-site and
// process-wide setting, the global option's also the per-site ones (to refuse them by name)
// and package_store, whose fields go in its block.
func listed(def config.Definition, site bool) bool {
	if def.Scope == config.Store {
		return !site && def.Name == "package_store"
	}
	return true
}

// unmarshalPackageStore reads package_store <store> [{ … }], the store being a module of
// the runtime.package_stores namespace that reads its own block, and returns its JSON.
func unmarshalPackageStore(d *caddyfile.Dispenser) (json.RawMessage, error) {
	var names []string
	for _, m := range caddy.GetModules(storeNamespace) {
		names = append(names, m.ID.Name())
	}
	if !d.NextArg() {
		return nil, d.Errf("package_store takes the store: %s", strings.Join(names, " or "))
	}
	name := d.Val()
	if _, err := caddy.GetModule(storeNamespace + "." + name); err != nil {
		return nil, d.Errf("package_store %q: no such store; use %s", name, strings.Join(names, " or "))
	}
	unm, err := caddyfile.UnmarshalModule(d, storeNamespace+"."+name)
	if err != nil {
		return nil, err
	}
	return caddyconfig.JSONModuleObject(unm, "store", name, nil), nil
}

// UnmarshalCaddyfile reads the s3 package store's block, in the global runtime option:
//
//	package_store s3 {
//		endpoint          <URL; unset for AWS S3>
//		bucket            <bucket>
//		region            <region>
//		prefix            <folder in the bucket>
//		access_key_id     <key id, e.g. {env.RUNTIME_S3_ACCESS_KEY_ID}>
//		secret_access_key <secret, e.g. {env.RUNTIME_S3_SECRET_ACCESS_KEY}>
//		path_style        [on|off]
//	}
//
// Each setting left out falls back to its RUNTIME_S3_* environment variable.
func (s *S3Store) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the store's name
	if d.NextArg() {
		return d.Errf("package_store s3 takes a block of settings, not arguments")
	}
	fields := map[string]*string{"endpoint": &s.Endpoint, "bucket": &s.Bucket, "region": &s.Region, "prefix": &s.Prefix,
		"access_key_id": &s.AccessKeyID, "secret_access_key": &s.SecretAccessKey}
	seen := map[string]bool{}
	for d.NextBlock(0) {
		sub := d.Val()
		field := fields[sub]
		switch {
		case field == nil && sub != "path_style":
			return d.Errf("unknown package_store s3 setting %q; known settings: endpoint, bucket, region, prefix, access_key_id, secret_access_key, path_style", sub)
		case seen[sub]:
			return d.Errf("package_store s3: %s is set twice", sub)
		}
		seen[sub] = true
		args := d.RemainingArgs()
		if field != nil {
			if len(args) != 1 {
				return d.Errf("package_store s3: %s takes exactly one value", sub)
			}
			*field = args[0]
			continue
		}
		on, err := boolArgs(args)
		if err != nil {
			return d.Errf("package_store s3: path_style %v", err)
		}
		s.PathStyle = &on
	}
	return nil
}

// boolArgs reads the arguments of a boolean setting: nothing (on), or one of config.BoolWords.
// Every boolean setting of the runtime's Caddyfile is read by it.
func boolArgs(args []string) (bool, error) {
	switch len(args) {
	case 0:
		return true, nil
	case 1:
		return config.ParseBool(args[0])
	}
	return false, fmt.Errorf("takes one of %s, or nothing (on)", config.BoolWords)
}

// UnmarshalCaddyfile reads package_store local, which takes nothing more.
func (*LocalStore) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the store's name
	if d.NextArg() || d.NextBlock(0) {
		return d.Errf("package_store local takes no arguments and no block: only package_store s3 has settings")
	}
	return nil
}

// Interface guards
var (
	_ caddyfile.Unmarshaler = (*Handler)(nil)
	_ caddyfile.Unmarshaler = (*S3Store)(nil)
	_ caddyfile.Unmarshaler = (*LocalStore)(nil)
)
