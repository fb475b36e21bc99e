package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/openapi"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// Error codes of traffic splits.
const (
	CodeInvalidSplit     = "INVALID_SPLIT"
	CodeVersionDisabled  = "WORKER_VERSION_DISABLED"
	CodeInvalidCanary    = "INVALID_CANARY"
	CodeNoServedVersion  = "NO_SERVED_VERSION"
	CodeCanaryIsServed   = "CANARY_ALREADY_SERVED"
	trafficAuditAction   = "worker.traffic"
	canaryParam          = "canary"
	trafficSplitDocument = "A split sends each share of the worker's unpinned requests (/<name>/…) to its version; pinned requests (/<name>@<version>/…) are never split. " +
		"A visitor stays on one version: the runtime_visitor cookie on the workers' origin holds a random id, hashed with the worker's name into one of 100 buckets, " +
		"the newest version of the split taking the lowest buckets, so every instance agrees and growing the newest version's share keeps its visitors on it. " +
		"Requests without the cookie split by the header split_header names, or at random (and get the cookie). " +
		"Every worker answer names its version in X-Worker-Version. A version of the split that is disabled later, or that this instance holds back because " +
		"its health check runs or failed (failedVersions), leaves its share to the worker's activeVersion. " +
		"The split is kept in the key store: it holds across restarts and, in a cluster, on every instance."
)

// trafficAPI serves the traffic splits between versions of a worker, and puts a canary
// upload's split in force.
type trafficAPI struct {
	*pipeline
	workers     *packages.Catalog
	activations *workers.Activations            // which version is active here; nil: every one at once
	apply       func(ctx context.Context) error // puts the stored splits in force here; nil: not served here
}

func (a *trafficAPI) trafficRoutes() []route {
	path := "/workers/{scope}/{name}/traffic"
	badName := errorResponse(http.StatusBadRequest, "Malformed scope or name (INVALID_PACKAGE_NAME)")
	namespace := errorResponse(http.StatusForbidden, "The worker is outside the key's namespaces (NAMESPACE_DENIED)")
	notFound := errorResponse(http.StatusNotFound, "No such worker (WORKER_NOT_FOUND), or a version of the split is not installed (WORKER_VERSION_NOT_FOUND)")
	ok := response{status: http.StatusOK, description: "The split in force", body: api.WorkerTraffic{}}
	return []route{
		{
			method: "GET", path: path, id: "getWorkerTraffic", tag: "workers", permission: keystore.WorkersRead,
			summary:     "Read a worker's traffic split",
			description: "The split of the worker's unpinned requests between its versions; empty when none is in force. " + trafficSplitDocument,
			responses:   []response{ok, badName, namespace, errorResponse(http.StatusNotFound, "No such worker (WORKER_NOT_FOUND)")},
			handle:      a.getTraffic,
		},
		{
			method: "PUT", path: path, id: "setWorkerTraffic", tag: "workers", permission: keystore.WorkersInstall,
			summary: "Split a worker's traffic between versions",
			description: "Puts a split in force at once, in place of any before; promoting a version is a split of 100 to it (or DELETE, when it is the activeVersion). " +
				trafficSplitDocument,
			request: &request{contentType: "application/json", body: api.TrafficRequest{}},
			responses: []response{ok,
				errorResponse(http.StatusBadRequest, "A malformed body (BAD_REQUEST), a split that is empty, names a version twice, has a share outside 1 to 100 or does not sum to 100 (INVALID_SPLIT), or a malformed scope or name (INVALID_PACKAGE_NAME)"),
				namespace, notFound,
				errorResponse(http.StatusConflict, "A version of the split is disabled (WORKER_VERSION_DISABLED); enable it first"),
				errorResponse(http.StatusServiceUnavailable, "Cluster mode: the key store primary cannot be reached (KEY_STORE_UNAVAILABLE); nothing changed"),
			},
			handle: a.putTraffic,
		},
		{
			method: "DELETE", path: path, id: "deleteWorkerTraffic", tag: "workers", permission: keystore.WorkersInstall,
			summary:     "End a worker's traffic split",
			description: "Unpinned requests go to the worker's activeVersion again. Ending no split is not an error.",
			responses: []response{ok, badName, namespace, errorResponse(http.StatusNotFound, "No such worker (WORKER_NOT_FOUND)"),
				errorResponse(http.StatusServiceUnavailable, "Cluster mode: the key store primary cannot be reached (KEY_STORE_UNAVAILABLE); nothing changed")},
			handle: a.deleteTraffic,
		},
	}
}

// trafficWorker reads and authorizes the worker a traffic route acts on, which must be
// installed here.
func (a *trafficAPI) trafficWorker(r *http.Request) (packages.Unit, *keystore.Store, error) {
	return a.installedWorker(r, a.workers)
}

