package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/client"
	"github.com/caddy-runtime/runtime/internal/hosts"
	"github.com/caddy-runtime/runtime/packages"
)

func deployCommand() caddycmd.Command {
	return command("deploy", "[DIR] [--plugin] [--dry-run] [--canary N] [--wait [--wait-timeout D]] [--secrets-file FILE] [--json]", "Pack a folder and install it as a worker (or a plugin)",
		`Reads DIR's manifest.yaml (or package.json), checks its name and version with the runtime's
rules, packs the folder as a .tgz (leaving out .git, node_modules and what .runtimeignore names;
"deploy: {include: [node_modules]}" in the manifest takes node_modules back in), uploads it,
and prints the URLs that now serve it and the archive's sha256. --dry-run asks the runtime to
check the archive without installing it, and says whether it would replace a version installed
now. --plugin installs a plugin and reloads the plugins. A folder whose manifest declares a
plugin's keys (routes, onRequest, base) is refused without --plugin, and one that declares none
of them (nor menus) with it. The runtime refuses a process worker whose program (its entrypoint,
or a relative path as its command's first word) is not in the archive or not executable.

--canary N installs a worker's new version with N % (1 to 99) of its unpinned requests, the
rest staying on the version served until then, sticky per visitor; grow, promote or abort it
with caddy runtime rollout.

--wait waits until every instance serves the upload. In a cluster (a package store is
configured) the upload's answer carries the change number it created: deploy polls GET cluster
until every instance not gone has applied it, showing progress on stderr, and fails after
--wait-timeout naming the instances that have not. A single instance serves the upload when it
answers, so --wait returns at once. For a process worker, --wait then sends the new version
its first request, which starts its process: when the runtime answers that it could not (the
program exited, crashed or did not listen in time), deploy fails with the runtime's message
and the worker's last log lines.

--secrets-file sets the worker's secrets from a .env-style file (NAME=value lines) before the
upload, in one change, so the new version starts with them; with --dry-run it names them and
sends nothing. Values never appear in the output.

Example:
  caddy runtime deploy ./site --url https://runtime.example.com --key "$RUNTIME_API_KEY"
  caddy runtime deploy ./site --wait --wait-timeout 5m
  caddy runtime deploy ./site --canary 10
  caddy runtime deploy --plugin ./my-plugin
  caddy runtime deploy ./api --secrets-file .env.production`,
		func(cmd *cobra.Command) {
			cmd.Flags().Bool("plugin", false, "deploy a plugin, then reload the plugins")
			cmd.Flags().Bool("dry-run", false, "check the archive on the runtime without installing it")
			cmd.Flags().Int("canary", 0, "send this percentage (1 to 99) of the worker's unpinned requests to the new version, the rest to the version served until then")
			cmd.Flags().Bool("wait", false, "wait until every instance of a cluster has applied the upload, and a process worker has answered its first request (up to --wait-timeout)")
			cmd.Flags().Duration("wait-timeout", 2*time.Minute, "how long --wait waits, e.g. 90s or 5m")
			cmd.Flags().String("secrets-file", "", "a .env-style file of secrets (NAME=value lines) to set on the worker before the upload")
			cmd.Args = cobra.MaximumNArgs(1)
			cmd.RunE = run(deploy)
		})
}

// deployed is what deploy prints with --json.
type deployed struct {
	Name     string          `json:"name"`
	Version  string          `json:"version"`
	SHA256   string          `json:"sha256"`
	Bytes    int64           `json:"bytes"`
	DryRun   bool            `json:"dryRun"`
	URLs     []string        `json:"urls,omitempty"`
	Upload   json.RawMessage `json:"upload"`            // the upload's answer, as the API gave it
	Reloaded json.RawMessage `json:"reload,omitempty"`  // the plugin reload's answer
	Wait     *converged      `json:"wait,omitempty"`    // with --wait: the instances that serve it
	Secrets  []string        `json:"secrets,omitempty"` // with --secrets-file: the names set (never values)
}

