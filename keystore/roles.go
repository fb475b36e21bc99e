package keystore

import "slices"

// Permissions.
const (
	WorkersRead    = "workers:read"
	WorkersInstall = "workers:install"
	WorkersRemove  = "workers:remove"
	WorkersRestart = "workers:restart"
	// WorkersSecrets sets, lists (by name) and removes workers' secrets.
	WorkersSecrets = "workers:secrets"
	PluginsRead    = "plugins:read"
	PluginsInstall = "plugins:install"
	PluginsRemove  = "plugins:remove"
	PluginsConfig  = "plugins:config"
	KeysRead       = "keys:read"
	KeysCreate     = "keys:create"
	KeysRevoke     = "keys:revoke"
)

// Roles.
const (
	RoleAdmin  = "admin"
	RoleEditor = "editor"
	RoleViewer = "viewer"
	RoleCustom = "custom"
)

// AllPermissions lists every permission, in the order forms show them.
var AllPermissions = []string{
	WorkersRead, WorkersInstall, WorkersRemove, WorkersRestart, WorkersSecrets,
	PluginsRead, PluginsInstall, PluginsRemove, PluginsConfig,
	KeysRead, KeysCreate, KeysRevoke,
}

// Roles lists the roles; custom takes its permissions from the key.
var Roles = []string{RoleAdmin, RoleEditor, RoleViewer, RoleCustom}

// DefaultRole is the role of a key created without one.
const DefaultRole = RoleEditor

var rolePermissions = map[string][]string{
	RoleAdmin: AllPermissions,
	RoleEditor: {
		WorkersRead, WorkersInstall, WorkersRemove, WorkersRestart, WorkersSecrets,
		PluginsRead, PluginsInstall, PluginsRemove, PluginsConfig,
	},
	RoleViewer: {WorkersRead, PluginsRead, KeysRead},
	RoleCustom: {},
}

// RolePermissions returns the permissions a role grants (none for custom, whose keys carry
// their own). The slice must not be modified.
func RolePermissions(role string) []string { return rolePermissions[role] }

// KnownPermission reports whether p is a permission.
func KnownPermission(p string) bool { return slices.Contains(AllPermissions, p) }

// KnownRole reports whether r is a role.
func KnownRole(r string) bool { _, ok := rolePermissions[r]; return ok }
