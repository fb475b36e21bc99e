package handlers

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/databases"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/hosts"
	"github.com/caddy-runtime/runtime/internal/openapi"
	"github.com/caddy-runtime/runtime/internal/plugins"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// Error codes of uploads.
const (
	CodeNoFileProvided = "NO_FILE_PROVIDED"
)

// uploadErrors documents what an upload can answer besides success.
func uploadErrors(noun string) []response {
	upper := strings.ToUpper(noun)
	return []response{
		errorResponse(http.StatusBadRequest, "NO_FILE_PROVIDED, INVALID_FILE_TYPE, INVALID_ARCHIVE, PATH_TRAVERSAL, MISSING_PACKAGE_NAME, INVALID_PACKAGE_NAME (malformed or reserved), INVALID_PACKAGE_VERSION, INVALID_MANIFEST"+entrypointDoc[noun]+" or NO_"+upper+"_DIRS"),
		errorResponse(http.StatusForbidden, admissionForbidden[noun]),
		errorResponse(http.StatusConflict, admissionConflict[noun]),
		errorResponse(http.StatusRequestEntityTooLarge, "Over max_upload_size, max_unpacked_size or max_archive_entries (PAYLOAD_TOO_LARGE, naming the limit)"),
		errorResponse(http.StatusServiceUnavailable, storeUnavailableDoc),
		errorResponse(http.StatusInsufficientStorage, "The disk of the folder the package goes to is full (INSUFFICIENT_STORAGE); nothing was installed or recorded"),
	}
}

// Descriptions of admission refusals, by unit kind.
var (
	entrypointDoc = map[string]string{
		"worker": ", INVALID_ENTRYPOINT (a process worker's program, its entrypoint or a relative path as its command's first word, is not a file of the archive or not executable; the message names it), " +
			"INVALID_MODULE (a WebAssembly worker's module is not a file of the archive, not a WebAssembly binary module, or imports anything but functions of WASI preview 1; the message names the import)",
	}
	admissionForbidden = map[string]string{
		"worker": "The package's scope is outside the key's namespaces (NAMESPACE_DENIED), or it is a process worker where process_workers does not allow one (PROCESS_WORKERS_DISABLED), " +
			"or a WebAssembly worker where wasm_workers does not allow one (WASM_WORKERS_DISABLED)",
		"plugin": "The package's scope is outside the key's namespaces, or the plugin needs a key with every namespace (hooks, handlers beyond the defaults) or has a base outside its scope's name (NAMESPACE_DENIED); " +
			"its routes or hooks use a handler, matcher, file root or placeholder plugins may not use (PLUGIN_NOT_ALLOWED)",
	}
	admissionConflict = map[string]string{
		"worker": "A folder earlier in the list already provides this name, or an enabled plugin's base would hide the worker (WORKER_CONFLICT)",
		"plugin": "A folder earlier in the list already provides this name, or the base would hide an installed worker or another plugin's base (PLUGIN_CONFLICT)",
	}
)

// unitsAPI serves the units, workers and plugins: uploads, listings, enabling, disabling and
// removing them, with their health checks, and the plugins' configuration and reloads.
type unitsAPI struct {
	*pipeline
	workers, plugins       *packages.Catalog // nil answers their routes 503
	workerPolicy           workers.Policy
	pluginPolicy           plugins.Policy
	workersDomain          hosts.Domain
	activations            *workers.Activations // nil: every version is served at once
	activator              *workers.Activator
	pool                   func() *workers.Pool // the process pool, for the workers' states; nil until the runtime has started
	host                   PluginHost           // the live plugin table; nil until plugins are served
	cluster                Cluster              // the shared desired state; nil on a single instance
	workerList, pluginList bodyCache            // the encoded listings, kept while the units are unchanged
	// What a removed worker leaves (its domains, secrets, split and cron runs) ends with it, and a
	// canary upload puts its split in force.
	domains *domainsAPI
	secrets *secretsAPI
	traffic *trafficAPI
	cron    *cronAPI
	// databases are the workers' own databases, databaseCap worker_database_size; nil: none.
	databases   *databases.Manager
	databaseCap int64
}

