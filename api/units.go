package api

// UploadForm is the multipart body of an upload.
type UploadForm struct {
	File string `json:"file" format:"binary" doc:"the archive: .tgz, .tar.gz or .zip"`
}

// InstalledUnit describes an install.
type InstalledUnit struct {
	Name        string `json:"name"`
	Version     string `json:"version" doc:"the manifest version; latest when none is declared"`
	InstalledAt string `json:"installedAt" doc:"absolute install folder"`
	SHA256      string `json:"sha256" doc:"hex digest of the uploaded archive"`
	Files       int    `json:"files" doc:"regular files unpacked"`
	Bytes       int64  `json:"bytes" doc:"bytes unpacked"`
	// Warnings extends the spec's answer: a manifest key the runtime does not read is never
	// refused, nor ignored without a word.
	Warnings []string `json:"warnings,omitempty" doc:"one line per key of the manifest that the runtime does not read (a typo, or a key at the wrong level), e.g. \"limits.timeout is not a manifest key (did you mean timeout?); the runtime ignores it\"; the upload is not refused for it. Absent when every key is known"`
	// Install extends the spec's answer: what a JavaScript worker's autoInstall printed.
	Install string `json:"install,omitempty" doc:"a JavaScript worker with autoInstall: true: the output of its engine's install (bun install --frozen-lockfile --ignore-scripts, deno install --frozen, npm ci --ignore-scripts), its last 16 KiB; absent otherwise"`
	// Change is set in cluster mode (a package store is configured).
	Change int64 `json:"change,omitempty" doc:"cluster mode: the desired state's change number this install created; an instance serves it once its appliedChange reaches it (GET cluster)"`
}

// WorkerRecord is a worker as listed.
type WorkerRecord struct {
	DisabledVersions []string `json:"disabledVersions" doc:"versions with enabled: false; not served"`
	Name             string   `json:"name" doc:"from package metadata; @scope/name when scoped"`
	Path             string   `json:"path" doc:"the worker's folder"`
	Removable        bool     `json:"removable" doc:"true only when source is uploaded"`
	Source           string   `json:"source" enum:"built-in,uploaded"`
	Versions         []string `json:"versions" doc:"installed versions, disabled ones included, in semver order"`
	// Sizes extends the spec's record: clients show what each version occupies.
	Sizes map[string]int64 `json:"sizes" doc:"bytes in each version's regular files (links not followed), by version, as of the last scan of its folder"`
	// Kinds extends it too: clients offer logs of process, JavaScript and WebAssembly workers alone.
	Kinds map[string]string `json:"kinds" doc:"how each version is served, by version: static (its files), spa (files, unknown paths answered by its HTML entrypoint), process (a program of its own, which writes the worker's logs), wasm (a WebAssembly module run for each request, whose standard error is the worker's logs) or js (a JavaScript or TypeScript module run by Bun, Deno or Node in a process of its own, which writes the worker's logs); a version whose manifest cannot be read is left out"`
	// Served extends it too: which version /<name>/ answers with when no split share applies.
	Served string `json:"served,omitempty" doc:"the version /<name>/ serves (outside the shares of a traffic split), on this instance: activeVersion when there is one, else the version that answers all the same (the newest enabled, when every enabled version failed its check or is being checked; state says so). Absent when no version is enabled"`
	// State extends it too: what the served version really does, in words.
	State string `json:"state" enum:"serving,failing,crash-looping,disabled,not-started" doc:"the worker on this instance, as its served version stands: serving (it passed its check, has none to pass as a static, spa or wasm version, or its process runs here); failing (it failed its check and nothing healthier exists: every other enabled version failed too, or there is none; it is served all the same, and activeVersion is absent); crash-looping (its process crashed soon after each of its last starts, at least 3 in a row, and each new start waits longer, up to 30 s; the pool status gives retryAt); disabled (no version is enabled: nothing is served); not-started (a process worker's version that has neither passed nor failed a check here and has no process yet: its check runs now, or it was on disk when the runtime started; its first request starts it)"`
	// ActiveVersion and FailedVersions extend it too (health-gated activation), as this
	// instance sees them: each instance checks new versions for itself.
	ActiveVersion  string          `json:"activeVersion,omitempty" doc:"the version unpinned requests get on this instance (when no traffic split is set), when one is fit to: the version activated last, while it is enabled; else the newest enabled version not in failedVersions and not being checked. A process worker's new version is activated once it passes its check (healthcheck, or listening on PORT); a static version has no check, and uploading or enabling one leaves no version activated, so the newest enabled serves. Absent when no version is enabled, and when every enabled version failed its check or is being checked: served then names the version that answers all the same, and state says failing or not-started"`
	FailedVersions []FailedVersion `json:"failedVersions" doc:"installed versions whose check failed on this instance: they take no unpinned traffic (pinned requests still reach them). A version leaves the list when it passes a later check (upload it again, or enable it again)"`
	// URL and NoHost extend it too: the worker's own host under workers_domain.
	URL    string `json:"url,omitempty" doc:"the worker's own host, e.g. https://app.apps.example.com/, when workers_domain is set; it serves what the unpinned path serves (pinned versions stay on the path form). Absent when workers_domain is unset or the name cannot be a host name"`
	NoHost string `json:"noHost,omitempty" doc:"set when workers_domain is set but the name cannot be a host name (a part holds '.' or '_', or is longer than 63): why the worker is served at its path only"`
	// Database extends it too: where the worker's own database is (its size: GET database).
	Database string `json:"database,omitempty" enum:"local,primary" doc:"set when the served version's manifest says database: true: local (a SQLite file under state_dir; a WebAssembly worker's folder there) or primary (a namespace on the libSQL primary of sync mode); its size and limit: GET workers/{scope}/{name}/database"`
}

