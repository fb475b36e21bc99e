package handlers

import (
	"encoding/base64"
	"net/http"
	"slices"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

func (a *unitsAPI) workerRoutes() []route {
	notFound := errorResponse(http.StatusNotFound, "No such worker or version (WORKER_NOT_FOUND, WORKER_VERSION_NOT_FOUND)")
	namespace := errorResponse(http.StatusForbidden, "The worker is outside the key's namespaces (NAMESPACE_DENIED)")
	badName := errorResponse(http.StatusBadRequest, "Malformed scope, name or version (INVALID_PACKAGE_NAME, INVALID_PACKAGE_VERSION)")
	toggle := func(enabled bool) route {
		verb := map[bool]string{true: "enable", false: "disable"}[enabled]
		return route{
			method: "POST", path: "/workers/{scope}/{name}/{version}/" + verb, id: verb + "Worker", tag: "workers",
			permission: keystore.WorkersInstall,
			summary:    map[bool]string{true: "Serve a worker version again", false: "Stop serving a worker version"}[enabled],
			description: "Writes enabled in that version's manifest.yaml (created when only package.json exists), keeping " +
				"comments and other keys. {scope} is _ for an unscoped worker, else @scope. Takes effect without a restart. " +
				map[bool]string{true: activationDoc, false: ""}[enabled] + clusterChangeDoc,
			responses: append([]response{
				{status: http.StatusOK, description: "The version's new state", body: api.WorkerToggled{}},
				notFound,
			}, toggleErrors("worker", enabled, badName, namespace, healthcheckFailed)...),
			handle: func(w http.ResponseWriter, r *http.Request) error { return a.toggleWorker(w, r, enabled) },
		}
	}
	remove := func(path, id, summary, forbidden string) route {
		return route{
			method: "DELETE", path: path, id: id, tag: "workers", permission: keystore.WorkersRemove, summary: summary,
			description: clusterChangeDoc,
			responses: []response{
				{status: http.StatusOK, description: "Removed", body: api.Success{}},
				badName, errorResponse(http.StatusForbidden, forbidden), notFound,
			},
			handle: a.deleteWorker,
		}
	}
	return []route{
		{
			method: "GET", path: "/workers", id: "listWorkers", tag: "workers", permission: keystore.WorkersRead,
			summary: "List workers",
			description: "Workers found in worker_dirs, filtered to the key's namespaces. Each record's state says in one word what its served version " +
				"really does on this instance: serving, failing (it failed its check and nothing healthier exists, so it is served all the same, and " +
				"activeVersion is absent), crash-looping, disabled or not-started. Without limit and cursor, every worker at once; " +
				"with either, a page of workers by name (byte order), the same array, with the next page's cursor in the " + NextCursorHeader + " header.",
			params: pageParams("opaque; workers come by name"),
			responses: []response{
				{status: http.StatusOK, description: "The workers, or a page of them", body: []api.WorkerRecord{}, headers: nextCursorHeaders},
				errorResponse(http.StatusBadRequest, "A malformed limit or cursor (BAD_REQUEST)"),
			},
			handle: a.listWorkers,
		},
		{
			method: "POST", path: "/workers/upload", id: "uploadWorker", tag: "workers", permission: keystore.WorkersInstall,
			summary: "Upload a worker",
			description: "Installs the archive at <workerDir>/<name>/<version>/, replacing an existing install of that version " +
				"atomically. The archive's files sit at its root or in a single package/ folder. " + activationDoc + manifestWarningsDoc + clusterUploadDoc,
			params:  append(slices.Clone(dryRunParam), canaryParams...),
			request: &request{contentType: "multipart/form-data", body: api.UploadForm{}},
			responses: append([]response{{status: http.StatusOK, description: "Installed; with dryRun, what the upload would install (WorkerDryRun)",
				body: api.WorkerUploaded{}, alt: []any{api.WorkerDryRun{}}}}, canaryErrors(append(uploadErrors("worker"), uploadUnprocessable))...),
			handle: a.uploadHandler(func() *packages.Catalog { return a.workers }, "worker.upload", func(in api.InstalledUnit, split []keystore.Share) any {
				var body api.WorkerUploaded
				body.Success, body.Data.Worker = true, in
				for _, sh := range split {
					body.Data.Split = append(body.Data.Split, api.TrafficShare{Version: sh.Version, Percent: sh.Percent})
				}
				return body
			}, func(_ *http.Request, s *packages.Staged) (any, error) {
				var body api.WorkerDryRun
				body.Success, body.DryRun, body.Data.Worker, body.Data.Replaces = true, true, installedUnit(s.Installed, manifestWarnings(a.workers, s.Metadata)), s.Replaces
				return body, nil
			}),
		},
		toggle(true),
		toggle(false),
		removeWhole(remove("/workers/{scope}/{name}", "deleteWorker", "Remove a worker and all its versions",
			"Built-in workers cannot be removed (BUILT_IN_WORKER_REMOVE_FORBIDDEN), or NAMESPACE_DENIED")),
		remove("/workers/{scope}/{name}/{version}", "deleteWorkerVersion", "Remove one version of a worker",
			"Built-in workers keep their versions (BUILT_IN_WORKER_VERSION_REMOVE_FORBIDDEN), or NAMESPACE_DENIED"),
		a.databaseRoute(),
	}
}

// removeWhole documents what removing a worker whole does to its database (?purge).
func removeWhole(rt route) route {
	rt.params = purgeParam
	rt.description = "Its database (manifest database: true) is kept unless purge is asked for. " + rt.description
	rt.responses = append(rt.responses, errorResponse(http.StatusBadRequest, "A malformed purge (BAD_REQUEST)"))
	return rt
}

func (a *unitsAPI) listWorkers(w http.ResponseWriter, r *http.Request) error {
	c, err := catalog(a.workers)
	if err != nil {
		return err
	}
	procs, procsGen := a.procStates()
	return listUnits(w, r, c, &a.workerList, workerListShape, a.activations.Gen()^procsGen, func(u packages.Unit) api.WorkerRecord {
		rec := api.WorkerRecord{Name: u.Name, Path: u.Path, Source: u.Source(), Removable: !u.Dir.BuiltIn,
			Versions: []string{}, DisabledVersions: []string{}, Sizes: map[string]int64{}, Kinds: map[string]string{}}
		for _, v := range u.Versions {
			rec.Versions = append(rec.Versions, v.Version)
			rec.Sizes[v.Version] = v.Size
			if m, err := workers.ReadManifest(v.Metadata); err == nil {
				rec.Kinds[v.Version] = m.Kind().String()
			}
			if !v.Enabled {
				rec.DisabledVersions = append(rec.DisabledVersions, v.Version)
			}
		}
		a.activation(&rec, u, procs)
		rec.Database = a.databaseMode(u)
		if d := a.workersDomain; d.Name != "" {
			if url, err := d.URL(u.Name); err != nil {
				rec.NoHost = err.Error()
			} else {
				rec.URL = url + "/"
			}
		}
		return rec
	})
}

// workerListShape answers GET workers as the spec's array, paged by name; a worker's cursor is
// its name in unpadded base64url, which a query string carries as it is.
var workerListShape = listShape{
	wrap: arrayShape.wrap,
	after: func(cursor string) (string, bool) {
		name, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || packages.ValidateName(string(name)) != nil {
			return "", false
		}
		return string(name), true
	},
	cursor: func(order string) string { return base64.RawURLEncoding.EncodeToString([]byte(order)) },
}

// workerTarget reads and authorizes the worker (and version, when the route has one) a
// request acts on.
func workerTarget(r *http.Request) (name, version string, err error) {
	if name, err = unitName(r); err != nil {
		return "", "", err
	}
	if version = r.PathValue("version"); version != "" {
		if err := packages.ValidateVersion(version); err != nil {
			return "", "", packageError(err)
		}
	}
	return name, version, authorizeUnit(principalOf(r.Context()), name)
}

func (a *unitsAPI) toggleWorker(w http.ResponseWriter, r *http.Request, enabled bool) error {
	c, err := catalog(a.workers)
	if err != nil {
		return err
	}
	name, version, err := workerTarget(r)
	if err != nil {
		return err
	}
	body := &api.WorkerToggled{Success: true, Data: api.WorkerToggle{Name: name, Version: version, Enabled: enabled}}
	return a.act(w, r, map[bool]string{true: "worker.enable", false: "worker.disable"}[enabled], name+"@"+version,
		func() (err error) {
			checks := a.checks()
			if body.Data.Change, err = a.setEnabled(r, c, name, version, enabled); err != nil || !enabled {
				return err
			}
			// Enabled either way; the answer says whether it is served.
			return a.activated(r, name, version, checks)
		}, body)
}

func (a *unitsAPI) deleteWorker(w http.ResponseWriter, r *http.Request) error {
	c, err := catalog(a.workers)
	if err != nil {
		return err
	}
	name, version, err := workerTarget(r)
	if err != nil {
		return err
	}
	purge, err := boolQuery(r, "purge")
	if err != nil {
		return err
	}
	target, local := name+"@"+version, func() error { return c.RemoveVersion(name, version) }
	if version == "" {
		target, local = name, func() error { return c.Remove(name) }
	}
	return a.act(w, r, "worker.delete", target, func() error {
		if err := a.removeUnit(r, c, name, version, local); err != nil {
			return err
		}
		if version == "" {
			// What belonged to the worker goes with it: a worker uploaded later under the
			// same name starts without it.
			a.traffic.endTraffic(r, name)
			a.secrets.endSecrets(r, name)
			a.domains.endDomains(r, name)
			a.cron.endCron(r, name)
			if purge {
				return a.purgeDatabase(r, name)
			}
		}
		return nil
	}, api.Success{Success: true})
}