// stage reads the multipart field "file" of an upload and stages it in c: unpacked and
// checked, the package admitted with the caller's key (admit), nothing installed yet. The
// archive itself is bounded exactly by the catalog. keep keeps the archive as received, for
// the cluster's package store.
func (a *unitsAPI) stage(w http.ResponseWriter, r *http.Request, c *packages.Catalog, keep bool) (*packages.Staged, error) {
	p := principalOf(r.Context())
	up, err := readMultipart(w, r, c.Limits().Upload, CodeNoFileProvided,
		"send the archive as multipart/form-data in the field file (curl -F file=@app.tgz)")
	if err != nil {
		return nil, err
	}
	for {
		part, err := up.next()
		if err == io.EOF {
			return nil, envelope.Errorf(http.StatusBadRequest, CodeNoFileProvided, "no file in the upload; send it in the multipart field file")
		}
		if err != nil {
			return nil, packageError(err)
		}
		if part.FormName() != "file" || part.FileName() == "" {
			part.Close()
			continue
		}
		staged, err := c.StageWith(part.FileName(), up.body(part), func(md packages.Metadata) error {
			return a.admit(p, c, md)
		}, packages.StageOptions{KeepArchive: keep})
		if err != nil {
			// An archive refused before its end (a bad entry, a limit) leaves the rest of the
			// body unread: read it, within the body's bound, so that the client, still sending,
			// gets the answer rather than a connection closed under it.
			_, _ = io.Copy(io.Discard, r.Body)
		}
		part.Close()
		if err == nil && c.Layout().Versioned {
			if err = checkProgram(staged, a.workerPolicy.MaxModuleSize); err != nil {
				staged.Discard()
				staged = nil
			}
		}
		return staged, packageError(err)
	}
}

// checkProgram refuses a staged process worker whose program is not in its archive or not
// executable (workers.CheckProgram): installed, it would fail to start where the version it
// replaces served. A WebAssembly module is at most maxModule bytes (wasm_max_module_size).
func checkProgram(s *packages.Staged, maxModule int64) error {
	tree, err := os.OpenRoot(s.Tree)
	if err != nil {
		return err
	}
	defer tree.Close()
	return workers.CheckProgram(s.Metadata, tree, maxModule)
}

// admit decides whether the key p may install or enable the worker version or plugin md
// describes in c, or leave it so by a file manager write: the name must be valid and within
// the key's namespaces, and the unit must pass its kind's admission (workers.Admit,
// plugins.Admit), against the units installed now.
func (a *unitsAPI) admit(p keystore.Principal, c *packages.Catalog, md packages.Metadata) error {
	if err := packages.ValidateName(md.Name); err != nil {
		return packageError(err)
	}
	if err := packages.ValidateVersion(md.Version); err != nil {
		return packageError(err)
	}
	if err := authorizeUnit(p, md.Name); err != nil {
		return err
	}
	installed, err := a.installed()
	if err != nil {
		return err
	}
	bases := plugins.Bases(installed[packages.PluginLayout.Noun])
	if c.Layout().Versioned {
		err = workers.Admit(md, a.workerPolicy, bases)
	} else {
		world := plugins.World{Workers: packages.Names(installed[packages.WorkerLayout.Noun]), Bases: bases}
		err = plugins.Admit(md, a.pluginPolicy, p.Unrestricted(), world)
	}
	return packageError(err)
}

// installed lists the installed units of both kinds, by noun, for admissions to compare with.
func (a *unitsAPI) installed() (map[string][]packages.Unit, error) {
	out := map[string][]packages.Unit{}
	for _, c := range []*packages.Catalog{a.workers, a.plugins} {
		if c == nil {
			continue
		}
		units, err := c.List()
		if err != nil {
			return nil, fmt.Errorf("listing the installed %ss: %w", c.Layout().Noun, err)
		}
		out[c.Layout().Noun] = units
	}
	return out, nil
}

// setEnabled enables or disables a unit (a worker version: version set); enabling admits it
// with the caller's key first, as an upload would be. In cluster mode it returns the change
// number (see unitChange).
func (a *unitsAPI) setEnabled(r *http.Request, c *packages.Catalog, name, version string, enabled bool) (int64, error) {
	if enabled {
		md, err := a.admitEnable(r, c, name, version)
		if err != nil {
			return 0, err
		}
		if c.Layout().Versioned && md != nil {
			a.expect(*md, true)
			change, err := a.changeEnabled(r, c, name, version, enabled)
			if err != nil {
				a.forget(name, version)
			}
			return change, err
		}
	}
	return a.changeEnabled(r, c, name, version, enabled)
}

