package handlers

import (
	"errors"
	"net/http"

	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/packagestore"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// Error codes of cluster mode (a package store is configured).
const (
	// CodePackageStoreUnavailable answers an upload whose archive the package store could
	// not take (unreachable, failing, or refusing the credentials or the bucket): nothing was
	// installed or recorded.
	CodePackageStoreUnavailable = "PACKAGE_STORE_UNAVAILABLE"
	// CodeClusterReadOnly answers a file manager write to an uploaded unit: every instance
	// serves the archive as uploaded, so a change is a new version.
	CodeClusterReadOnly = "CLUSTER_READ_ONLY"
)

// clusterReadOnly is the file manager's refusal of writes to uploaded units in cluster mode.
var clusterReadOnly = &packages.Error{Kind: packages.Conflict, Code: CodeClusterReadOnly,
	Message: "uploaded units are read-only in cluster mode: every instance serves them as uploaded; deploy a new version instead"}

// Descriptions of cluster mode's answers in the route table.
const (
	storeUnavailableDoc = "Cluster mode: the package store cannot take the archive, unreachable or refusing the credentials or the bucket (PACKAGE_STORE_UNAVAILABLE, with Retry-After); nothing was installed or recorded"
	clusterReadOnlyDoc  = "Cluster mode: uploaded units are read-only, every instance serves them as uploaded; deploy a new version (CLUSTER_READ_ONLY)"
	clusterUploadDoc    = "In cluster mode the archive goes to the package store, then its row to the desired state every instance converges on, then it is installed here; the answer carries its change number."
	clusterChangeDoc    = "In cluster mode the change is written to the desired state every instance converges on, applied on this instance before the answer, " +
		"which carries its change number; a unit installed on this instance only (before it joined the cluster) is changed on its disk as without one, and the answer carries no change number."
)

// storeError answers a package store failure of an upload: 503 with Retry-After while the
// store cannot take the archive, 413 past the store's size limit; other errors pass.
func storeError(w http.ResponseWriter, err error) error {
	switch {
	case errors.Is(err, packagestore.ErrTooLarge):
		return envelope.Errorf(http.StatusRequestEntityTooLarge, packages.CodeTooLarge, "%v", err)
	case errors.Is(err, packagestore.ErrUnavailable), errors.Is(err, packagestore.ErrDenied), errors.Is(err, packagestore.ErrNoBucket):
		w.Header().Set("Retry-After", "5")
		return envelope.Errorf(http.StatusServiceUnavailable, CodePackageStoreUnavailable,
			"%v; nothing was installed or recorded; try again shortly", err)
	}
	return err
}

// unitKind is the desired state's kind of the units of c.
func unitKind(c *packages.Catalog) string {
	if c.Layout().Versioned {
		return keystore.UnitWorker
	}
	return keystore.UnitPlugin
}

// unitChange makes a change to a unit (version): in cluster mode through the desired state
// (shared), returning its change number, unless the unit is built-in here or has no live row
// (installed on this instance only), which change on this instance's disk (local) as without
// a cluster, with no change number.
func (a *unitsAPI) unitChange(c *packages.Catalog, name, version string, shared func(keystore.UnitRef) (int64, error), local func() error) (int64, error) {
	if a.cluster == nil {
		return 0, local()
	}
	if u, err := c.Lookup(name); err == nil && u.Dir.BuiltIn {
		return 0, local()
	}
	change, err := shared(keystore.UnitRef{Kind: unitKind(c), Name: name, Version: version})
	if errors.Is(err, keystore.ErrUnitNotFound) {
		return 0, local()
	}
	return change, err
}

// removeUnit removes a unit (version): see unitChange. In cluster mode, a whole unit's trees
// that no row covered (installed on this instance only) go too, as the request asked.
func (a *unitsAPI) removeUnit(r *http.Request, c *packages.Catalog, name, version string, local func() error) error {
	change, err := a.unitChange(c, name, version, func(ref keystore.UnitRef) (int64, error) {
		return a.cluster.Remove(r.Context(), ref, principalOf(r.Context()))
	}, local)
	if err != nil || change == 0 || version != "" {
		return err
	}
	if _, err := c.Lookup(name); err == nil {
		return local()
	}
	return nil
}
