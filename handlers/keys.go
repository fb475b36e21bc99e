package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/keystore"
)

// Error codes of the key routes.
const (
	CodeKeyNotFound         = "API_KEY_NOT_FOUND"
	CodeSelfRevokeForbidden = "SELF_REVOKE_FORBIDDEN"
	CodePrivilegeEscalation = "PRIVILEGE_ESCALATION"
	// CodeKeyStoreUnavailable answers a write to the key store (keys, sessions) in sync mode
	// while its primary cannot be reached.
	CodeKeyStoreUnavailable  = "KEY_STORE_UNAVAILABLE"
	keyValidationDescription = "Invalid request (BAD_REQUEST, MISSING_KEY_NAME, INVALID_KEY_NAME, INVALID_KEY_ROLE, MISSING_PERMISSIONS, INVALID_PERMISSION, INVALID_NAMESPACE, INVALID_EXPIRATION)"
)

// keysAPI serves the API keys: listing, creating and revoking them.
type keysAPI struct {
	*pipeline
	list bodyCache // the encoded listings, kept while the keys are unchanged
}

func (a *keysAPI) keyRoutes() []route {
	return []route{
		{
			method: "GET", path: "/keys", id: "listKeys", tag: "keys", permission: keystore.KeysRead,
			summary: "List API keys",
			description: "Keys that are not revoked, without secrets; expired keys carry expiresAt. A namespace-restricted key sees only keys within its namespaces. " +
				"Without limit and cursor, every key at once; with either, a page of keys by ascending id, the next page's cursor in nextCursor and the " + NextCursorHeader + " header.",
			params: pageParams("a key id; keys come by ascending id"),
			responses: []response{
				{status: http.StatusOK, description: "The keys, or a page of them", body: api.KeyList{}, headers: nextCursorHeaders},
				errorResponse(http.StatusBadRequest, "A malformed limit or cursor (BAD_REQUEST)"),
			},
			handle: a.listKeys,
		},
		{
			method: "GET", path: "/keys/meta", id: "keysMeta", tag: "keys", permission: keystore.KeysRead,
			summary:     "Roles, permissions and lifetimes for key forms",
			description: "What a form that creates a key offers: the roles and the permissions each holds, every permission, and the lifetimes a new key may be given.",
			responses:   []response{{status: http.StatusOK, description: "What a key can be", body: api.KeysMeta{}}},
			handle: func(w http.ResponseWriter, r *http.Request) error {
				meta := api.KeysMeta{Roles: keystore.Roles, Permissions: keystore.AllPermissions,
					ExpiresIn: keystore.ExpiresInChoices, RolePermissions: map[string][]string{}}
				for _, role := range keystore.Roles {
					meta.RolePermissions[role] = keystore.RolePermissions(role)
				}
				if store, err := a.keyStore(); err == nil {
					if st, ok := store.Sync(); ok {
						meta.RevokeWithin = int(math.Ceil(st.Interval.Seconds()))
					}
				}
				envelope.WriteJSON(w, http.StatusOK, meta)
				return nil
			},
		},
		{
			method: "POST", path: "/keys", id: "createKey", tag: "keys", permission: keystore.KeysCreate,
			summary:     "Create an API key",
			description: "The secret is returned once. A key cannot create a key holding a permission or namespace it lacks, nor one that expires after itself.",
			request:     &request{contentType: "application/json", body: api.CreateKeyRequest{}},
			responses: []response{
				{status: http.StatusOK, description: "Created", body: api.CreateKeyResponse{}},
				errorResponse(http.StatusBadRequest, keyValidationDescription),
				errorResponse(http.StatusForbidden, "The new key would exceed the creator's rights or outlive it (PRIVILEGE_ESCALATION)"),
				errorResponse(http.StatusRequestEntityTooLarge, "Body over 64 KiB (PAYLOAD_TOO_LARGE)"),
			},
			handle: a.createKey,
		},
		{
			method: "DELETE", path: "/keys/{id}", id: "revokeKey", tag: "keys", permission: keystore.KeysRevoke,
			summary:     "Revoke an API key",
			description: "Takes effect on the next request, and ends the key's sessions. A key cannot revoke itself, nor a key holding a permission or namespace it lacks.",
			responses: []response{
				{status: http.StatusOK, description: "Revoked", body: api.Success{}},
				errorResponse(http.StatusBadRequest, "The id is not a key id (BAD_REQUEST)"),
				errorResponse(http.StatusForbidden, "The key is the caller's own (SELF_REVOKE_FORBIDDEN), reaches outside the caller's namespaces (NAMESPACE_DENIED) "+
					"or holds a permission the caller lacks (PRIVILEGE_ESCALATION)"),
				errorResponse(http.StatusNotFound, "No active key with this id (API_KEY_NOT_FOUND)"),
			},
			handle: a.revokeKey,
		},
	}
}

