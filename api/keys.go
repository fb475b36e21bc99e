package api

// Principal is whoever a credential resolves to.
type Principal struct {
	ID          int64    `json:"id" doc:"key record id; 0 for the root principal"`
	Name        string   `json:"name"`
	KeyPrefix   string   `json:"keyPrefix" doc:"leading characters of the key; the secret is never exposed"`
	Role        string   `json:"role" enum:"admin,editor,viewer,custom"`
	Permissions []string `json:"permissions"`
	Namespaces  []string `json:"namespaces" doc:"[\"*\"] for full access, else the @scope namespaces the key may see and manage"`
	IsRoot      bool     `json:"isRoot" doc:"true only for the root key"`
	ExpiresAt   int64    `json:"expiresAt,omitempty" doc:"Unix seconds; absent for keys that never expire"`
}

// Session is the body of the session endpoints.
type Session struct {
	Authenticated bool           `json:"authenticated"`
	Principal     Principal      `json:"principal"`
	Session       *SessionRecord `json:"session,omitempty" doc:"the cookie session the request came with; absent for a key sent in a header or a key-valued cookie"`
}

// SessionRecord is a session as listed, without its token.
type SessionRecord struct {
	ID         int64  `json:"id"`
	CreatedAt  int64  `json:"createdAt" doc:"Unix seconds"`
	ExpiresAt  int64  `json:"expiresAt" doc:"Unix seconds; the server refuses the session from then on"`
	LastSeenAt int64  `json:"lastSeenAt" doc:"Unix seconds; written at most once a minute"`
	UserAgent  string `json:"userAgent,omitempty" doc:"the User-Agent of the login request"`
	Current    bool   `json:"current" doc:"true for the session this request came with"`
}

// SessionList is the body of GET admin/sessions.
type SessionList struct {
	Sessions []SessionRecord `json:"sessions"`
}

// SessionsEnded is the body of DELETE admin/sessions.
type SessionsEnded struct {
	Success bool `json:"success"`
	Data    struct {
		Ended int `json:"ended" doc:"how many sessions were ended"`
	} `json:"data"`
}

// LoginRequest exchanges a key for a session cookie.
type LoginRequest struct {
	Key *string `json:"key" doc:"the root key or an API key"`
}

// KeyRecord is a key as listed, without its secret.
type KeyRecord struct {
	ID          int64    `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	KeyPrefix   string   `json:"keyPrefix"`
	Role        string   `json:"role" enum:"admin,editor,viewer,custom"`
	Permissions []string `json:"permissions"`
	Namespaces  []string `json:"namespaces"`
	CreatedAt   int64    `json:"createdAt" doc:"Unix seconds"`
	LastUsedAt  int64    `json:"lastUsedAt,omitempty" doc:"Unix seconds; absent until first use"`
	ExpiresAt   int64    `json:"expiresAt,omitempty" doc:"Unix seconds; absent for keys that never expire"`
}

// KeyList is the body of GET keys.
type KeyList struct {
	Keys []KeyRecord `json:"keys"`
	// NextCursor extends the spec's body, on pages alone: the whole listing never has it.
	NextCursor string `json:"nextCursor,omitempty" doc:"on a page (limit or cursor given) that is not the last: pass as cursor for the next page"`
}

// KeysMeta lists what a key form offers.
type KeysMeta struct {
	Roles           []string            `json:"roles"`
	Permissions     []string            `json:"permissions"`
	ExpiresIn       []string            `json:"expiresIn" doc:"suggested lifetimes; any <n>d, <n>w, <n>m (30 days) or <n>y is accepted"`
	RolePermissions map[string][]string `json:"rolePermissions" doc:"the permissions each role grants; custom keys choose theirs"`
	RevokeWithin    int                 `json:"revokeWithin,omitempty" doc:"sync mode only: the seconds within which a revocation reaches every instance (the key store's sync_interval; on the instance that revokes, at once); absent with a local key store, where a revocation takes effect on the next request"`
}

// CreateKeyRequest creates a key.
type CreateKeyRequest struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Role        string   `json:"role,omitempty" enum:"admin,editor,viewer,custom" doc:"default editor"`
	Permissions []string `json:"permissions,omitempty" doc:"role custom only: the permissions the key holds"`
	ExpiresIn   string   `json:"expiresIn,omitempty" doc:"never (default), or <n>d, <n>w, <n>m (30 days), <n>y"`
	Namespaces  []string `json:"namespaces,omitempty" doc:"[\"*\"] or @scope names; default: the creator's namespaces"`
}

// CreatedKey is a new key with its secret, shown this once.
type CreatedKey struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	Key       string `json:"key" doc:"the full secret; it is never shown again"`
	KeyPrefix string `json:"keyPrefix"`
	Role      string `json:"role"`
}

// CreateKeyResponse is the body of POST keys.
type CreateKeyResponse struct {
	Success bool       `json:"success"`
	Data    CreatedKey `json:"data"`
}

// AuditEntry is one audited action.
type AuditEntry struct {
	ID         int64          `json:"id"`
	Time       string         `json:"time" format:"date-time"`
	Actor      *AuditActor    `json:"actor,omitempty" doc:"who acted; absent when nobody was authenticated (a refused login)"`
	Action     string         `json:"action" doc:"e.g. session.login, key.create, key.revoke, worker.upload, worker.enable, worker.disable, worker.delete, worker.restart, worker.traffic, worker.cron.pause, worker.cron.resume, plugin.upload, plugin.reload, files.upload"`
	Target     string         `json:"target" doc:"the object as people know it: a key as name (#id), a unit as name@version, a file by its path"`
	Outcome    string         `json:"outcome" enum:"success,denied,failed"`
	RequestID  string         `json:"requestId" doc:"the X-Request-Id of the request, as in Caddy's access log"`
	RemoteAddr string         `json:"remoteAddr" doc:"the client's address (Caddy's client IP, which honours trusted_proxies); other for refused sign-ins past the first 1000 addresses of a minute"`
	Details    map[string]any `json:"details" doc:"what else the action's audit line says, e.g. count for refused sign-ins, one entry per address and minute; never a secret"`
}

// AuditActor is who did an audited action.
type AuditActor struct {
	ID        int64  `json:"id" doc:"key id; 0 for the root key"`
	Name      string `json:"name"`
	KeyPrefix string `json:"keyPrefix"`
}

// AuditPage is a page of the audit trail, newest first.
type AuditPage struct {
	Entries    []AuditEntry `json:"entries"`
	NextCursor string       `json:"nextCursor,omitempty" doc:"pass as cursor for the next (older) page; absent on the last page"`
}