func deploy(e *env, args []string) error {
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	plugin, _ := e.cmd.Flags().GetBool("plugin")
	dryRun, _ := e.cmd.Flags().GetBool("dry-run")
	canary, _ := e.cmd.Flags().GetInt("canary")
	if canary != 0 && (canary < 1 || canary > 99 || plugin) {
		return usagef("--canary is a percentage from 1 to 99 of a worker's traffic (plugins have none)")
	}
	wait, _ := e.cmd.Flags().GetBool("wait")
	waitTimeout, _ := e.cmd.Flags().GetDuration("wait-timeout")
	if waitTimeout <= 0 {
		return usagef("--wait-timeout must be positive, e.g. 2m")
	}
	keys := manifestKeys(dir)
	if err := checkKind(e, dir, keys, plugin); err != nil {
		return err
	}
	var secrets map[string]string
	if file, _ := e.cmd.Flags().GetString("secrets-file"); file != "" {
		if plugin {
			return usagef("--secrets-file sets a worker's secrets; plugins have none")
		}
		var err error
		if secrets, err = readEnvFile(file); err != nil {
			return err
		}
	}
	c, err := e.client()
	if err != nil {
		return err
	}

	archive, err := os.CreateTemp("", "runtime-deploy-*.tgz")
	if err != nil {
		return err
	}
	defer os.Remove(archive.Name())
	defer archive.Close()
	packed, err := client.Pack(dir, archive)
	if err != nil {
		return usageError{err.Error()}
	}
	if _, err := archive.Seek(0, io.SeekStart); err != nil {
		return err
	}

	surface := "/workers"
	if plugin {
		surface = "/plugins"
	}
	query := url.Values{}
	if dryRun {
		query.Set("dryRun", "1")
	}
	if canary > 0 {
		query.Set("canary", strconv.Itoa(canary))
	}
	path := surface + "/upload"
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	var progress func(int64)
	if interactive(e.errOut) && !e.json {
		progress = bar(e.errOut, fmt.Sprintf("%s %s", packed.Name, packed.Version), packed.Bytes)
	}
	out := deployed{Name: packed.Name, Version: packed.Version, SHA256: packed.SHA256, Bytes: packed.Bytes, DryRun: dryRun}
	if len(secrets) > 0 {
		out.Secrets = sortedNames(secrets)
		if !dryRun {
			var changed api.SecretsChanged
			if err := c.JSON(e.ctx, "PATCH", "/workers/"+unitPath(packed.Name)+"/secrets", api.SecretsChange{Set: secrets}, &changed); err != nil {
				return fmt.Errorf("setting the secrets of %s (nothing was uploaded): %w", packed.Name, err)
			}
		}
	}
	err = c.Upload(e.ctx, path, filepath.Base(dir)+".tgz", archive, packed.Bytes, progress, &out.Upload)
	if progress != nil {
		fmt.Fprintln(e.errOut)
	}
	if apiErr := (*client.Error)(nil); errors.As(err, &apiErr) && apiErr.Code == "HEALTHCHECK_FAILED" {
		// Installed, not activated: the message says what is served instead (or that this
		// version is, failing), the reason and the worker's last lines.
		return fmt.Errorf("installed %s %s, but it did not pass its check: %w", packed.Name, packed.Version, err)
	}
	if err != nil {
		return err
	}
	if plugin && !dryRun {
		if err := c.JSON(e.ctx, "POST", "/plugins/reload", nil, &out.Reloaded); err != nil {
			return fmt.Errorf("installed %s %s, but reloading the plugins failed: %w", packed.Name, packed.Version, err)
		}
	}
	if !plugin && !dryRun {
		d, err := c.Discover(e.ctx)
		if err != nil {
			return err
		}
		base := c.BaseURL()
		if d.Workers != "" {
			base = strings.TrimRight(d.Workers, "/")
		}
		out.URLs = []string{base + "/" + packed.Name + "/", base + "/" + packed.Name + "@" + packed.Version + "/"}
		// With workers_domain the worker's own host replaces its unpinned path; pinned
		// versions stay on the path form.
		if domain, err := hosts.ParseDomain(d.WorkersDomain); err == nil && domain.Name != "" {
			if u, err := domain.URL(packed.Name); err == nil {
				out.URLs[0] = u + "/"
			}
		}
	}
	if wait && !dryRun {
		if out.Wait, err = waitConverged(e, c, uploadChange(out.Upload), waitTimeout); err != nil {
			return err
		}
		if !plugin && isProcess(keys) {
			if err := firstRequest(e, c, packed.Name, packed.Version, out.URLs[1], waitTimeout); err != nil {
				return err
			}
		}
	}
	var staged struct {
		Data struct {
			Replaces bool               `json:"replaces"`
			Split    []api.TrafficShare `json:"split"`
			Worker   api.InstalledUnit  `json:"worker"`
			Plugin   api.InstalledUnit  `json:"plugin"`
		} `json:"data"`
	}
	_ = json.Unmarshal(out.Upload, &staged)
	if !e.json {
		// The runtime ignores a manifest key it does not read; a typo must not go unseen.
		for _, warning := range append(staged.Data.Worker.Warnings, staged.Data.Plugin.Warnings...) {
			fmt.Fprintln(e.errOut, "warning: "+warning)
		}
	}
	return e.emit(out, func(w io.Writer) {
		switch {
		case dryRun && staged.Data.Replaces:
			fmt.Fprintf(w, "%s %s would replace the %s %s installed now (dry run: nothing was installed)\n", packed.Name, packed.Version, packed.Name, packed.Version)
		case dryRun:
			fmt.Fprintf(w, "%s %s would install (dry run: nothing was installed)\n", packed.Name, packed.Version)
		case plugin:
			fmt.Fprintf(w, "Installed plugin %s %s and reloaded the plugins\n", packed.Name, packed.Version)
			var r api.PluginReload
			if json.Unmarshal(out.Reloaded, &r) == nil {
				for _, f := range r.Failed {
					fmt.Fprintf(w, "  not loaded: %s: %s\n", f.Name, f.Error)
				}
			}
		default:
			fmt.Fprintf(w, "Deployed %s %s\n", packed.Name, packed.Version)
			for _, u := range out.URLs {
				fmt.Fprintf(w, "  %s\n", u)
			}
			if len(staged.Data.Split) > 0 {
				fmt.Fprintf(w, "Canary: %s; grow it with %s rollout set, then rollout promote or rollout abort\n",
					describeSplit(packed.Name, staged.Data.Split), program(e.cmd))
			}
		}
		switch {
		case len(out.Secrets) > 0 && dryRun:
			fmt.Fprintf(w, "Would set secrets %s (dry run: not sent)\n", strings.Join(out.Secrets, ", "))
		case len(out.Secrets) > 0:
			fmt.Fprintf(w, "Set secrets %s\n", strings.Join(out.Secrets, ", "))
		}
		fmt.Fprintf(w, "sha256 %s (%s)\n", packed.SHA256, size(packed.Bytes))
		switch {
		case out.Wait == nil:
		case out.Wait.Change == 0:
			fmt.Fprintln(w, "Served by this instance (a single instance serves an upload when it answers)")
		default:
			fmt.Fprintf(w, "Served by all %d live instances (change %d)\n", len(out.Wait.Instances), out.Wait.Change)
		}
	})
}

