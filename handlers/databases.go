package handlers

import (
	"net/http"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/openapi"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// purgeParam documents ?purge on the removal of a worker whole.
var purgeParam = []openapi.Parameter{{Name: "purge", In: "query", Schema: &openapi.Schema{Type: "string", Enum: []any{"1", "true", "0", "false"}},
	Description: "1 or true: remove the worker's own database too (manifest database: true), for good; audited as worker.database.purge. " +
		"Without it the database is kept, and a worker uploaded again under the name finds its rows"}}

// databaseRoute is GET workers/{scope}/{name}/database.
func (a *unitsAPI) databaseRoute() route {
	return route{
		method: "GET", path: "/workers/{scope}/{name}/database", id: "workerDatabase", tag: "workers", permission: keystore.WorkersRead,
		summary: "Show a worker's database",
		description: "The worker's own database (manifest database: true), measured now: where it is, the bytes it holds and may hold " +
			"(limits.database, capped by worker_database_size), and why the worker was last stopped or refused for it. It outlives the " +
			"worker's versions and processes, and its removal unless purge is asked for.",
		responses: []response{
			{status: http.StatusOK, description: "The database", body: api.WorkerDatabaseBody{}},
			errorResponse(http.StatusNotFound, "No such worker, or no version of it has database: true (WORKER_NOT_FOUND)"),
			errorResponse(http.StatusForbidden, "The worker is outside the key's namespaces (NAMESPACE_DENIED)"),
		},
		handle: a.showDatabase,
	}
}

func (a *unitsAPI) showDatabase(w http.ResponseWriter, r *http.Request) error {
	c, err := catalog(a.workers)
	if err != nil {
		return err
	}
	name, _, err := workerTarget(r)
	if err != nil {
		return err
	}
	u, err := c.Lookup(name)
	if err != nil {
		return packageError(err)
	}
	limit, ok := a.databaseLimit(u)
	if !ok || a.databases == nil {
		return envelope.Errorf(http.StatusNotFound, "WORKER_NOT_FOUND", "no version of %s has database: true in its manifest", name)
	}
	info := a.databases.Info(r.Context(), name)
	envelope.WriteJSON(w, http.StatusOK, api.WorkerDatabaseBody{Success: true,
		Data: api.WorkerDatabase{Worker: name, Mode: info.Mode, Size: info.Size, Limit: limit, Error: info.Error}})
	return nil
}

// databaseLimit returns the limit of the database of u's newest version with database: true,
// and whether it has one.
func (a *unitsAPI) databaseLimit(u packages.Unit) (int64, bool) {
	for i := len(u.Versions) - 1; i >= 0; i-- {
		if m, err := workers.ReadManifest(u.Versions[i].Metadata); err == nil && m.Database {
			return m.DatabaseLimit(a.databaseCap), true
		}
	}
	return 0, false
}

// databaseMode is the record's database: the mode when a version of u has database: true.
func (a *unitsAPI) databaseMode(u packages.Unit) string {
	if _, ok := a.databaseLimit(u); ok && a.databases != nil {
		return a.databases.Mode()
	}
	return ""
}

// purgeDatabase removes name's database after the worker was removed whole, audited.
func (a *unitsAPI) purgeDatabase(r *http.Request, name string) error {
	if a.databases == nil {
		return nil
	}
	p := principalOf(r.Context())
	if err := a.databases.Purge(r.Context(), name); err != nil {
		a.audit(r, "worker.database.purge", name, "failed", &p)
		return err
	}
	a.audit(r, "worker.database.purge", name, "success", &p)
	return nil
}
