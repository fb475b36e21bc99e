package caddymodule

import (
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-runtime/runtime/config"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("runtime", parseCaddyfile)
	// Before respond, so a catch-all "respond" or "file_server" in the same site serves what
	// the runtime passes on.
	httpcaddyfile.RegisterDirectiveOrder("runtime", httpcaddyfile.Before, "respond")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	err := m.UnmarshalCaddyfile(h.Dispenser)
	return m, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	runtime [<matcher>] {
//		api_prefix      <path>
//		worker_dirs     <dir...>
//		plugin_dirs     <dir...>
//		state_dir       <dir>
//		root_key        <key>
//		session_ttl     <duration>
//		max_upload_size <size>
//		max_unpacked_size <size>
//		max_archive_entries <count>
//		pool_size       <count>
//		key_store       local|sync
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.Errf("runtime takes no arguments, only a block of settings")
	}
	seen := map[string]bool{}
	for d.NextBlock(0) {
		name := d.Val()
		if seen[name] {
			return d.Errf("%s is set twice", name)
		}
		seen[name] = true
		args := d.RemainingArgs()
		var target *string
		switch name {
		case "worker_dirs", "plugin_dirs":
			if len(args) == 0 {
				return d.Errf("%s needs at least one folder", name)
			}
			if name == "worker_dirs" {
				h.WorkerDirs = args
			} else {
				h.PluginDirs = args
			}
			continue
		case "max_upload_size", "max_unpacked_size":
			if len(args) != 1 {
				return d.Errf("%s takes one size, e.g. 100MiB", name)
			}
			size, err := config.ParseSize(args[0])
			if err != nil {
				return d.Errf("%s %q: %v", name, args[0], err)
			}
			if name == "max_upload_size" {
				h.MaxUploadSize = size
			} else {
				h.MaxUnpackedSize = size
			}
			continue
		case "max_archive_entries", "pool_size":
			if len(args) != 1 {
				return d.Errf("%s takes one number", name)
			}
			n, err := config.ParseCount(args[0])
			if err != nil {
				return d.Errf("%s %q: %v", name, args[0], err)
			}
			if name == "pool_size" {
				h.PoolSize = n
			} else {
				h.MaxArchiveEntries = n
			}
			continue
		case "api_prefix":
			target = &h.APIPrefix
		case "state_dir":
			target = &h.StateDir
		case "root_key":
			target = &h.RootKey
		case "session_ttl":
			target = &h.SessionTTL
		case "key_store":
			target = &h.KeyStore
		default:
			return d.Errf("unknown runtime setting %q; known settings: %s", name, knownSettings())
		}
		if len(args) != 1 {
			return d.Errf("%s takes exactly one value", name)
		}
		*target = args[0]
	}
	return h.checkWritten(d)
}

// checkWritten validates the values written in the Caddyfile at adapt time, so mistakes are
// reported with their file and line; values holding placeholders are checked at provisioning.
func (h *Handler) checkWritten(d *caddyfile.Dispenser) error {
	v := h.Values
	for _, field := range []*string{&v.APIPrefix, &v.StateDir, &v.RootKey, &v.SessionTTL, &v.KeyStore} {
		if strings.Contains(*field, "{") {
			*field = ""
		}
	}
	if hasPlaceholder(v.WorkerDirs) || hasPlaceholder(v.PluginDirs) {
		v.WorkerDirs, v.PluginDirs = nil, nil
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