// FailedVersion is a worker version that did not pass its check.
type FailedVersion struct {
	Version string `json:"version"`
	Reason  string `json:"reason" doc:"why: what the health check answered last, or how the process failed to start"`
	At      string `json:"at,omitempty" format:"date-time" doc:"when the check ended"`
}

// WorkerDryRun is the body of a worker upload with ?dryRun=1.
type WorkerDryRun struct {
	Success bool `json:"success"`
	DryRun  bool `json:"dryRun" doc:"true: nothing was installed"`
	Data    struct {
		Worker   InstalledUnit `json:"worker" doc:"what the upload would install; installedAt is where"`
		Replaces bool          `json:"replaces" doc:"true when this name and version is installed there already and the upload would replace it"`
	} `json:"data"`
}

// WorkerUploaded is the body of a worker upload.
type WorkerUploaded struct {
	Success bool `json:"success"`
	Data    struct {
		Worker InstalledUnit `json:"worker"`
		// Split is set by an upload with ?canary.
		Split []TrafficShare `json:"split,omitempty" doc:"with ?canary=N: the traffic split the upload put in force, N percent to the new version and the rest to the version served until then"`
	} `json:"data"`
}

// WorkerToggled is the body of a worker enable or disable.
type WorkerToggled struct {
	Success bool         `json:"success"`
	Data    WorkerToggle `json:"data"`
}

// WorkerToggle reports a worker version's new state.
type WorkerToggle struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Enabled bool   `json:"enabled"`
	Change  int64  `json:"change,omitempty" doc:"cluster mode: the change number of the desired state this change created"`
}

// PoolProcess is a running worker process, as GET workers/pool lists it.
type PoolProcess struct {
	Worker      string `json:"worker"`
	Version     string `json:"version"`
	PID         int    `json:"pid,omitempty" doc:"the process id of the worker's sandbox launcher, under which the worker runs; absent while starting"`
	State       string `json:"state" enum:"starting,running,draining,crash-looping" doc:"draining: out of the pool, finishing its requests before it stops; crash-looping: the version's process crashed repeatedly (each time within 30 s of its start) and is not running: it starts again on a request after retryAt, each wait twice the one before, up to 30 s"`
	StartedAt   string `json:"startedAt,omitempty" format:"date-time" doc:"when it began accepting connections; absent while starting"`
	Requests    int    `json:"requests" doc:"requests served"`
	InFlight    int    `json:"inFlight" doc:"requests being served now"`
	LastRequest string `json:"lastRequest,omitempty" format:"date-time"`
	Restarts    int    `json:"restarts" doc:"restarts of this version's process, after a crash or asked for"`
	Crashes     int    `json:"crashes,omitempty" doc:"crash-looping: the crashes in a row"`
	RetryAt     string `json:"retryAt,omitempty" format:"date-time" doc:"crash-looping: when a request may start the version's process again"`
	MemoryBytes int64  `json:"memoryBytes,omitempty" doc:"resident memory of the process and its descendants; absent where the platform does not tell (only Linux does)"`
}