func (a *trafficAPI) getTraffic(w http.ResponseWriter, r *http.Request) error {
	u, store, err := a.trafficWorker(r)
	if err != nil {
		return err
	}
	t, err := store.Traffic.Get(r.Context(), u.Name)
	if err != nil {
		return err
	}
	envelope.WriteJSON(w, http.StatusOK, workerTraffic(t))
	return nil
}

func (a *trafficAPI) putTraffic(w http.ResponseWriter, r *http.Request) error {
	u, store, err := a.trafficWorker(r)
	if err != nil {
		return err
	}
	var body api.TrafficRequest
	if err := decodeJSON(w, r, &body); err != nil {
		return err
	}
	shares := make([]keystore.Share, len(body.Split))
	for i, sh := range body.Split {
		shares[i] = keystore.Share{Version: sh.Version, Percent: sh.Percent}
	}
	if err := keystore.CheckShares(shares); err != nil {
		return inputError(err)
	}
	for _, sh := range shares {
		v, ok := u.Find(sh.Version)
		switch {
		case !ok:
			installed := make([]string, len(u.Versions))
			for i, v := range u.Versions {
				installed[i] = v.Version
			}
			return envelope.Errorf(http.StatusNotFound, "WORKER_VERSION_NOT_FOUND", "worker %q has no version %q; its versions are %s: upload it first, or name one of them",
				u.Name, sh.Version, strings.Join(installed, ", "))
		case !v.Enabled:
			return envelope.Errorf(http.StatusConflict, CodeVersionDisabled, "version %s of worker %q is disabled; enable it before it takes a share", sh.Version, u.Name)
		}
	}
	return a.setTraffic(w, r, store, u.Name, shares)
}

func (a *trafficAPI) deleteTraffic(w http.ResponseWriter, r *http.Request) error {
	u, store, err := a.trafficWorker(r)
	if err != nil {
		return err
	}
	return a.setTraffic(w, r, store, u.Name, nil)
}

// setTraffic stores shares as the split of name (nil ends it), puts it in force here, audits
// it and answers the split in force.
func (a *trafficAPI) setTraffic(w http.ResponseWriter, r *http.Request, store *keystore.Store, name string, shares []keystore.Share) error {
	p := principalOf(r.Context())
	if _, err := a.storeTraffic(r, store, name, shares); err != nil {
		a.audit(r, trafficAuditAction, name, "failed", &p)
		return inputError(err)
	}
	a.audit(r, trafficAuditAction, name, "success", &p, splitField(shares))
	t, err := store.Traffic.Get(r.Context(), name)
	if err != nil {
		return err
	}
	envelope.WriteJSON(w, http.StatusOK, workerTraffic(t))
	return nil
}

// storeTraffic writes the split of name and puts it in force on this instance before it
// returns, so the next request here is served by it.
func (a *trafficAPI) storeTraffic(r *http.Request, store *keystore.Store, name string, shares []keystore.Share) (int64, error) {
	change, err := store.Traffic.Set(r.Context(), name, shares, principalOf(r.Context()))
	if err != nil {
		return 0, err
	}
	if a.apply != nil {
		if err := a.apply(r.Context()); err != nil {
			return 0, fmt.Errorf("the split is stored but not yet in force here: %w", err)
		}
	}
	return change, nil
}

// splitField describes a split in the audit trail: "1.2.0=90,1.3.0=10", "" for none.
func splitField(shares []keystore.Share) zap.Field {
	s := ""
	for i, sh := range shares {
		if i > 0 {
			s += ","
		}
		s += sh.Version + "=" + strconv.Itoa(sh.Percent)
	}
	return zap.String("split", s)
}

// workerTraffic is the API's record of a split, its shares newest version first.
func workerTraffic(t keystore.TrafficSplit) api.WorkerTraffic {
	out := api.WorkerTraffic{Name: t.Name, Split: []api.TrafficShare{}, ChangedBy: t.ChangedByPrefix, Change: t.Change}
	shares := slices.Clone(t.Shares)
	slices.SortFunc(shares, func(a, b keystore.Share) int { return packages.CompareVersions(b.Version, a.Version) })
	for _, sh := range shares {
		out.Split = append(out.Split, api.TrafficShare{Version: sh.Version, Percent: sh.Percent})
	}
	if t.UpdatedAt > 0 {
		out.UpdatedAt = time.Unix(t.UpdatedAt, 0).UTC().Format(time.RFC3339)
	}
	return out
}

// canaryParams documents ?canary on a worker upload.
var canaryParams = []openapi.Parameter{{Name: canaryParam, In: "query", Schema: &openapi.Schema{Type: "integer", Minimum: ptr(1.0), Maximum: ptr(99.0)},
	Description: "1 to 99: install the new version and, in the same step, send this percentage of unpinned requests to it and the rest to the " +
		"version served until then (the largest share of a split in force, else the worker's activeVersion), so it never serves everyone; " +
		"a process worker's canary gets its share only once it has passed its health check, and when it fails the check the upload answers 422 " +
		"HEALTHCHECK_FAILED and the split before the upload is put back (none, usually); " +
		"promote it with PUT traffic (100 to it) or DELETE traffic"}}