// changeEnabled writes the enabled flag: on this instance's disk, or in cluster mode into the
// desired state and then here.
func (a *unitsAPI) changeEnabled(r *http.Request, c *packages.Catalog, name, version string, enabled bool) (int64, error) {
	return a.unitChange(c, name, version, func(ref keystore.UnitRef) (int64, error) {
		return a.cluster.SetEnabled(r.Context(), ref, enabled, principalOf(r.Context()))
	}, func() error { return c.SetEnabled(name, version, enabled) })
}

// toggleErrors documents the refusals of an enable or disable besides not found: a disable
// is refused only outside the key's namespaces, an enable also by admission.
// An enable may answer more (extra: a worker's HEALTHCHECK_FAILED).
func toggleErrors(noun string, enabled bool, badName, namespace response, extra ...response) []response {
	if !enabled {
		return []response{badName, namespace}
	}
	badName.description += "; a manifest that is invalid or takes a reserved name (INVALID_MANIFEST, INVALID_PACKAGE_NAME)"
	return append([]response{badName, errorResponse(http.StatusForbidden, admissionForbidden[noun]), errorResponse(http.StatusConflict, admissionConflict[noun])}, extra...)
}

// admitEnable admits the unit (version) about to be enabled, as it is on disk, and returns
// its metadata (nil when the version is missing: SetEnabled answers that).
func (a *unitsAPI) admitEnable(r *http.Request, c *packages.Catalog, name, version string) (*packages.Metadata, error) {
	u, err := c.Lookup(name)
	if err != nil {
		return nil, packageError(err)
	}
	v := u.Versions[0]
	if version != "" {
		var ok bool
		if v, ok = u.Find(version); !ok {
			return nil, nil
		}
	}
	return &v.Metadata, a.admit(principalOf(r.Context()), c, v.Metadata)
}

// packageError maps a packages error to its HTTP status.
func packageError(err error) error {
	var pe *packages.Error
	if !errors.As(err, &pe) {
		return err
	}
	status := map[packages.Kind]int{
		packages.Invalid:   http.StatusBadRequest,
		packages.Forbidden: http.StatusForbidden,
		packages.NotFound:  http.StatusNotFound,
		packages.Conflict:  http.StatusConflict,
		packages.TooLarge:  http.StatusRequestEntityTooLarge,
		packages.NoSpace:   http.StatusInsufficientStorage,
	}[pe.Kind]
	return envelope.Errorf(status, pe.Code, "%s", pe.Message)
}

