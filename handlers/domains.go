package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/hosts"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// Error codes of custom domains.
const (
	CodeInvalidDomain  = "INVALID_DOMAIN"
	CodeDomainReserved = "DOMAIN_RESERVED"
	CodeDomainTaken    = "DOMAIN_TAKEN"
	CodeDomainNotFound = "DOMAIN_NOT_FOUND"
	CodeTooManyPending = "TOO_MANY_PENDING_DOMAINS"
)

// domainsAPI serves the custom domains of workers: attaching, verifying, listing and
// detaching them.
type domainsAPI struct {
	*pipeline
	workers       *packages.Catalog     // the workers a domain may be attached to
	workersDomain hosts.Domain          // the workers_domain, whose hosts no custom domain may take
	resolvers     []string              // the DNS servers asked for TXT records; none: the system's
	pending       int                   // max_pending_domains per namespace; 0: no cap
	ownHosts      func() []string       // the host names serving the API
	changed       func(context.Context) // told after a change, before the answer; may be nil
}

func (a *domainsAPI) domainRoutes() []route {
	badName := errorResponse(http.StatusBadRequest, "Malformed scope or name (INVALID_PACKAGE_NAME)")
	namespace := errorResponse(http.StatusForbidden, "The worker is outside the key's namespaces (NAMESPACE_DENIED)")
	return []route{
		{
			method: "GET", path: "/workers/{scope}/{name}/domains", id: "listWorkerDomains", tag: "workers", permission: keystore.WorkersRead,
			summary:     "List a worker's custom domains",
			description: "Each domain with its state: pending until a DNS check finds the token in its TXT record, then verified and served. {scope} is _ or @scope.",
			responses: []response{
				{status: http.StatusOK, description: "The domains, by name", body: []api.WorkerDomain{}},
				badName, namespace,
			},
			handle: a.listDomains,
		},
		{
			method: "PUT", path: "/workers/{scope}/{name}/domains/{domain}", id: "attachWorkerDomain", tag: "workers", permission: keystore.WorkersInstall,
			summary: "Attach a custom domain to a worker, or check it again",
			description: "Attaches the domain and answers the token that a DNS TXT record `_runtime-challenge.<domain>` must hold; " +
				"the domain is served, and allowed a certificate on demand, once a check finds it. Each PUT checks the record " +
				"(DNS only, through the system's resolver or domain_resolvers); PUT again once the record is in place. " +
				"A claim still pending after 7 days is dropped. A domain another worker claims but has not verified blocks " +
				"nothing: this worker gets a token of its own, the first claim verified takes the domain and the others are dropped. " +
				"Refused: IP literals and names that are not DNS names (INVALID_DOMAIN), the API's own hosts and names under " +
				"workers_domain (DOMAIN_RESERVED), a domain verified for another worker (DOMAIN_TAKEN), a new claim past " +
				"max_pending_domains pending claims in the worker's namespace (TOO_MANY_PENDING_DOMAINS).",
			responses: []response{
				{status: http.StatusOK, description: "The domain, its token and the check's outcome", body: api.WorkerDomain{}},
				errorResponse(http.StatusBadRequest, "Malformed name, or a domain that cannot be attached (INVALID_PACKAGE_NAME, INVALID_DOMAIN, DOMAIN_RESERVED)"),
				namespace,
				errorResponse(http.StatusNotFound, "No such worker (WORKER_NOT_FOUND)"),
				errorResponse(http.StatusConflict, "The domain is verified for another worker (DOMAIN_TAKEN), or the namespace holds max_pending_domains pending claims (TOO_MANY_PENDING_DOMAINS)"),
			},
			handle: a.attachDomain,
		},
		{
			method: "DELETE", path: "/workers/{scope}/{name}/domains/{domain}", id: "detachWorkerDomain", tag: "workers", permission: keystore.WorkersInstall,
			summary:     "Detach a custom domain from a worker",
			description: "The domain is no longer served and gets no new certificate; one already issued stays cached until it expires.",
			responses: []response{
				{status: http.StatusOK, description: "Detached", body: api.Success{}},
				badName, namespace,
				errorResponse(http.StatusNotFound, "The worker holds no such domain (DOMAIN_NOT_FOUND)"),
			},
			handle: a.detachDomain,
		},
	}
}

// domainsOf reads and authorizes the worker whose domains a request is about, and returns the
// key store holding them.
func (a *domainsAPI) domainsOf(r *http.Request) (string, *keystore.Store, error) {
	name, _, err := workerTarget(r)
	if err != nil {
		return "", nil, err
	}
	store, err := a.keyStore()
	return name, store, err
}