func (a *keysAPI) listKeys(w http.ResponseWriter, r *http.Request) error {
	store, err := a.keyStore()
	if err != nil {
		return err
	}
	gen := store.ListGeneration() // before the listing: a change after it gives a new one
	p := principalOf(r.Context())
	return a.list.serve(w, r, p, cacheGen{list: gen}, true, keyListShape, func() ([]listRecord, error) {
		keys, err := store.List(r.Context())
		if err != nil {
			return nil, err
		}
		var out []listRecord
		for _, k := range keys {
			if p.Covers(k.Namespaces) {
				out = append(out, listRecord{order: keyOrder(k.ID), value: api.KeyRecord(k)})
			}
		}
		return out, nil
	})
}

// keyListShape answers GET keys as api.KeyList, paged by id; a key's cursor is its id.
var keyListShape = listShape{
	wrap: func(records []byte, next string) []byte {
		out := slices.Concat([]byte(`{"keys":[`), records, []byte("]"))
		if next != "" {
			quoted, _ := json.Marshal(next)
			out = append(append(out, `,"nextCursor":`...), quoted...)
		}
		return append(out, "}\n"...)
	},
	after: func(cursor string) (string, bool) {
		id, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || id < 1 {
			return "", false
		}
		return keyOrder(id), true
	},
	cursor: func(order string) string {
		id, _ := strconv.ParseInt(order, 10, 64)
		return strconv.FormatInt(id, 10)
	},
}

// keyOrder is the order key of the key with id: zero-padded, so that byte order is the ids'.
func keyOrder(id int64) string { return fmt.Sprintf("%019d", id) }

func (a *keysAPI) createKey(w http.ResponseWriter, r *http.Request) error {
	store, err := a.keyStore()
	if err != nil {
		return err
	}
	var req api.CreateKeyRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	p := principalOf(r.Context())
	now := time.Now()
	nk := keystore.NewKey{Name: req.Name, Description: req.Description, Role: req.Role,
		Permissions: req.Permissions, Namespaces: req.Namespaces}
	if nk.Namespaces == nil {
		// A restricted creator hands down its own namespaces.
		nk.Namespaces = p.Namespaces
	}
	if nk.ExpiresAt, err = keystore.ParseExpiresIn(req.ExpiresIn, now); err != nil {
		return inputError(err)
	}
	rec, err := keystore.Normalize(nk, now)
	if err != nil {
		return inputError(err)
	}
	if err := checkRank(p, rec, now); err != nil {
		a.audit(r, "key.create", rec.Name, "denied", &p)
		return err
	}
	// The entry is written with the key, in one transaction: a crash cannot leave a key that
	// the audit trail does not show.
	var entry keystore.AuditEntry
	created, err := store.CreateAudited(r.Context(), nk, func(k keystore.KeyRecord) keystore.AuditEntry {
		entry = successEntry(r, "key.create", keyTarget(k.Name, k.ID), &p, keyField(k))
		return entry
	})
	if err != nil {
		return inputError(err)
	}
	a.logAudit(entry, keyField(created.KeyRecord))
	envelope.WriteJSON(w, http.StatusOK, api.CreateKeyResponse{Success: true, Data: api.CreatedKey{
		ID: created.ID, Name: created.Name, Key: created.Secret, KeyPrefix: created.KeyPrefix, Role: created.Role}})
	return nil
}

