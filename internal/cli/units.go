package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/client"
)

func findWorker(e *env, c *client.Client, name string) (api.WorkerRecord, error) {
	var list []api.WorkerRecord
	if err := c.JSON(e.ctx, "GET", "/workers", nil, &list); err != nil {
		return api.WorkerRecord{}, err
	}
	for _, w := range list {
		if w.Name == name {
			return w, nil
		}
	}
	return api.WorkerRecord{}, &client.Error{Status: 404, Code: "WORKER_NOT_FOUND", Message: fmt.Sprintf("no worker named %s that this key may see", name)}
}

// act sends a change and prints its answer, or done with a table.
func act(e *env, method, path, done string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.JSON(e.ctx, method, path, nil, &raw); err != nil {
		return err
	}
	return e.emit(raw, func(w io.Writer) { fmt.Fprintln(w, done) })
}

// versioned parses NAME@VERSION for a command that needs the version.
func versioned(arg string) (name, version string, err error) {
	name, version = splitVersion(arg)
	if version == "" {
		return "", "", usagef("name the version: %s@VERSION", name)
	}
	return name, version, nil
}

func workersCommand() caddycmd.Command {
	return caddycmd.Command{Name: "workers", Usage: "list|enable|disable|delete|restart|logs", Short: "List and manage workers",
		Long: "Lists the workers this key may see and changes them. Names like @team/app@1.2.0 name a version.",
		CobraFunc: func(cmd *cobra.Command) {
			cmd.RunE = unknownCommand
			subcommand(cmd, "list", "List workers with their versions", "  caddy runtime workers list --json", cobra.NoArgs, func(e *env, _ []string) error {
				return listing(e, "/workers", "NAME\tVERSION\tSTATE\tKIND\tSIZE\tSOURCE", func(raw json.RawMessage, w io.Writer) {
					var list []api.WorkerRecord
					_ = json.Unmarshal(raw, &list)
					for _, wk := range list {
						for _, v := range wk.Versions {
							state := versionState(wk, v)
							kind := wk.Kinds[v]
							if kind == "" {
								kind = "-"
							}
							fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", wk.Name, v, state, kind, size(wk.Sizes[v]), wk.Source)
						}
					}
				})
			})
			for _, op := range []string{"enable", "disable"} {
				subcommand(cmd, op+" NAME@VERSION", strings.ToUpper(op[:1])+op[1:]+" a version", "  caddy runtime workers "+op+" @team/shop@1.2.0", cobra.ExactArgs(1), func(e *env, args []string) error {
					name, version, err := versioned(args[0])
					if err != nil {
						return err
					}
					return act(e, "POST", "/workers/"+unitPath(name)+"/"+version+"/"+op, op+"d "+name+" "+version)
				})
			}
			subcommand(cmd, "delete NAME[@VERSION]", "Delete a worker, or one version of it", "  caddy runtime workers delete shop@1.0.0", cobra.ExactArgs(1), func(e *env, args []string) error {
				name, version := splitVersion(args[0])
				path := "/workers/" + unitPath(name)
				if version != "" {
					path += "/" + version
				}
				return act(e, "DELETE", path, "deleted "+args[0])
			})
			subcommand(cmd, "restart NAME", "Drain and restart a process worker", "  caddy runtime workers restart api", cobra.ExactArgs(1), func(e *env, args []string) error {
				name, _ := splitVersion(args[0])
				return act(e, "POST", "/workers/"+unitPath(name)+"/restart", "restarted "+name)
			})
			logs := subcommand(cmd, "logs NAME", "Print a process worker's recent output", "  caddy runtime workers logs api -f", cobra.ExactArgs(1), workerLogs)
			logs.Flags().BoolP("follow", "f", false, "keep printing new lines until interrupted")
			logs.Flags().Int("limit", 100, "recent lines to print")
		}}
}