// WorkerRestarted is the body of a worker restart.
type WorkerRestarted struct {
	Success bool `json:"success"`
	Data    struct {
		Name      string   `json:"name"`
		Restarted []string `json:"restarted" doc:"the versions whose process was restarted; empty when none was running"`
	} `json:"data"`
}

// WorkerLogLine is one output line of a worker process: an item of WorkerLogs, and the data
// of a followed stream's "line" events.
type WorkerLogLine struct {
	Seq     uint64 `json:"seq" doc:"the line's number in the worker's output, from 1; an SSE event's id"`
	Time    string `json:"time" format:"date-time"`
	Version string `json:"version"`
	PID     int    `json:"pid"`
	Stream  string `json:"stream" enum:"stdout,stderr"`
	Text    string `json:"text"`
}

// WorkerLogs is the body of GET logs.
type WorkerLogs struct {
	Worker string          `json:"worker"`
	Lines  []WorkerLogLine `json:"lines" doc:"oldest first"`
}

// PluginRecord is a plugin as listed.
type PluginRecord struct {
	Enabled   bool   `json:"enabled" doc:"the manifest's enabled flag"`
	Name      string `json:"name" doc:"from package metadata"`
	Path      string `json:"path" doc:"the plugin's folder"`
	Removable bool   `json:"removable" doc:"true only when source is uploaded"`
	Source    string `json:"source" enum:"built-in,uploaded"`
	Version   string `json:"version"`
}

// PluginUploaded is the body of a plugin upload.
type PluginUploaded struct {
	Success bool `json:"success"`
	Data    struct {
		Plugin InstalledUnit `json:"plugin"`
		// ReloadRequired is true but in cluster mode: an upload installs, a reload loads; in a
		// cluster every instance loads a plugin once it has installed it.
		ReloadRequired bool   `json:"reloadRequired" doc:"true: the plugin is installed, not loaded; POST plugins/reload loads it. False in cluster mode, where every instance loads a plugin once it has installed it"`
		Message        string `json:"message"`
	} `json:"data"`
}

// PluginDryRun is the body of a plugin upload with ?dryRun=1.
type PluginDryRun struct {
	Success bool `json:"success"`
	DryRun  bool `json:"dryRun" doc:"true: nothing was installed"`
	Data    struct {
		Plugin   InstalledUnit `json:"plugin" doc:"what the upload would install; installedAt is where"`
		Replaces bool          `json:"replaces" doc:"true when a plugin of this name is installed there already and the upload would replace it"`
		Plan     PluginPlan    `json:"plan" doc:"the load plan of the next reload with this plugin installed, before provisioning"`
	} `json:"data"`
}

// PluginPlan is a load plan: what would load, in order, and what would be left out.
type PluginPlan struct {
	Load   []PluginVersion `json:"load"`
	Failed []PluginFailure `json:"failed"`
}

// PluginMenu is a navigation entry a plugin adds to the cpanel.
type PluginMenu struct {
	Title string `json:"title"`
	Icon  string `json:"icon"`
	Path  string `json:"path"`
}

// LoadedPlugin is a plugin the runtime has loaded, as listed.
type LoadedPlugin struct {
	Base                 string       `json:"base,omitempty" doc:"the URL base path of its routes; absent when it has none"`
	Dependencies         []string     `json:"dependencies"`
	Menus                []PluginMenu `json:"menus"`
	Name                 string       `json:"name"`
	OptionalDependencies []string     `json:"optionalDependencies"`
	Version              string       `json:"version"`
}

// PluginFailure is a plugin left out of the load, with why.
type PluginFailure struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

