package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/client"
)

func deployCommand() caddycmd.Command {
	return command("deploy", "[DIR] [--plugin] [--dry-run] [--wait [--wait-timeout D]] [--json]", "Pack a folder and install it as a worker (or a plugin)",
		`Reads DIR's manifest.yaml (or package.json), checks its name and version with the runtime's
rules, packs the folder as a .tgz (leaving out .git, node_modules and what .runtimeignore names;
"deploy: {include: [node_modules]}" in the manifest takes node_modules back in), uploads it,
and prints the URLs that now serve it and the archive's sha256. --dry-run asks the runtime to check the archive without installing it;
--plugin installs a plugin and reloads the plugins.

--wait waits until every instance serves the upload. In a cluster (a package store is
configured) the upload's answer carries the change number it created: deploy polls GET cluster
until every instance not gone has applied it, showing progress on stderr, and fails after
--wait-timeout naming the instances that have not. A single instance serves the upload when it
answers, so --wait returns at once.

Example:
  caddy runtime deploy ./site --url https://runtime.example.com --key "$RUNTIME_API_KEY"
  caddy runtime deploy ./site --wait --wait-timeout 5m
  caddy runtime deploy --plugin ./my-plugin`,
		func(cmd *cobra.Command) {
			cmd.Flags().Bool("plugin", false, "deploy a plugin, then reload the plugins")
			cmd.Flags().Bool("dry-run", false, "check the archive on the runtime without installing it")
			cmd.Flags().Bool("wait", false, "wait until every instance of a cluster has applied the upload (up to --wait-timeout)")
			cmd.Flags().Duration("wait-timeout", 2*time.Minute, "how long --wait waits, e.g. 90s or 5m")
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
	Upload   json.RawMessage `json:"upload"`           // the upload's answer, as the API gave it
	Reloaded json.RawMessage `json:"reload,omitempty"` // the plugin reload's answer
	Wait     *converged      `json:"wait,omitempty"`   // with --wait: the instances that serve it
}

func deploy(e *env, args []string) error {
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	plugin, _ := e.cmd.Flags().GetBool("plugin")
	dryRun, _ := e.cmd.Flags().GetBool("dry-run")
	wait, _ := e.cmd.Flags().GetBool("wait")
	waitTimeout, _ := e.cmd.Flags().GetDuration("wait-timeout")
	if waitTimeout <= 0 {
		return usagef("--wait-timeout must be positive, e.g. 2m")
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
	path := surface + "/upload"
	if dryRun {
		path += "?dryRun=1"
	}
	var progress func(int64)
	if interactive(e.errOut) && !e.json {
		progress = bar(e.errOut, fmt.Sprintf("%s %s", packed.Name, packed.Version), packed.Bytes)
	}
	out := deployed{Name: packed.Name, Version: packed.Version, SHA256: packed.SHA256, Bytes: packed.Bytes, DryRun: dryRun}
	err = c.Upload(e.ctx, path, filepath.Base(dir)+".tgz", archive, packed.Bytes, progress, &out.Upload)
	if progress != nil {
		fmt.Fprintln(e.errOut)
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
	}
	if wait && !dryRun {
		if out.Wait, err = waitConverged(e, c, uploadChange(out.Upload), waitTimeout); err != nil {
			return err
		}
	}
	return e.emit(out, func(w io.Writer) {
		switch {
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
		}
		fmt.Fprintf(w, "sha256 %s (%d bytes)\n", packed.SHA256, packed.Bytes)
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