func (a *keysAPI) revokeKey(w http.ResponseWriter, r *http.Request) error {
	store, id, err := a.storeAndID(r, "key")
	if err != nil {
		return err
	}
	p := principalOf(r.Context())
	target := keyTarget("", id)
	if !p.IsRoot && p.ID == id {
		a.audit(r, "key.revoke", target, "denied", &p)
		return envelope.Errorf(http.StatusForbidden, CodeSelfRevokeForbidden, "a key cannot revoke itself; use another key")
	}
	rec, err := store.Get(r.Context(), id)
	if errors.Is(err, keystore.ErrNotFound) {
		return envelope.Errorf(http.StatusNotFound, CodeKeyNotFound, "no active API key with id %d", id)
	}
	if err != nil {
		return err
	}
	target = keyTarget(rec.Name, id)
	if !p.Covers(rec.Namespaces) {
		a.audit(r, "key.revoke", target, "denied", &p)
		return envelope.Errorf(http.StatusForbidden, CodeNamespaceDenied, "key %d reaches namespaces outside this key's (%v)", id, p.Namespaces)
	}
	if missing := lacking(p, rec.Permissions); len(missing) > 0 {
		a.audit(r, "key.revoke", target, "denied", &p)
		return envelope.Errorf(http.StatusForbidden, CodePrivilegeEscalation,
			"key %d holds permissions this key lacks (%s); only a key holding all of its permissions, or the root key, may revoke it",
			id, strings.Join(missing, ", "))
	}
	entry := successEntry(r, "key.revoke", target, &p, keyField(rec))
	if err := store.RevokeAudited(r.Context(), id, &entry); errors.Is(err, keystore.ErrNotFound) {
		return envelope.Errorf(http.StatusNotFound, CodeKeyNotFound, "no active API key with id %d", id)
	} else if err != nil {
		return err
	}
	a.logAudit(entry, keyField(rec))
	a.removeStaleBootstrap(r.Context(), store)
	envelope.WriteJSON(w, http.StatusOK, api.Success{Success: true})
	return nil
}

// lacking returns the permissions in perms that p does not hold.
func lacking(p keystore.Principal, perms []string) []string {
	return slices.DeleteFunc(slices.Clone(perms), p.Has)
}

// checkRank refuses a new key that would exceed its creator p: a permission or a namespace p
// lacks, or a life beyond p's own expiry.
func checkRank(p keystore.Principal, rec keystore.KeyRecord, now time.Time) error {
	if missing := lacking(p, rec.Permissions); len(missing) > 0 {
		return envelope.Errorf(http.StatusForbidden, CodePrivilegeEscalation, "a key cannot grant permissions it lacks: %v", missing)
	}
	if !p.Covers(rec.Namespaces) {
		return envelope.Errorf(http.StatusForbidden, CodePrivilegeEscalation, "a key cannot grant namespaces outside its own (%v)", p.Namespaces)
	}
	if p.IsRoot || p.ExpiresAt == 0 || rec.ExpiresAt != 0 && rec.ExpiresAt <= p.ExpiresAt {
		return nil
	}
	choose := fmt.Sprintf("choose an expiresIn of at most %dd", (p.ExpiresAt-now.Unix())/86400)
	if p.ExpiresAt-now.Unix() < 86400 {
		choose = "a key expiring within a day cannot create keys"
	}
	return envelope.Errorf(http.StatusForbidden, CodePrivilegeEscalation,
		"the new key would outlive its creator, which expires at %s; %s, or create the key with a longer-lived key",
		time.Unix(p.ExpiresAt, 0).UTC().Format(time.RFC3339), choose)
}

// removeStaleBootstrap deletes the bootstrap key's file once its key no longer works, so no
// dead secret lingers on disk.
func (a *keysAPI) removeStaleBootstrap(ctx context.Context, store *keystore.Store) {
	why, err := store.RemoveStaleBootstrap(ctx)
	if err != nil {
		a.logger.Error("checking the bootstrap key file", zap.String("file", store.BootstrapPath()), zap.Error(err))
		return
	}
	if why != "" {
		a.logger.Info(keystore.BootstrapRemovedMessage, zap.String("file", store.BootstrapPath()), zap.String("reason", why))
	}
}

// keyTarget names a key in the audit trail as people know it: by name and id.
func keyTarget(name string, id int64) string {
	if name == "" {
		return fmt.Sprintf("key #%d", id)
	}
	return fmt.Sprintf("%s (#%d)", name, id)
}

// keyField describes the key an audited action touched.
func keyField(k keystore.KeyRecord) zap.Field {
	return zap.Dict("key", zap.Int64("id", k.ID), zap.String("name", k.Name), zap.String("key_prefix", k.KeyPrefix),
		zap.String("role", k.Role), zap.Strings("namespaces", k.Namespaces))
}

// inputError turns a refused key request into a 400 with its code.
func inputError(err error) error {
	var ie *keystore.InputError
	if errors.As(err, &ie) {
		return envelope.Errorf(http.StatusBadRequest, ie.Code, "%s", ie.Message)
	}
	return err
}