// canaryQuery reads ?canary: 0 when absent, else 1 to 99.
func canaryQuery(r *http.Request) (int, error) {
	v := r.URL.Query().Get(canaryParam)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 99 {
		return 0, envelope.Errorf(http.StatusBadRequest, CodeInvalidCanary, "query parameter canary is %q; use a whole percentage from 1 to 99", v)
	}
	return n, nil
}

// canarySplit returns the split an upload of version of worker name with ?canary=percent
// puts in force, and the split in force before: the rest goes to the version served to the
// most unpinned requests until then: the largest share of a split in force that this
// instance serves (enabled, not held by a health check), else the worker's active version
// (what serving chooses without a split).
func (a *trafficAPI) canarySplit(r *http.Request, store *keystore.Store, name, version string, percent int) (next, prev []keystore.Share, err error) {
	before, err := store.Traffic.Get(r.Context(), name)
	if err != nil {
		return nil, nil, err
	}
	u, _ := a.workers.Lookup(name)
	act := a.activations.Get(name)
	serves := func(v string) bool { ver, ok := u.Find(v); return ok && ver.Enabled && !act.Held(v) }
	served, most := "", 0
	for _, sh := range before.Shares {
		if sh.Percent > most && serves(sh.Version) {
			served, most = sh.Version, sh.Percent
		}
	}
	if v, ok := workers.ActiveVersion(u, act); served == "" && ok {
		served = v.Version
	}
	switch {
	case served == "":
		return nil, nil, envelope.Errorf(http.StatusConflict, CodeNoServedVersion,
			"worker %q serves no version yet, so a canary has nothing to share traffic with; upload it without canary", name)
	case served == version:
		return nil, nil, envelope.Errorf(http.StatusConflict, CodeCanaryIsServed,
			"version %s of worker %q is the version served now; a canary must be another version", version, name)
	}
	return []keystore.Share{{Version: served, Percent: 100 - percent}, {Version: version, Percent: percent}}, before.Shares, nil
}

// endTraffic ends the split of a worker that was removed, if it had one, so that a worker
// uploaded later under the name does not inherit it; a failure is logged (the split's
// versions are gone, so it splits nothing until they come back).
func (a *trafficAPI) endTraffic(r *http.Request, name string) {
	store, err := a.keyStore()
	if err != nil {
		return
	}
	if t, err := store.Traffic.Get(r.Context(), name); err != nil || len(t.Shares) == 0 {
		return
	}
	if _, err := a.storeTraffic(r, store, name, nil); err != nil {
		a.logger.Warn("the traffic split of a removed worker could not be ended; end it (DELETE traffic) before a worker of that name is uploaded",
			zap.String("worker", name), zap.Error(err))
	}
}

// restoreTraffic puts the split before a canary upload back when its install or its health
// check failed, and reports whether it did; a failure to is logged: the split then names a
// version that is not installed or is held back, whose share the active version serves.
func (a *trafficAPI) restoreTraffic(r *http.Request, store *keystore.Store, name string, before []keystore.Share) bool {
	if _, err := a.storeTraffic(r, store, name, before); err != nil {
		a.logger.Error("a canary upload failed, and the traffic split before it could not be put back; set it again (PUT traffic)",
			zap.String("worker", name), zap.Error(err))
		return false
	}
	p := principalOf(r.Context())
	a.audit(r, trafficAuditAction, name, "success", &p, splitField(before))
	return true
}

// canaryFailed adds to the answer of a canary upload whose health check failed what became of
// its split.
func (a *trafficAPI) canaryFailed(r *http.Request, store *keystore.Store, name string, before []keystore.Share, err error) error {
	var e *envelope.Error
	if !errors.As(err, &e) {
		return err
	}
	switch {
	case !a.restoreTraffic(r, store, name, before):
		e.Message += "\nThe canary's traffic split could not be removed; its share goes to the version served before. End it with DELETE traffic (rollout abort)."
	case len(before) == 0:
		e.Message += "\nThe canary's traffic split was removed: the version served before serves every request."
	default:
		e.Message += "\nThe canary's traffic split was removed, and the split in force before it put back: " + splitField(before).String + "."
	}
	return e
}

// canaryErrors adds the refusals of ?canary to a worker upload's.
func canaryErrors(rs []response) []response {
	out := slices.Clone(rs)
	for i, resp := range out {
		switch resp.status {
		case http.StatusBadRequest:
			out[i].description += "; a canary that is not a whole percentage from 1 to 99 (INVALID_CANARY)"
		case http.StatusConflict:
			out[i].description += "; with canary, a worker that serves no version yet (NO_SERVED_VERSION) or an upload of the version served now (CANARY_ALREADY_SERVED)"
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }
