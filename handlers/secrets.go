package handlers

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/openapi"
	"github.com/caddy-runtime/runtime/internal/secrets"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/keystore"
)

// Error codes of the secrets routes.
const (
	// CodeSecretsNotConfigured answers every secrets route of a runtime without secrets_key.
	CodeSecretsNotConfigured = "SECRETS_NOT_CONFIGURED"
	CodeInvalidSecretName    = "INVALID_SECRET_NAME"
	CodeInvalidSecretValue   = "INVALID_SECRET_VALUE"
	CodeSecretNotFound       = "SECRET_NOT_FOUND"
	CodeTooManySecrets       = "TOO_MANY_SECRETS"
)

// SecretsOptions give the API the workers' secrets.
type SecretsOptions struct {
	// Key returns the key secrets are sealed with, nil when none is configured.
	Key func() *secrets.Key
	// Changed applies a change the API made to worker's secrets, numbered change, before it
	// answers: the worker's running processes are drained and restarted with them. It returns
	// the versions restarted.
	Changed func(worker string, change int64) []string
}

// secretsDoc is what every secrets route's description says.
const secretsDoc = "Secrets reach only the worker's processes, as environment variables, when they start; " +
	"a change drains and restarts the processes running. A value is never shown again, nor logged, audited or listed: " +
	"the audit trail records the name and who set it. {scope} is _ or @scope. A runtime without secrets_key answers 503 SECRETS_NOT_CONFIGURED."

// secretsAPI serves the workers' secrets: setting, listing the names of and removing them.
type secretsAPI struct {
	*pipeline
	sealing SecretsOptions // the key secrets are sealed with and the hook that applies a change
}

func (a *secretsAPI) secretRoutes() []route {
	secretParam := []openapi.Parameter{{Name: "secret", In: "path", Required: true,
		Description: "the secret's name: an environment variable name the runtime does not set itself (not PORT, HOST, TMPDIR, PATH, HOME, LISTEN_* or a CGI variable such as HTTP_*, SERVER_NAME, REMOTE_ADDR or PATH_INFO)",
		Schema:      &openapi.Schema{Type: "string"}}}
	common := []response{
		errorResponse(http.StatusBadRequest, "Malformed scope or worker name (INVALID_PACKAGE_NAME)"),
		errorResponse(http.StatusForbidden, "The worker is outside the key's namespaces (NAMESPACE_DENIED)"),
		errorResponse(http.StatusServiceUnavailable, "No secrets_key is configured (SECRETS_NOT_CONFIGURED); the message says how to configure one"),
	}
	changed := response{status: http.StatusOK, description: "Changed; the worker's running processes were restarted with the new secrets", body: api.SecretsChanged{}}
	badSecret := errorResponse(http.StatusBadRequest, "Malformed body, a name that is not an environment variable name or one the runtime sets (INVALID_SECRET_NAME), "+
		"a value over 32 KiB or with a NUL byte (INVALID_SECRET_VALUE), more than 100 secrets (TOO_MANY_SECRETS)")
	return []route{
		{
			method: "GET", path: "/workers/{scope}/{name}/secrets", id: "listWorkerSecrets", tag: "workers", permission: keystore.WorkersSecrets,
			summary:     "List a worker's secrets",
			description: "Names, when each was set and by which key; never a value, nor anything derived from one. A worker without secrets, or not installed, lists none. " + secretsDoc,
			responses:   append([]response{{status: http.StatusOK, description: "The worker's secrets, by name", body: api.WorkerSecrets{}}}, common...),
			handle:      a.listSecrets,
		},
		{
			method: "PUT", path: "/workers/{scope}/{name}/secrets/{secret}", id: "setWorkerSecret", tag: "workers", permission: keystore.WorkersSecrets,
			summary: "Set a worker's secret",
			description: "Seals the value with AES-256-GCM under secrets_key and stores it in the key store (replicated to every instance of a cluster). " +
				"A worker may get secrets before its first upload. " + secretsDoc,
			params:    secretParam,
			request:   &request{contentType: "application/json", body: api.SecretValue{}},
			responses: append([]response{changed, badSecret}, common...),
			handle:    a.setSecret,
		},
		{
			method: "PATCH", path: "/workers/{scope}/{name}/secrets", id: "changeWorkerSecrets", tag: "workers", permission: keystore.WorkersSecrets,
			summary:     "Set and remove several of a worker's secrets at once",
			description: "One change, which restarts the worker's processes once: deploy --secrets-file sends it. Every name to remove must exist. " + secretsDoc,
			request:     &request{contentType: "application/json", body: api.SecretsChange{}},
			responses:   append([]response{changed, badSecret, errorResponse(http.StatusNotFound, "A secret to remove does not exist (SECRET_NOT_FOUND)")}, common...),
			handle:      a.changeSecrets,
		},
		{
			method: "DELETE", path: "/workers/{scope}/{name}/secrets/{secret}", id: "deleteWorkerSecret", tag: "workers", permission: keystore.WorkersSecrets,
			summary:     "Remove a worker's secret",
			description: secretsDoc,
			params:      secretParam,
			responses: append([]response{changed, errorResponse(http.StatusBadRequest, "Malformed secret name (INVALID_SECRET_NAME)"),
				errorResponse(http.StatusNotFound, "The worker has no such secret (SECRET_NOT_FOUND)")}, common...),
			handle: a.deleteSecret,
		},
	}
}

// secretsTarget reads and authorizes the worker a secrets request acts on, and returns the
// key, refusing the request when none is configured.
func (a *secretsAPI) secretsTarget(r *http.Request) (string, *secrets.Key, error) {
	name, err := unitName(r)
	if err != nil {
		return "", nil, err
	}
	if err := authorizeUnit(principalOf(r.Context()), name); err != nil {
		return "", nil, err
	}
	var key *secrets.Key
	if a.sealing.Key != nil {
		key = a.sealing.Key()
	}
	if key == nil {
		return "", nil, envelope.Errorf(http.StatusServiceUnavailable, CodeSecretsNotConfigured,
			"no secrets_key is configured, so secrets cannot be sealed: set RUNTIME_SECRETS_KEY to 32 random bytes in base64 (%s), "+
				"or write secrets_key {env.RUNTIME_SECRETS_KEY} in the global runtime option, and restart the runtime", secrets.GenerateHint)
	}
	return name, key, nil
}

func (a *secretsAPI) listSecrets(w http.ResponseWriter, r *http.Request) error {
	worker, _, err := a.secretsTarget(r)
	if err != nil {
		return err
	}
	store, err := a.keyStore()
	if err != nil {
		return err
	}
	rows, err := store.Secrets.List(r.Context(), worker)
	if err != nil {
		return err
	}
	out := api.WorkerSecrets{Worker: worker, Secrets: make([]api.SecretRecord, 0, len(rows))}
	for _, row := range rows {
		out.Secrets = append(out.Secrets, api.SecretRecord{Name: row.Name, UpdatedAt: timestamp(time.Unix(row.UpdatedAt, 0)),
			UpdatedBy: api.SecretBy{ID: row.ChangedByID, Name: row.ChangedByName, KeyPrefix: row.ChangedByPrefix}})
	}
	envelope.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (a *secretsAPI) setSecret(w http.ResponseWriter, r *http.Request) error {
	worker, key, err := a.secretsTarget(r)
	if err != nil {
		return err
	}
	var body api.SecretValue
	if err := decodeJSON(w, r, &body); err != nil {
		return err
	}
	return a.applySecrets(w, r, worker, key, map[string]string{r.PathValue("secret"): body.Value}, nil)
}

func (a *secretsAPI) changeSecrets(w http.ResponseWriter, r *http.Request) error {
	worker, key, err := a.secretsTarget(r)
	if err != nil {
		return err
	}
	var body api.SecretsChange
	if err := decodeJSON(w, r, &body); err != nil {
		return err
	}
	if len(body.Set)+len(body.Unset) == 0 {
		return envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "the change names no secret: send set, unset or both")
	}
	return a.applySecrets(w, r, worker, key, body.Set, body.Unset)
}

func (a *secretsAPI) deleteSecret(w http.ResponseWriter, r *http.Request) error {
	worker, key, err := a.secretsTarget(r)
	if err != nil {
		return err
	}
	return a.applySecrets(w, r, worker, key, nil, []string{r.PathValue("secret")})
}

// applySecrets checks, seals and stores the change to worker's secrets, audits it by name,
// restarts the worker's processes and answers.
func (a *secretsAPI) applySecrets(w http.ResponseWriter, r *http.Request, worker string, key *secrets.Key, set map[string]string, unset []string) error {
	names := make([]string, 0, len(set))
	for name := range set {
		names = append(names, name)
	}
	slices.Sort(names)
	unset = append([]string{}, unset...)
	slices.Sort(unset)
	for _, name := range slices.Concat(names, unset) {
		if err := secrets.CheckName(name, workers.RuntimeVariable); err != nil {
			return envelope.Errorf(http.StatusBadRequest, CodeInvalidSecretName, "%v", err)
		}
	}
	if dup := slices.Compact(slices.Clone(unset)); len(dup) != len(unset) {
		return envelope.Errorf(http.StatusBadRequest, CodeInvalidSecretName, "a name is listed twice in unset")
	}
	for _, name := range unset {
		if _, ok := set[name]; ok {
			return envelope.Errorf(http.StatusBadRequest, CodeInvalidSecretName, "%s is both set and unset", name)
		}
	}
	sealed := make([]keystore.SealedSecret, 0, len(names))
	for _, name := range names {
		if err := secrets.CheckValue(set[name]); err != nil {
			return envelope.Errorf(http.StatusBadRequest, CodeInvalidSecretValue, "secret %s: %v", name, err)
		}
		s, err := key.Seal(worker, name, set[name])
		if err != nil {
			return err
		}
		sealed = append(sealed, keystore.SealedSecret{Name: name, KeyID: key.ID(), Sealed: s})
	}
	store, err := a.keyStore()
	if err != nil {
		return err
	}
	if len(names) > 0 {
		have, err := store.Secrets.List(r.Context(), worker)
		if err != nil {
			return err
		}
		count := len(have)
		for _, name := range names {
			if !slices.ContainsFunc(have, func(s keystore.SecretRecord) bool { return s.Name == name }) {
				count++
			}
		}
		if count-len(unset) > secrets.MaxPerWorker {
			return envelope.Errorf(http.StatusBadRequest, CodeTooManySecrets, "a worker has at most %d secrets; %s would have %d",
				secrets.MaxPerWorker, worker, count-len(unset))
		}
	}
	p := principalOf(r.Context())
	fields := []zap.Field{zap.Strings("set", names), zap.Strings("unset", unset)}
	entry := successEntry(r, "worker.secrets", worker, &p, fields...)
	change, err := store.Secrets.ChangeAudited(r.Context(), worker, sealed, unset, p, &entry)
	if err != nil {
		a.audit(r, "worker.secrets", worker, "failed", &p, fields...)
		if errors.Is(err, keystore.ErrSecretNotFound) {
			return envelope.Errorf(http.StatusNotFound, CodeSecretNotFound, "%s has no secret named %s", worker, joinNames(unset))
		}
		return inputError(err)
	}
	a.logAudit(entry, fields...)
	var body api.SecretsChanged
	body.Success, body.Data.Worker, body.Data.Set, body.Data.Unset, body.Data.Restarted = true, worker, names, unset, []string{}
	if a.sealing.Changed != nil {
		body.Data.Restarted = append(body.Data.Restarted, a.sealing.Changed(worker, change)...)
	}
	envelope.WriteJSON(w, http.StatusOK, body)
	return nil
}

// endSecrets removes the secrets of name, a worker just removed whole; a failure is logged
// with what to do.
func (a *secretsAPI) endSecrets(r *http.Request, name string) {
	store, err := a.keyStore()
	if err != nil {
		return
	}
	have, err := store.Secrets.List(r.Context(), name)
	if err == nil && len(have) == 0 {
		return
	}
	unset := make([]string, 0, len(have))
	for _, s := range have {
		unset = append(unset, s.Name)
	}
	p := principalOf(r.Context())
	fields := []zap.Field{zap.Strings("set", []string{}), zap.Strings("unset", unset)}
	entry := successEntry(r, "worker.secrets", name, &p, fields...)
	if err == nil {
		_, err = store.Secrets.ChangeAudited(r.Context(), name, nil, unset, p, &entry)
	}
	if err == nil {
		a.logAudit(entry, fields...)
		return
	}
	a.logger.Warn("the secrets of a removed worker could not be removed; remove them (DELETE secrets) before a worker of that name is uploaded",
		zap.String("worker", name), zap.Error(err))
	a.audit(r, "worker.secrets", name, "failed", &p, fields...)
}

// joinNames lists names for a message: "A", or "A, B or C" (one of them).
func joinNames(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	out := names[0]
	for _, n := range names[1 : len(names)-1] {
		out += ", " + n
	}
	return out + " or " + names[len(names)-1]
}
