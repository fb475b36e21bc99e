package handlers

import (
	"net/http"
	"strconv"
	"time"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/openapi"
	"github.com/caddy-runtime/runtime/keystore"
)

// Bounds of an audit page.
const (
	defaultAuditLimit = 50
	maxAuditLimit     = 500
)

// auditAPI serves the audit trail's listing; the pipeline writes the trail.
type auditAPI struct {
	*pipeline
}

func (a *auditAPI) auditRoutes() []route {
	str := &openapi.Schema{Type: "string"}
	return []route{{
		method: "GET", path: "/audit", id: "listAudit", tag: "keys", permission: keystore.KeysRead,
		summary: "Read the audit trail",
		description: "Audited actions (logins and logouts, key creation and revocation, uploads, enable and disable, " +
			"removals, file manager writes, plugin reloads, restarts), newest first, kept for audit_retention. " +
			"A key restricted to namespaces sees only the entries about units of its namespaces.",
		params: []openapi.Parameter{
			{Name: "action", In: "query", Description: "only this action, or a family ending in a dot (worker.)", Schema: str},
			{Name: "actor", In: "query", Description: "only actions of the key with this name or key prefix", Schema: str},
			{Name: "target", In: "query", Description: "only entries whose target contains this text", Schema: str},
			{Name: "since", In: "query", Description: "only entries at or after this time (RFC 3339)", Schema: &openapi.Schema{Type: "string", Format: "date-time"}},
			{Name: "until", In: "query", Description: "only entries before this time (RFC 3339)", Schema: &openapi.Schema{Type: "string", Format: "date-time"}},
			{Name: "limit", In: "query", Description: "entries per page, 1 to 500 (default 50)", Schema: &openapi.Schema{Type: "integer"}},
			{Name: "cursor", In: "query", Description: "the nextCursor of the previous page", Schema: str},
		},
		responses: []response{
			{status: http.StatusOK, description: "A page of entries", body: api.AuditPage{}},
			errorResponse(http.StatusBadRequest, "A malformed query parameter (BAD_REQUEST)"),
		},
		handle: a.listAudit,
	}}
}

func (a *auditAPI) listAudit(w http.ResponseWriter, r *http.Request) error {
	store, err := a.keyStore()
	if err != nil {
		return err
	}
	q, err := auditQuery(r)
	if err != nil {
		return err
	}
	if p := principalOf(r.Context()); !p.Unrestricted() {
		q.Scopes = append([]string{}, p.Namespaces...)
	}
	entries, more, err := store.Audit.List(r.Context(), q)
	if err != nil {
		return err
	}
	page := api.AuditPage{Entries: make([]api.AuditEntry, len(entries))}
	for i, e := range entries {
		out := api.AuditEntry{ID: e.ID, Time: e.Time.UTC().Format(time.RFC3339Nano), Action: e.Action, Target: e.Target,
			Outcome: e.Outcome, RequestID: e.RequestID, RemoteAddr: e.RemoteAddr, Details: e.Details}
		if out.Details == nil {
			out.Details = map[string]any{}
		}
		if e.Actor != nil {
			out.Actor = &api.AuditActor{ID: e.Actor.ID, Name: e.Actor.Name, KeyPrefix: e.Actor.KeyPrefix}
		}
		page.Entries[i] = out
	}
	if more {
		page.NextCursor = strconv.FormatInt(entries[len(entries)-1].ID, 10)
	}
	envelope.WriteJSON(w, http.StatusOK, page)
	return nil
}

// auditQuery reads the query parameters of GET audit.
func auditQuery(r *http.Request) (keystore.AuditQuery, error) {
	query := r.URL.Query()
	q := keystore.AuditQuery{Action: query.Get("action"), Actor: query.Get("actor"), Target: query.Get("target"), Limit: defaultAuditLimit}
	bad := func(name, why string) error {
		return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "query parameter %s is %q; %s", name, query.Get(name), why)
	}
	for name, t := range map[string]*time.Time{"since": &q.Since, "until": &q.Until} {
		if v := query.Get(name); v != "" {
			var err error
			if *t, err = time.Parse(time.RFC3339Nano, v); err != nil {
				return q, bad(name, "use an RFC 3339 time such as 2026-01-02T15:04:05Z")
			}
		}
	}
	if v := query.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditLimit {
			return q, bad("limit", "use a number from 1 to 500")
		}
		q.Limit = n
	}
	if v := query.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return q, bad("cursor", "pass the nextCursor of the previous page")
		}
		q.Before = n
	}
	return q, nil
}