// bar draws a progress bar of an upload of total bytes on w, a terminal.
func bar(w io.Writer, label string, total int64) func(int64) {
	const width = 30
	last := -1
	return func(sent int64) {
		pct := int(sent * 100 / max(total, 1))
		if pct == last {
			return
		}
		last = pct
		filled := pct * width / 100
		fmt.Fprintf(w, "\rUploading %s [%s%s] %3d%%", label, strings.Repeat("#", filled), strings.Repeat(" ", width-filled), pct)
	}
}

func rollbackCommand() caddycmd.Command {
	return command("rollback", "NAME", "Serve a worker's previous version again",
		`Disables the newest enabled version of the worker, so that the version before it serves,
and says which. Enable it again with caddy runtime workers enable NAME@VERSION.

Example:
  caddy runtime rollback @team/shop`,
		func(cmd *cobra.Command) {
			cmd.Args = cobra.ExactArgs(1)
			cmd.RunE = run(rollback)
		})
}

func rollback(e *env, args []string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	name, _ := splitVersion(args[0])
	w, err := findWorker(e, c, name)
	if err != nil {
		return err
	}
	var enabled []string
	for _, v := range w.Versions {
		if !slices.Contains(w.DisabledVersions, v) {
			enabled = append(enabled, v)
		}
	}
	if len(enabled) < 2 {
		return usagef("%s has %d enabled version(s): there is no previous version to roll back to", name, len(enabled))
	}
	newest, previous := enabled[len(enabled)-1], enabled[len(enabled)-2]
	var raw json.RawMessage
	if err := c.JSON(e.ctx, "POST", "/workers/"+unitPath(name)+"/"+newest+"/disable", nil, &raw); err != nil {
		return err
	}
	return e.emit(raw, func(w io.Writer) {
		fmt.Fprintf(w, "Disabled %s %s: %s is served now\n", name, newest, previous)
	})
}