func workerLogs(e *env, args []string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	name, _ := splitVersion(args[0])
	follow, _ := e.cmd.Flags().GetBool("follow")
	limit, _ := e.cmd.Flags().GetInt("limit")
	path := fmt.Sprintf("/workers/%s/logs?limit=%d", unitPath(name), limit)
	// A line prints as the API wrote it with --json: its JSON on one line.
	print := func(l api.WorkerLogLine) {
		if !e.json {
			fmt.Fprintf(e.out, "%s %s [%d] %s: %s\n", l.Time, l.Version, l.PID, l.Stream, l.Text)
			return
		}
		raw, _ := json.Marshal(l)
		fmt.Fprintln(e.out, string(raw))
	}
	if !follow {
		var page api.WorkerLogs
		if err := c.JSON(e.ctx, "GET", path, nil, &page); err != nil {
			return err
		}
		for _, l := range page.Lines {
			print(l)
		}
		if len(page.Lines) == 0 {
			return saySilent(e, c, name)
		}
		return nil
	}
	if static, err := isStatic(e, c, name); err != nil || static {
		if err == nil {
			err = saySilent(e, c, name)
		}
		return err
	}
	body, err := c.Stream(e.ctx, path+"&follow=1")
	if err != nil {
		return err
	}
	defer body.Close()
	// Server-Sent Events: "event: line" then "data: {…}"; heartbeats are comments.
	s := bufio.NewScanner(body)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	event := ""
	for s.Scan() {
		line := s.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "line":
			var l api.WorkerLogLine
			_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &l)
			print(l)
		case strings.HasPrefix(line, "data: ") && event == "end":
			return nil
		}
	}
	if e.ctx.Err() != nil {
		return nil // interrupted: the usual way to stop following
	}
	return s.Err()
}

// isStatic tells whether no installed version of the worker runs a process: such a worker
// writes no logs.
func isStatic(e *env, c *client.Client, name string) (bool, error) {
	w, err := findWorker(e, c, name)
	if err != nil {
		return false, err
	}
	for _, kind := range w.Kinds {
		if kind == "process" || kind == "js" { // a JavaScript worker is a process too
			return false, nil
		}
	}
	return len(w.Kinds) > 0, nil
}

// saySilent explains an empty log: a static worker has none; a process worker has written
// nothing yet (or its lines were dropped from the runtime's log book). With --json it prints
// nothing, as the API answered no line.
func saySilent(e *env, c *client.Client, name string) error {
	if e.json {
		return nil
	}
	static, err := isStatic(e, c, name)
	switch {
	case err != nil:
		return err
	case static:
		fmt.Fprintf(e.out, "%s is a static worker: static workers have no logs (only process workers, which run a program of their own, write them)\n", name)
	default:
		fmt.Fprintf(e.out, "%s has written no log lines yet (its process starts on its first request)\n", name)
	}
	return nil
}

func pluginsCommand() caddycmd.Command {
	return caddycmd.Command{Name: "plugins", Usage: "list|loaded|reload|enable|disable|delete", Short: "List and manage plugins",
		Long: "Lists the installed and loaded plugins and changes them. Installing one is caddy runtime deploy --plugin.",
		CobraFunc: func(cmd *cobra.Command) {
			cmd.RunE = unknownCommand
			subcommand(cmd, "list", "List installed plugins", "  caddy runtime plugins list", cobra.NoArgs, func(e *env, _ []string) error {
				return listing(e, "/plugins", "NAME\tVERSION\tENABLED\tSOURCE", func(raw json.RawMessage, w io.Writer) {
					var list []api.PluginRecord
					_ = json.Unmarshal(raw, &list)
					for _, p := range list {
						fmt.Fprintf(w, "%s\t%s\t%v\t%s\n", p.Name, p.Version, p.Enabled, p.Source)
					}
				})
			})
			subcommand(cmd, "loaded", "List the plugins loaded now, in load order", "  caddy runtime plugins loaded", cobra.NoArgs, func(e *env, _ []string) error {
				return listing(e, "/plugins/loaded", "NAME\tVERSION\tBASE", func(raw json.RawMessage, w io.Writer) {
					var list []api.LoadedPlugin
					_ = json.Unmarshal(raw, &list)
					for _, p := range list {
						fmt.Fprintf(w, "%s\t%s\t%s\n", p.Name, p.Version, p.Base)
					}
				})
			})
			subcommand(cmd, "reload", "Load the enabled plugins again", "  caddy runtime plugins reload", cobra.NoArgs, func(e *env, _ []string) error {
				return act(e, "POST", "/plugins/reload", "reloaded the plugins")
			})
			for _, op := range []string{"enable", "disable"} {
				subcommand(cmd, op+" NAME", strings.ToUpper(op[:1])+op[1:]+" a plugin (and reload)", "  caddy runtime plugins "+op+" hello", cobra.ExactArgs(1), func(e *env, args []string) error {
					return act(e, "POST", "/plugins/"+url.PathEscape(args[0])+"/"+op, op+"d "+args[0])
				})
			}
			subcommand(cmd, "delete NAME", "Delete a plugin (and reload)", "  caddy runtime plugins delete hello", cobra.ExactArgs(1), func(e *env, args []string) error {
				return act(e, "DELETE", "/plugins/"+url.PathEscape(args[0]), "deleted "+args[0])
			})
		}}
}