// uploadHandler installs an upload into the catalog c returns and answers with the body
// built from the install. With ?dryRun=1 it stops before installing and answers with dry's
// body instead: every check has run and nothing outside the temporary folder was written.
//
// A worker upload with ?canary=N also puts a traffic split in force, N percent to the new
// version and the rest to the version served until then, before the version is installed:
// no instance that installs it serves it to everyone, even for a moment. A failed install
// puts the split before back.
func (a *unitsAPI) uploadHandler(c func() *packages.Catalog, action string, body func(api.InstalledUnit, []keystore.Share) any, dry func(*http.Request, *packages.Staged) (any, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		cat, err := catalog(c())
		if err != nil {
			return err
		}
		dryRun, err := boolQuery(r, "dryRun")
		if err != nil {
			return err
		}
		canary := 0
		if cat.Layout().Versioned {
			if canary, err = canaryQuery(r); err != nil {
				return err
			}
		}
		// Timed from the first byte read, so a slow client counts in: it is what uploaders wait.
		start, outcome, bytes := time.Now(), "refused", int64(0)
		defer func() { a.metrics.Install(cat.Layout().Noun, outcome, time.Since(start), bytes) }()
		p := principalOf(r.Context())
		s, err := a.stage(w, r, cat, a.cluster != nil && !dryRun)
		if err != nil {
			if !dryRun {
				a.audit(r, action, "", "failed", &p)
			}
			return err
		}
		defer s.Discard()
		installed, err := a.autoInstall(r, cat, s)
		if err != nil {
			if !dryRun {
				a.audit(r, action, s.Name+"@"+s.Version, "failed", &p)
			}
			return err
		}
		var split, before []keystore.Share
		var store *keystore.Store
		if canary > 0 {
			if store, err = a.keyStore(); err == nil {
				split, before, err = a.traffic.canarySplit(r, store, s.Name, s.Version, canary)
			}
			if err == nil && !dryRun {
				_, err = a.traffic.storeTraffic(r, store, s.Name, split)
			}
			if err != nil {
				if !dryRun {
					a.audit(r, action, s.Name+"@"+s.Version, "failed", &p)
				}
				return inputError(err)
			}
			if !dryRun {
				a.audit(r, trafficAuditAction, s.Name, "success", &p, splitField(split))
			}
		}
		if dryRun {
			out, err := dry(r, s)
			if err != nil {
				return err
			}
			outcome = "dry_run"
			envelope.WriteJSON(w, http.StatusOK, out)
			return nil
		}
		versioned, checks := cat.Layout().Versioned, a.checks()
		if versioned {
			a.expect(s.Metadata, false)
		}
		in, change, err := a.install(r, cat, s)
		if err != nil {
			if versioned {
				a.forget(s.Name, s.Version)
			}
			a.audit(r, action, s.Name+"@"+s.Version, "failed", &p)
			if canary > 0 {
				a.traffic.restoreTraffic(r, store, s.Name, before)
			}
			return packageError(storeError(w, err))
		}
		outcome, bytes = "installed", in.Bytes
		// The archive's digest and size stay with who uploaded it: a unit's page shows them.
		a.audit(r, action, in.Name+"@"+in.Version, "success", &p, zap.Int64("change", change),
			zap.String("sha256", in.SHA256), zap.Int64("bytes", in.Bytes), zap.Int("files", in.Files))
		if versioned {
			// Installed either way; the answer says whether it is served.
			if err := a.activated(r, in.Name, in.Version, checks); err != nil {
				if canary > 0 {
					return a.traffic.canaryFailed(r, store, in.Name, before, err)
				}
				return err
			}
		}
		unit := installedUnit(in, manifestWarnings(cat, s.Metadata))
		unit.Change, unit.Install = change, installed
		envelope.WriteJSON(w, http.StatusOK, body(unit, split))
		return nil
	}
}

// autoInstall runs the install of a staged JavaScript worker whose manifest says autoInstall:
// true (workers.Pool.Install), into its staged folder, so that what is installed is complete;
// it returns the engine's output, and 422 INSTALL_FAILED with it when the install fails. A
// cluster's instances each install the archive as published, without what the install
// added: there autoInstall is refused.
func (a *unitsAPI) autoInstall(r *http.Request, c *packages.Catalog, s *packages.Staged) (string, error) {
	if !c.Layout().Versioned {
		return "", nil
	}
	m, err := workers.ReadManifest(s.Metadata)
	if err != nil || !m.AutoInstall {
		return "", nil
	}
	if a.cluster != nil {
		return "", envelope.Errorf(http.StatusBadRequest, packages.CodeInvalidManifest,
			"autoInstall: true runs on the instance an upload reaches, and in a cluster every instance installs the published archive: "+
				"run the install before packing (bun install --frozen-lockfile) and ship node_modules, without autoInstall")
	}
	var pool *workers.Pool
	if a.pool != nil {
		pool = a.pool()
	}
	if pool == nil {
		return "", envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "the runtime is starting")
	}
	// What it adds counts with the upload's files against max_unpacked_size.
	limit := c.Limits().Unpacked // 0: unbounded
	if limit > 0 {
		limit = max(limit-s.Bytes, 1)
	}
	in, err := pool.Install(r.Context(), s.Name, s.Version, s.Tree, m, limit)
	var failed *workers.InstallError
	if errors.As(err, &failed) {
		return "", envelope.Errorf(http.StatusUnprocessableEntity, workers.CodeInstallFailed, "autoInstall of %s@%s: %s", s.Name, s.Version, failed.Error())
	}
	if err != nil {
		return "", fmt.Errorf("autoInstall of %s@%s: %w", s.Name, s.Version, err)
	}
	s.Files, s.Bytes = s.Files+in.Files, s.Bytes+in.Bytes
	return in.Output, nil
}