// manifestKeys reads the top-level keys of dir's manifest; nil when there is none to read,
// which Pack then explains.
func manifestKeys(dir string) map[string]any {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil
	}
	defer root.Close()
	md, err := packages.ReadMetadata(root, ".")
	if err != nil {
		return nil
	}
	var keys map[string]any
	if md.Decode(&keys) != nil {
		return nil
	}
	return keys
}

// Manifest keys only a plugin has, and only a worker.
var (
	pluginKeys = []string{"routes", "onRequest", "base"}
	workerKeys = []string{"entrypoint", "command"}
)

// declared returns those of names that keys holds.
func declared(keys map[string]any, names ...string) []string {
	var out []string
	for _, n := range names {
		if _, ok := keys[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// checkKind refuses to deploy dir as the other kind of unit than its manifest describes: a
// plugin's folder (routes, onRequest or base) as a worker, where those keys would be ignored
// and the folder served as files, or with --plugin a folder with none of them (and none of
// menus), which would install a plugin that does nothing.
func checkKind(e *env, dir string, keys map[string]any, plugin bool) error {
	if keys == nil {
		return nil
	}
	prog := program(e.cmd)
	if plug := declared(keys, pluginKeys...); !plugin && len(plug) > 0 {
		return usagef("%s is a plugin's folder (its manifest declares %s): deploy it with --plugin, as in %s deploy --plugin %s",
			dir, strings.Join(plug, ", "), prog, dir)
	}
	if plugin && len(declared(keys, append(pluginKeys, "menus")...)) == 0 {
		why := "none of routes, onRequest, base or menus"
		if work := declared(keys, workerKeys...); len(work) > 0 {
			why = strings.Join(work, ", ") + ", a worker's key, and " + why
		}
		return usagef("%s is a worker's folder (its manifest declares %s): deploy it without --plugin, as in %s deploy %s",
			dir, why, prog, dir)
	}
	return nil
}

// isProcess tells a process worker's manifest keys: a command, or an entrypoint that is not an
// HTML page (the runtime's rule).
func isProcess(keys map[string]any) bool {
	if command, ok := keys["command"].([]any); ok && len(command) > 0 {
		return true
	}
	entry, _ := keys["entrypoint"].(string)
	lower := strings.ToLower(entry)
	return entry != "" && !strings.HasSuffix(lower, ".html") && !strings.HasSuffix(lower, ".htm")
}

// logTail is how many of a process worker's last log lines a failed first request shows.
const logTail = 20

// firstRequest sends a process worker's new version its first request, which starts its
// process, and fails with the runtime's answer and the worker's last log lines when the runtime
// could not have it answer (5xx: it did not start, crashed or timed out).
func firstRequest(e *env, c *client.Client, name, version, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	defer cancel()
	err := c.Check(ctx, url)
	if !errors.As(err, new(*client.Error)) {
		return err // nil: it answered; or the runtime cannot be reached
	}
	var b strings.Builder
	fmt.Fprintf(&b, "deployed %s %s, but its first request (%s) failed: %v", name, version, url, err)
	var logs api.WorkerLogs
	if lerr := c.JSON(e.ctx, "GET", fmt.Sprintf("/workers/%s/logs?limit=%d", unitPath(name), logTail), nil, &logs); lerr != nil {
		fmt.Fprintf(&b, "\nits logs cannot be read: %v", lerr)
	} else if len(logs.Lines) == 0 {
		b.WriteString("\nit wrote no log lines")
	} else {
		b.WriteString("\nits last log lines:")
		for _, l := range logs.Lines {
			fmt.Fprintf(&b, "\n  %s %s [%d] %s: %s", l.Time, l.Version, l.PID, l.Stream, l.Text)
		}
	}
	fmt.Fprintf(&b, "\n%s rollback %s serves the version before it again, if it has one", program(e.cmd), name)
	return errors.New(b.String())
}