func (a *domainsAPI) listDomains(w http.ResponseWriter, r *http.Request) error {
	name, store, err := a.domainsOf(r)
	if err != nil {
		return err
	}
	list, err := store.Domains.List(r.Context(), name)
	if err != nil {
		return err
	}
	out := make([]api.WorkerDomain, 0, len(list))
	for _, d := range list {
		out = append(out, domainRecord(d))
	}
	envelope.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (a *domainsAPI) attachDomain(w http.ResponseWriter, r *http.Request) error {
	name, _, err := workerTarget(r)
	if err != nil {
		return err
	}
	c, err := catalog(a.workers)
	if err != nil {
		return err
	}
	if _, ok := c.Find(name); !ok {
		return envelope.Errorf(http.StatusNotFound, "WORKER_NOT_FOUND", "no worker named %q", name)
	}
	own := []string{hosts.Normalize(r.Host)}
	if a.ownHosts != nil {
		own = append(own, a.ownHosts()...)
	}
	domain, err := hosts.CheckCustom(r.PathValue("domain"), a.workersDomain, own)
	p := principalOf(r.Context())
	refuse := func(status int, code string, err error) error {
		a.auditScoped(r, "worker.domain.attach", name+" "+r.PathValue("domain"), keystore.NamespaceOf(name), "failed", &p, zap.String("reason", err.Error()))
		return envelope.Errorf(status, code, "%v", err)
	}
	switch {
	case errors.Is(err, hosts.ErrOwnHost) || errors.Is(err, hosts.ErrUnderDomain):
		return refuse(http.StatusBadRequest, CodeDomainReserved, err)
	case err != nil:
		return refuse(http.StatusBadRequest, CodeInvalidDomain, err)
	}
	store, err := a.keyStore()
	if err != nil {
		return err
	}
	taken := func() error {
		return refuse(http.StatusConflict, CodeDomainTaken, errors.New(domain+" is verified for another worker; detach it there first"))
	}
	d, err := store.Domains.Attach(r.Context(), domain, name, a.pending, p)
	switch {
	case errors.Is(err, keystore.ErrDomainTaken):
		return taken()
	case errors.Is(err, keystore.ErrTooManyPending):
		return refuse(http.StatusConflict, CodeTooManyPending, fmt.Errorf("the namespace of %s holds %d custom domains pending verification, "+
			"the most max_pending_domains allows: verify or detach one first (a claim still pending after %d days is dropped)",
			name, a.pending, int(keystore.PendingDomainTTL.Hours()/24)))
	case err != nil:
		return err
	}
	if !d.Verified() {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		checkErr := a.verifier().Check(ctx, domain, d.Token)
		cancel()
		reason := ""
		if checkErr != nil {
			reason = checkErr.Error()
		}
		d, err = store.Domains.RecordCheck(r.Context(), domain, name, checkErr == nil, reason)
		// Another worker's claim was verified meanwhile, which dropped this one.
		if errors.Is(err, keystore.ErrDomainTaken) || errors.Is(err, keystore.ErrDomainNotFound) {
			return taken()
		}
		if err != nil {
			return err
		}
	}
	if a.changed != nil {
		a.changed(r.Context())
	}
	rec := domainRecord(d)
	a.auditScoped(r, "worker.domain.attach", name+" "+domain, keystore.NamespaceOf(name), "success", &p,
		zap.String("domain", domain), zap.String("state", rec.State))
	envelope.WriteJSON(w, http.StatusOK, rec)
	return nil
}

func (a *domainsAPI) detachDomain(w http.ResponseWriter, r *http.Request) error {
	name, store, err := a.domainsOf(r)
	if err != nil {
		return err
	}
	p := principalOf(r.Context())
	domain := hosts.Normalize(r.PathValue("domain"))
	err = a.removeDomain(r, store, domain, name, p)
	if errors.Is(err, keystore.ErrDomainNotFound) {
		return envelope.Errorf(http.StatusNotFound, CodeDomainNotFound, "worker %s holds no domain %s", name, domain)
	}
	if err != nil {
		return err
	}
	if a.changed != nil {
		a.changed(r.Context())
	}
	envelope.WriteJSON(w, http.StatusOK, api.Success{Success: true})
	return nil
}

// removeDomain detaches domain from worker name, by p, with its worker.domain.detach entry
// written in the same transaction and logged once it is.
func (a *domainsAPI) removeDomain(r *http.Request, store *keystore.Store, domain, name string, p keystore.Principal) error {
	field := zap.String("domain", domain)
	entry := audited(auditEntry(r, "worker.domain.detach", name+" "+domain, keystore.NamespaceOf(name), "success"), &p, field)
	if err := store.Domains.RemoveAudited(r.Context(), domain, name, p, &entry); err != nil {
		return err
	}
	a.logAudit(entry, field)
	return nil
}

// endDomains detaches the custom domains of name, a worker just removed whole; a failure is
// logged with what to do.
func (a *domainsAPI) endDomains(r *http.Request, name string) {
	store, err := a.keyStore()
	if err != nil {
		return
	}
	held, err := store.Domains.List(r.Context(), name)
	if err != nil {
		a.logger.Warn("the custom domains of a removed worker could not be read; detach them (DELETE domains) before a worker of that name is uploaded",
			zap.String("worker", name), zap.Error(err))
		return
	}
	p := principalOf(r.Context())
	for _, d := range held {
		if err := a.removeDomain(r, store, d.Domain, name, p); err != nil && !errors.Is(err, keystore.ErrDomainNotFound) {
			a.logger.Warn("a custom domain of a removed worker could not be detached; detach it (DELETE domains) before a worker of that name is uploaded",
				zap.String("worker", name), zap.String("domain", d.Domain), zap.Error(err))
		}
	}
	if len(held) > 0 && a.changed != nil {
		a.changed(r.Context())
	}
}

// verifier checks the TXT records of custom domains.
func (a *domainsAPI) verifier() hosts.Verifier { return hosts.Verifier{Resolvers: a.resolvers} }

func domainRecord(d keystore.WorkerDomain) api.WorkerDomain {
	rec := api.WorkerDomain{Domain: d.Domain, Worker: d.Worker, State: "pending", Record: hosts.ChallengeLabel + "." + d.Domain,
		Token: d.Token, URL: "https://" + d.Domain + "/", Error: d.CheckError}
	if d.Verified() {
		rec.State = "verified"
		rec.VerifiedAt = timestamp(time.Unix(d.VerifiedAt, 0))
	}
	if d.CheckedAt != 0 {
		rec.CheckedAt = timestamp(time.Unix(d.CheckedAt, 0))
	}
	return rec
}