// install installs a staged upload: on this instance's disk, or in cluster mode into the
// desired state and then here, with the change number it created.
func (a *unitsAPI) install(r *http.Request, c *packages.Catalog, s *packages.Staged) (packages.Installed, int64, error) {
	if a.cluster == nil {
		in, err := s.Commit()
		return in, 0, err
	}
	return a.cluster.Publish(r.Context(), unitKind(c), s, principalOf(r.Context()))
}

// boolQuery reads the query parameter name as a flag: absent, "0" or "false" is false, "1" or
// "true" is true.
func boolQuery(r *http.Request, name string) (bool, error) {
	switch v := r.URL.Query().Get(name); v {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	default:
		return false, envelope.Errorf(http.StatusBadRequest, envelope.CodeBadRequest, "query parameter %s is %q; use 1 or true (or leave it out)", name, v)
	}
}

// dryRunParam documents ?dryRun on an upload.
var dryRunParam = []openapi.Parameter{{Name: "dryRun", In: "query", Schema: &openapi.Schema{Type: "string", Enum: []any{"1", "true", "0", "false"}},
	Description: "1 or true: run every check of the upload and answer what it would do, installing nothing"}}

func installedUnit(in packages.Installed, warnings []string) api.InstalledUnit {
	return api.InstalledUnit{Name: in.Name, Version: in.Version, InstalledAt: in.Path, SHA256: in.SHA256, Files: in.Files, Bytes: in.Bytes,
		Warnings: warnings}
}

// manifestWarnings are the keys of an uploaded manifest that no kind of unit of c reads (a
// worker's: every kind's keys; a plugin's), reported in the upload's answer: never refused,
// as the spec reads manifests leniently, never silent.
func manifestWarnings(c *packages.Catalog, md packages.Metadata) []string {
	if c.Layout().Versioned {
		return packages.UnknownKeys(md, workers.Manifest{})
	}
	return packages.UnknownKeys(md, plugins.Schemas...)
}

// catalog returns c, or 503 while the runtime is starting.
func catalog(c *packages.Catalog) (*packages.Catalog, error) {
	if c == nil {
		return nil, envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "the runtime is starting")
	}
	return c, nil
}

// installedWorker reads and authorizes the worker a route of a worker's own state in the key
// store acts on (its traffic split, its cron triggers), which must be installed here, and
// returns it with the key store.
func (a *pipeline) installedWorker(r *http.Request, workers *packages.Catalog) (packages.Unit, *keystore.Store, error) {
	c, err := catalog(workers)
	if err != nil {
		return packages.Unit{}, nil, err
	}
	name, _, err := workerTarget(r)
	if err != nil {
		return packages.Unit{}, nil, err
	}
	u, err := c.Lookup(name)
	if err != nil {
		return packages.Unit{}, nil, packageError(err)
	}
	store, err := a.keyStore()
	return u, store, err
}

// listUnits answers a listing of the units of c the caller may see, each made a record by
// record, as shape has it (pages go by name); the encoded answer is kept in cache while the
// catalog's listing is unchanged. extra is a generation of other state the records show (0:
// none).
func listUnits[R any](w http.ResponseWriter, r *http.Request, c *packages.Catalog, cache *bodyCache, shape listShape, extra uint64, record func(packages.Unit) R) error {
	units, gen, cached, err := c.Listing()
	if err != nil {
		return err
	}
	p := principalOf(r.Context())
	return cache.serve(w, r, p, cacheGen{gen, extra}, cached, shape, func() ([]listRecord, error) {
		records := make([]listRecord, 0, len(units))
		for _, u := range units {
			if p.CanAccess(u.Name) {
				records = append(records, listRecord{order: u.Name, value: record(u)})
			}
		}
		return records, nil
	})
}

// unitName reads the unit name from the path values: {scope} ("_" or "@scope") and {name}
// for workers, or the URL-decoded {name} for plugins.
func unitName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if scope := r.PathValue("scope"); scope != "" {
		if scope != "_" && !strings.HasPrefix(scope, "@") {
			return "", envelope.Errorf(http.StatusBadRequest, packages.CodeInvalidName, "scope %q must be _ (no scope) or @scope", scope)
		}
		name = packages.JoinName(scope, name)
	}
	if err := packages.ValidateName(name); err != nil {
		return "", packageError(err)
	}
	return name, nil
}
