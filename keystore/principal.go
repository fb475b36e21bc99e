package keystore

import (
	"slices"
	"strings"
)

// AllNamespaces is the namespace list of a key with access to every unit.
const AllNamespaces = "*"

// Principal is whoever a credential resolves to: the root key (ID 0, IsRoot) or an API key.
// ExpiresAt is in Unix seconds, 0 for a key that never expires.
type Principal struct {
	ID          int64
	Name        string
	KeyPrefix   string
	Role        string
	Permissions []string
	Namespaces  []string
	IsRoot      bool
	ExpiresAt   int64

	memo *Memo // of the cached verification this principal came from; nil for Root()
}

// Memo returns the memo of the verification the principal came from: it lives as long as the
// store serves that verification from its cache. Nil (a no-op memo) for the root principal.
func (p Principal) Memo() *Memo { return p.memo }

// Root is the synthetic principal of the root key.
func Root() Principal {
	return Principal{
		Name: "root", KeyPrefix: "root", Role: RoleAdmin,
		Permissions: slices.Clone(AllPermissions), Namespaces: []string{AllNamespaces}, IsRoot: true,
	}
}

// Has reports whether the principal holds permission perm.
func (p Principal) Has(perm string) bool {
	return p.IsRoot || slices.Contains(p.Permissions, perm)
}

// Unrestricted reports whether the principal sees every namespace.
func (p Principal) Unrestricted() bool {
	return p.IsRoot || slices.Contains(p.Namespaces, AllNamespaces)
}

// CanAccess reports whether the principal may see and manage the unit (worker or plugin)
// named name: unrestricted keys reach every unit, restricted keys only units of their @scope
// namespaces.
func (p Principal) CanAccess(name string) bool {
	if p.Unrestricted() {
		return true
	}
	return slices.Contains(p.Namespaces, NamespaceOf(name))
}

// Covers reports whether every namespace in namespaces lies within the principal's own.
func (p Principal) Covers(namespaces []string) bool {
	if p.Unrestricted() {
		return true
	}
	for _, ns := range namespaces {
		if ns == AllNamespaces || !slices.Contains(p.Namespaces, ns) {
			return false
		}
	}
	return true
}

// NamespaceOf returns the @scope of a scoped unit name ("@team/app" → "@team"), or "" for an
// unscoped name, which belongs to no namespace.
func NamespaceOf(name string) string {
	if !strings.HasPrefix(name, "@") {
		return ""
	}
	scope, _, _ := strings.Cut(name, "/")
	return scope
}
