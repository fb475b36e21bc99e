package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/client"
)

func loginCommand() caddycmd.Command {
	return command("login", "--url URL [--key KEY] [--profile NAME]", "Save a runtime's URL and API key for the other commands",
		`Checks the key against the runtime and saves both in the user's config folder
(profiles.json, readable by the user alone), as a profile named after the server's host
unless --profile names it. The profile becomes the one used when no --url is given.

Without --key, login asks for the key on the terminal without showing it, or reads it from
the first line of stdin when stdin is not a terminal (a pipe, a file), so the key stays out
of the shell's history and the process list.

Example:
  caddy runtime login --url https://runtime.example.com
  caddy runtime login --url https://runtime.example.com --key "$RUNTIME_API_KEY"
  printf '%s\n' "$RUNTIME_API_KEY" | caddy runtime login --url https://runtime.example.com`,
		func(cmd *cobra.Command) { cmd.RunE = run(login) })
}

func login(e *env, args []string) error {
	if len(args) > 0 {
		return usagef("login takes no arguments")
	}
	url, _ := e.cmd.Flags().GetString("url")
	key, _ := e.cmd.Flags().GetString("key")
	if url == "" {
		return usagef("login needs --url, the runtime's address")
	}
	c, err := client.New(url, key)
	if err != nil {
		return usageError{err.Error()}
	}
	if key == "" {
		if key, err = readKey(e, c.BaseURL()); err != nil {
			return err
		}
		if c, err = client.New(url, key); err != nil {
			return usageError{err.Error()}
		}
	}
	var s api.Session
	if err := c.JSON(e.ctx, "GET", "/admin/session", nil, &s); err != nil {
		return err
	}
	saved, file, err := loadProfiles()
	if err != nil {
		return err
	}
	name, _ := e.cmd.Flags().GetString("profile")
	if name == "" {
		name = profileName(url)
	}
	saved.Profiles[name] = profile{URL: c.BaseURL(), Key: key}
	saved.Current = name
	if err := saved.save(file); err != nil {
		return fmt.Errorf("saving the profile: %w", err)
	}
	out := loggedIn{URL: c.BaseURL(), Profile: name, File: file, Principal: s.Principal}
	return e.emit(out, func(w io.Writer) {
		fmt.Fprintf(w, "Logged in to %s as %s (%s); saved as profile %q in %s\n", out.URL, out.Principal.Name, out.Principal.Role, name, file)
	})
}

// readKey asks for the key of the runtime at url: on a terminal without echo, else the first
// line of stdin.
func readKey(e *env, url string) (string, error) {
	in := e.cmd.InOrStdin()
	var key string
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(e.errOut, "API key for %s (not shown): ", url)
		typed, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(e.errOut)
		if err != nil {
			return "", fmt.Errorf("reading the key from the terminal: %w", err)
		}
		key = string(typed)
	} else {
		line, err := bufio.NewReader(in).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("reading the key from stdin: %w", err)
		}
		key = line
	}
	if key = strings.TrimSpace(key); key == "" {
		return "", usagef("login needs a key: pass --key, type it when asked, or pipe it on stdin")
	}
	return key, nil
}

// loggedIn is what login prints with --json.
type loggedIn struct {
	URL       string        `json:"url"`
	Profile   string        `json:"profile"`
	File      string        `json:"file"`
	Principal api.Principal `json:"principal"`
}

func logoutCommand() caddycmd.Command {
	return command("logout", "[--profile NAME]", "Remove a saved runtime login",
		`Removes the profile (by default the current one) from the profiles file. The key itself
stays valid; revoke it with caddy runtime keys revoke.

Example:
  caddy runtime logout --profile runtime.example.com`,
		func(cmd *cobra.Command) { cmd.RunE = run(logout) })
}

func logout(e *env, _ []string) error {
	saved, file, err := loadProfiles()
	if err != nil {
		return err
	}
	name, _ := e.cmd.Flags().GetString("profile")
	if name == "" {
		name = saved.Current
	}
	if _, ok := saved.Profiles[name]; !ok {
		return usagef("no saved login named %q", name)
	}
	delete(saved.Profiles, name)
	if saved.Current == name {
		saved.Current = ""
	}
	if err := saved.save(file); err != nil {
		return err
	}
	return e.emit(struct {
		Profile string `json:"profile"`
	}{name}, func(w io.Writer) { fmt.Fprintf(w, "Removed the login %q\n", name) })
}

func healthCommand() caddycmd.Command {
	return command("health", "[--url URL]", "Show whether a runtime is up and ready",
		`Reads the runtime's readiness probe and version; exits 1 when it is not ready.

Example:
  caddy runtime health --url https://runtime.example.com`,
		func(cmd *cobra.Command) { cmd.RunE = run(health) })
}

func health(e *env, _ []string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	var h api.Health
	if err := c.JSON(e.ctx, "GET", "/health/ready", nil, &h); err != nil {
		return err
	}
	return e.emit(h, func(w io.Writer) { fmt.Fprintf(w, "%s\t%s\tversion %s\n", c.BaseURL(), h.Status, h.Version) })
}

func auditCommand() caddycmd.Command {
	return command("audit", "[--action A] [--actor NAME] [--limit N]", "List the audit trail, newest first",
		`Prints audited actions (logins, key changes, uploads, enable/disable, deletes, reloads).

Example:
  caddy runtime audit --action worker.upload --limit 20`,
		func(cmd *cobra.Command) {
			cmd.Flags().String("action", "", "only this action, e.g. key.create")
			cmd.Flags().String("actor", "", "only actions of this key name")
			cmd.Flags().Int("limit", 50, "entries to show")
			cmd.RunE = run(audit)
		})
}

func audit(e *env, _ []string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	q := url.Values{}
	for _, f := range []string{"action", "actor"} {
		if v, _ := e.cmd.Flags().GetString(f); v != "" {
			q.Set(f, v)
		}
	}
	limit, _ := e.cmd.Flags().GetInt("limit")
	q.Set("limit", fmt.Sprint(limit))
	var page api.AuditPage
	var raw json.RawMessage
	if err := c.JSON(e.ctx, "GET", "/audit?"+q.Encode(), nil, &raw); err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		return err
	}
	return e.emit(raw, func(w io.Writer) {
		fmt.Fprintln(w, "TIME\tACTOR\tACTION\tTARGET\tOUTCOME")
		for _, a := range page.Entries {
			actor := "-"
			if a.Actor != nil {
				actor = a.Actor.Name
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", a.Time, actor, a.Action, a.Target, a.Outcome)
		}
	})
}

// since formats a Unix time for a table.
func since(unix int64) string {
	if unix == 0 {
		return "-"
	}
	return time.Unix(unix, 0).UTC().Format("2006-01-02 15:04")
}

// joined prints a list for a table cell.
func joined(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}
