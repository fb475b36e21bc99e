package caddymodule

import (
	"encoding/json"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/rewrite"

	"github.com/caddy-runtime/runtime/config"
)

func init() {
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
	matchers, err := h.ExtractMatcherSet()
	if err != nil {
		return nil, err
	}
	m := new(Handler)
	if err := m.UnmarshalCaddyfile(h.Dispenser); err != nil {
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
	if len(paths) != 1 {
		return "", nil
	}
	at, ok := strings.CutSuffix(paths[0], "/*")
	if !ok || at == "" || strings.Contains(at, "*") {
		return "", nil
	}
	return at, nil
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	runtime [<matcher>] {   # a path matcher /x/* mounts the runtime at /x
//		api_prefix      <path>
//		worker_dirs     <dir...>
//		plugin_dirs     <dir...>
//		state_dir       <dir>
//		root_key        <key>
//		session_ttl     <duration>
//		audit_retention <duration>
//		retire_delay    <duration>
//		max_upload_size <size>
//		max_unpacked_size <size>
//		max_archive_entries <count>
//		pool_size       <count>
//		key_store       local|sync [{
//			url      <libSQL primary URL>
//			token    <auth token, e.g. {env.RUNTIME_AUTH_DB_SYNC_TOKEN}>
//			interval <pull interval, e.g. 10s>
//		}]
//		serve           all|api|cpanel|workers...
//		workers_url     <url>
//		process_workers on|off|<@namespace...>
//		worker_user     <user>
//		worker_group    <group>
//		worker_read_dirs <dir...>
//		scratch_dir     <dir>
//		worker_network  host|isolated
//		worker_scratch  <size>
//		worker_memory   <size>
//		worker_processes <count>
//		worker_cpu      <cores>
//		worker_log_rate <lines per second>
//		worker_log_lines <lines kept per worker>
//		plugin_handlers <module...>
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.Errf("runtime takes no arguments, only a block of settings")
	}
	lists := map[string]*[]string{
		"worker_dirs": &h.WorkerDirs, "plugin_dirs": &h.PluginDirs, "worker_read_dirs": &h.WorkerReadDirs,
		"serve": &h.Serve, "process_workers": &h.ProcessWorkers, "plugin_handlers": &h.PluginHandlers,
	}
	sizes := map[string]*int64{"max_upload_size": &h.MaxUploadSize, "max_unpacked_size": &h.MaxUnpackedSize, "worker_memory": &h.WorkerMemory,
		"worker_scratch": &h.WorkerScratch}
	counts := map[string]*int{"max_archive_entries": &h.MaxArchiveEntries, "pool_size": &h.PoolSize,
		"worker_processes": &h.WorkerProcesses, "worker_log_rate": &h.WorkerLogRate,
		"worker_log_lines": &h.WorkerLogLines}
	strs := map[string]*string{"api_prefix": &h.APIPrefix, "state_dir": &h.StateDir, "root_key": &h.RootKey,
		"session_ttl": &h.SessionTTL, "audit_retention": &h.AuditRetention, "retire_delay": &h.RetireDelay, "key_store": &h.KeyStore, "workers_url": &h.WorkersURL, "worker_user": &h.WorkerUser,
		"worker_group": &h.WorkerGroup, "scratch_dir": &h.ScratchDir, "worker_network": &h.WorkerNetwork, "worker_cpu": &h.WorkerCPU,
		"sync_url": &h.SyncURL, "sync_token": &h.SyncToken, "sync_interval": &h.SyncInterval}
	seen := map[string]bool{}
	for d.NextBlock(0) {
		name := d.Val()
		if seen[name] {
			return d.Errf("%s is set twice", name)
		}
		seen[name] = true
		args := d.RemainingArgs()
		switch {
		case name == "key_store":
			if err := h.unmarshalKeyStore(d, args); err != nil {
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
		default:
			return d.Errf("unknown runtime setting %q; known settings: %s", name, knownSettings())
		}
	}
	return h.checkWritten(d)
}

// unmarshalKeyStore reads key_store local|sync, and after sync an optional block of the
// primary's url, token and interval (the sync_url, sync_token and sync_interval settings).
func (h *Handler) unmarshalKeyStore(d *caddyfile.Dispenser, args []string) error {
	if len(args) != 1 {
		return d.Errf("key_store takes local or sync")
	}
	h.KeyStore = args[0]
	fields := map[string]*string{"url": &h.SyncURL, "token": &h.SyncToken, "interval": &h.SyncInterval}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if !strings.EqualFold(args[0], "sync") {
			return d.Errf("only key_store sync takes a block (url, token, interval)")
		}
		sub := d.Val()
		field := fields[sub]
		switch {
		case field == nil:
			return d.Errf("unknown key_store sync setting %q; known settings: url, token, interval", sub)
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
func (h *Handler) checkWritten(d *caddyfile.Dispenser) error {
	v := h.Values
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

func knownSettings() string {
	names := make([]string, len(config.Definitions))
	for i, def := range config.Definitions {
		names[i] = def.Name
	}
	return strings.Join(names, ", ")
}

// Interface guard
var _ caddyfile.Unmarshaler = (*Handler)(nil)