// versionState is a version's STATE in workers list: the worker's state for the version it
// serves (serving, failing, crash-looping, not-started), else disabled, failed (its check) or
// enabled.
func versionState(wk api.WorkerRecord, version string) string {
	switch {
	case slices.Contains(wk.DisabledVersions, version):
		return "disabled"
	case version == wk.Served && wk.State != "":
		return wk.State
	case slices.ContainsFunc(wk.FailedVersions, func(f api.FailedVersion) bool { return f.Version == version }):
		return "failed"
	}
	return "enabled"
}

// listing prints a GET answer: its JSON, or rows through table.
func listing(e *env, path, header string, table func(raw json.RawMessage, w io.Writer)) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.JSON(e.ctx, "GET", path, nil, &raw); err != nil {
		return err
	}
	return e.emit(raw, func(w io.Writer) {
		fmt.Fprintln(w, header)
		table(raw, w)
	})
}

func keysCommand() caddycmd.Command {
	return caddycmd.Command{Name: "keys", Usage: "list|create|revoke", Short: "List, create and revoke API keys",
		Long: "Manages the API keys this key may see. A new key's secret is printed once.",
		CobraFunc: func(cmd *cobra.Command) {
			cmd.RunE = unknownCommand
			subcommand(cmd, "list", "List keys", "  caddy runtime keys list", cobra.NoArgs, func(e *env, _ []string) error {
				return listing(e, "/keys", "ID\tNAME\tPREFIX\tROLE\tNAMESPACES\tCREATED\tEXPIRES\tLAST USED", func(raw json.RawMessage, w io.Writer) {
					var page api.KeyList
					_ = json.Unmarshal(raw, &page)
					for _, k := range page.Keys {
						fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.KeyPrefix, k.Role, joined(k.Namespaces),
							since(k.CreatedAt), since(k.ExpiresAt), since(k.LastUsedAt))
					}
				})
			})
			create := subcommand(cmd, "create NAME", "Create a key and print its secret once", "  caddy runtime keys create ci --role editor --namespace @team --expires 90d", cobra.ExactArgs(1), createKey)
			create.Flags().String("role", "editor", "admin, editor, viewer or custom")
			create.Flags().StringSlice("permission", nil, "a permission of a custom key (repeat)")
			create.Flags().StringSlice("namespace", nil, "a namespace the key may act in, e.g. @team (repeat; default: yours)")
			create.Flags().String("expires", "", "lifetime, e.g. 30d, 6w, 1y (default: never)")
			subcommand(cmd, "revoke ID", "Revoke a key", "  caddy runtime keys revoke 12", cobra.ExactArgs(1), func(e *env, args []string) error {
				return act(e, "DELETE", "/keys/"+url.PathEscape(args[0]), "revoked key "+args[0])
			})
		}}
}

func createKey(e *env, args []string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	body := api.CreateKeyRequest{Name: args[0]}
	body.Role, _ = e.cmd.Flags().GetString("role")
	body.Permissions, _ = e.cmd.Flags().GetStringSlice("permission")
	body.Namespaces, _ = e.cmd.Flags().GetStringSlice("namespace")
	body.ExpiresIn, _ = e.cmd.Flags().GetString("expires")
	var raw json.RawMessage
	if err := c.JSON(e.ctx, "POST", "/keys", body, &raw); err != nil {
		return err
	}
	var created api.CreateKeyResponse
	_ = json.Unmarshal(raw, &created)
	return e.emit(raw, func(w io.Writer) {
		fmt.Fprintf(w, "Created key %s (id %d). Its secret, shown this once:\n%s\n", created.Data.Name, created.Data.ID, created.Data.Key)
	})
}
