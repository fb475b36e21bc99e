package handlers

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/packages"
)

// healthcheckFailed documents the answer to an upload or enable whose version did not pass its
// check.
var healthcheckFailed = errorResponse(http.StatusUnprocessableEntity,
	"HEALTHCHECK_FAILED: the version is installed (enabled) but not activated: a process worker's new version must answer its manifest's "+
		"healthcheck (GET path, 2xx, asked every 0.5 s until healthcheck.timeout) or, without one, listen on PORT within startTimeout. "+
		"The version served before goes on serving; when there is none fit to (a first version, or every other failed its check too), the "+
		"failed version is served all the same and the worker's state is failing. The message says which, gives the reason and the worker's last output lines, and the "+
		"worker record lists the version in failedVersions. In a cluster this answers for this instance; each instance checks for itself.")

// uploadUnprocessable documents an upload's 422: a failed check, or a failed autoInstall.
var uploadUnprocessable = errorResponse(http.StatusUnprocessableEntity, healthcheckFailed.description+
	" Or INSTALL_FAILED: a JavaScript worker's autoInstall (its engine's frozen, script-less install of package.json and its lock file, "+
	"sandboxed, within js_install_timeout) failed; nothing is installed, and the message ends with the engine's output.")

// activationDoc tells, in an upload's or enable's description, when the version is served.
const activationDoc = "A process worker's version is started at once and answers only once it has passed its check: its manifest's " +
	"healthcheck (GET path answering 2xx, asked every 0.5 s until healthcheck.timeout) or, without one, listening on PORT within " +
	"startTimeout; until then, and if it fails (422 HEALTHCHECK_FAILED), the version served before goes on serving; when nothing " +
	"healthier exists (a first version, or every other failed too) the failed version is served all the same, and the worker's state " +
	"is failing. A static version has no check: the newest enabled version serves, as before. "

// manifestWarningsDoc tells, in an upload's description, what becomes of unknown manifest keys.
const manifestWarningsDoc = "A manifest key the runtime does not read is not refused: the answer's warnings name it, with the key meant " +
	"when one is close. "

// expect holds back a worker version about to be installed or enabled from unpinned traffic
// until its check passes (workers.Activator.Expect); activated then waits for that check.
func (a *unitsAPI) expect(md packages.Metadata, enabling bool) {
	if a.activator == nil {
		return
	}
	if enabling {
		a.activator.ExpectEnable(md)
		return
	}
	a.activator.Expect(md)
}

// checks counts the checks started so far; activated waits for one started after it.
func (a *unitsAPI) checks() uint64 {
	if a.activator == nil {
		return 0
	}
	return a.activator.Started()
}

// forget undoes expect for an install or enable that failed.
func (a *unitsAPI) forget(name, version string) {
	if a.activator != nil {
		a.activator.Forget(name, version)
	}
}

// activated waits for the check of a version just installed or enabled here (started by the
// change, after since; else now), and answers 422 HEALTHCHECK_FAILED when it did not pass.
func (a *unitsAPI) activated(r *http.Request, name, version string, since uint64) error {
	if a.activator == nil {
		return nil
	}
	a.activator.CheckSince(name, version, since)
	var failed *workers.CheckError
	if err := a.activator.Wait(r.Context(), name, version); !errors.As(err, &failed) {
		return nil // passed; or the client left, and the check goes on without it
	}
	return envelope.Errorf(http.StatusUnprocessableEntity, workers.CodeHealthcheckFailed, "%s", a.checkMessage(failed))
}

// checkMessage tells what failed, what is served instead and the worker's last output lines.
func (a *unitsAPI) checkMessage(e *workers.CheckError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s is installed but not activated: %s", e.Name, e.Version, e.Reason)
	if u, err := a.workers.Lookup(e.Name); err == nil {
		v, ok := workers.ActiveVersion(u, a.activations.Get(e.Name))
		switch {
		case !ok:
		case v.Version != e.Version:
			fmt.Fprintf(&b, "; %s goes on serving %s", v.Version, e.Name)
		default:
			// Nothing healthier to serve: say so, rather than that it is not served.
			b.Reset()
			fmt.Fprintf(&b, "%s %s failed its check and nothing healthier exists: it is served, failing (the worker's state); why: %s", e.Name, e.Version, e.Reason)
		}
	}
	if len(e.Output) == 0 {
		b.WriteString(".\nIt wrote no output.")
	} else {
		b.WriteString(".\nIts last output lines:")
		for _, l := range e.Output {
			fmt.Fprintf(&b, "\n  %s: %s", l.Stream, l.Text)
		}
	}
	b.WriteString("\nFix it and upload it again, or enable the version again to check it once more.")
	return b.String()
}

// activation fills in the activation fields of a worker record: the served version, the
// active one when it is fit to be, the state in words and the failed versions.
func (a *unitsAPI) activation(rec *api.WorkerRecord, u packages.Unit, procs map[string]workers.ProcState) {
	act := a.activations.Get(u.Name)
	state, served, activated := workers.StateOf(u, act, procs)
	rec.State, rec.Served = string(state), served
	if activated {
		rec.ActiveVersion = served
	}
	rec.FailedVersions = make([]api.FailedVersion, 0, len(act.Failed))
	for _, f := range act.Failed {
		if _, installed := u.Find(f.Version); installed {
			rec.FailedVersions = append(rec.FailedVersions, api.FailedVersion{Version: f.Version, Reason: f.Reason, At: timestamp(f.At)})
		}
	}
}

// procStates are the pool's version states (nil until the runtime has started) and a number
// that changes with them, for a kept listing to be built again when a state changes.
func (a *unitsAPI) procStates() (map[string]workers.ProcState, uint64) {
	pool := a.pool()
	if pool == nil {
		return nil, 0
	}
	states := pool.VersionStates()
	h := fnv.New64a()
	for _, k := range slices.Sorted(maps.Keys(states)) {
		fmt.Fprintf(h, "%s=%s\n", k, states[k])
	}
	return states, h.Sum64()
}