// PluginVersion names a loaded plugin.
type PluginVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// PluginReload is the body of POST plugins/reload.
type PluginReload struct {
	OK      bool            `json:"ok"`
	Plugins []PluginVersion `json:"plugins" doc:"the plugins loaded, in load order"`
	Failed  []PluginFailure `json:"failed" doc:"the plugins left out: invalid manifest, missing, disabled or failed dependency, cycle, or failed to provision"`
	Change  int64           `json:"change,omitempty" doc:"cluster mode: the change number of the reload request; an instance has reloaded once its appliedChange reaches it (GET cluster)"`
}

// PluginConfig is a plugin's configuration as the runtime resolves it, and its place in the
// live plugin table.
type PluginConfig struct {
	Name          string          `json:"name"`
	Version       string          `json:"version" doc:"the version installed on disk"`
	Enabled       bool            `json:"enabled"`
	Path          string          `json:"path" doc:"the plugin's folder"`
	Source        string          `json:"source" enum:"built-in,uploaded"`
	Manifest      *PluginManifest `json:"manifest,omitempty" doc:"the manifest as the runtime reads it; absent when it is invalid"`
	ManifestError string          `json:"manifestError,omitempty" doc:"why the manifest is invalid, under the current plugin policy"`
	Load          PluginLoad      `json:"load"`
}

// PluginManifest is a plugin's resolved manifest: checked against the plugin policy, file
// roots made absolute inside the plugin's folder.
type PluginManifest struct {
	Base                 string       `json:"base,omitempty"`
	Dependencies         []string     `json:"dependencies"`
	OptionalDependencies []string     `json:"optionalDependencies"`
	Menus                []PluginMenu `json:"menus"`
	Routes               []any        `json:"routes" doc:"Caddy HTTP routes in Caddy's JSON shape, served under base"`
	OnRequest            []any        `json:"onRequest" doc:"Caddy handlers run before worker and plugin dispatch"`
	OnRequestFailOpen    bool         `json:"onRequestFailOpen"`
	Handlers             []string     `json:"handlers" doc:"the handler modules its routes and hooks use"`
}

// PluginLoad is where a plugin stands in the live plugin table.
type PluginLoad struct {
	State    string `json:"state" enum:"loaded,failed,not_loaded"`
	Position int    `json:"position,omitempty" doc:"its place in the load order, from 1, when loaded"`
	Version  string `json:"version,omitempty" doc:"the version loaded; older than the installed one when an upload awaits a reload"`
	Reason   string `json:"reason,omitempty" enum:"invalid,unmet_dependency,cycle,base_taken,not_provisioned,disabled,not_reloaded" doc:"why it is not loaded"`
	Error    string `json:"error,omitempty" doc:"what kept it out of the last reload"`
}

// PluginToggled is the body of a plugin enable or disable.
type PluginToggled struct {
	Success bool         `json:"success"`
	Data    PluginToggle `json:"data"`
}

// PluginToggle reports a plugin's new state.
type PluginToggle struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
	Change  int64  `json:"change,omitempty" doc:"cluster mode: the change number of the desired state this change created"`
}

// WorkerDatabase is a worker's own database (manifest database: true), as this instance sees it.
type WorkerDatabase struct {
	Worker string `json:"worker"`
	Mode   string `json:"mode" enum:"local,primary" doc:"local: a SQLite file under state_dir (DATABASE_URL a file: URL, DATABASE_PATH its path; a WebAssembly worker gets its folder at /.database for files of its own); primary: a namespace on the libSQL primary of sync mode, reached through an endpoint of the runtime (DATABASE_URL an http: URL)"`
	Size   int64  `json:"size" doc:"bytes it holds now (local: allocated blocks of its folder; primary: as sqld counts them); -1 when it cannot be measured"`
	Limit  int64  `json:"limit" doc:"bytes it may hold: the manifest's limits.database, capped by worker_database_size; 0 for no limit"`
	Error  string `json:"error,omitempty" doc:"why the worker was last stopped or refused for its database (past limits.database), or why it cannot be measured; absent otherwise"`
}

// WorkerDatabaseBody is the body of GET database.
type WorkerDatabaseBody struct {
	Success bool           `json:"success"`
	Data    WorkerDatabase `json:"data"`
}
