// Package cli is the runtime's command-line client: commands registered with Caddy's command
// registry (so they exist in bin/runtime and in every xcaddy build with the module) that
// drive a runtime over HTTP through package client, from a terminal or from CI.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/caddy-runtime/runtime/client"
)

// Exit codes, as the README documents them.
const (
	exitRefused     = 1 // a usage error, or refused by the server
	exitUnreachable = 3 // no answer from the server
	exitAuth        = 4 // the key was not accepted
)

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitCode maps an error to the exit code the README promises.
func exitCode(err error) int {
	var apiErr *client.Error
	var unreachable *client.UnreachableError
	switch {
	case errors.As(err, &unreachable):
		return exitUnreachable
	case errors.As(err, &apiErr) && apiErr.Status == 401:
		return exitAuth
	default:
		return exitRefused
	}
}

func init() {
	for _, c := range []caddycmd.Command{loginCommand(), logoutCommand(), deployCommand(), rollbackCommand(),
		workersCommand(), pluginsCommand(), keysCommand(), healthCommand(), auditCommand()} {
		caddycmd.RegisterCommand(c)
	}
}

// run adapts a command to cobra: the error is printed as "error: …" (with the server's code
// and the request id for a refusal) and the process exits with its code.
func run(f func(env *env, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		e := &env{cmd: cmd, ctx: ctx, out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr()}
		e.json, _ = cmd.Flags().GetBool("json")
		err := f(e, args)
		if err == nil {
			return nil
		}
		fmt.Fprintln(e.errOut, "error: "+err.Error())
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(e.errOut, "run %s --help for the usage\n", cmd.CommandPath())
		}
		stop()
		os.Exit(exitCode(err))
		return nil
	}
}

// env is what a running command works with.
type env struct {
	cmd         *cobra.Command
	ctx         context.Context
	out, errOut io.Writer
	json        bool
}

// targetFlags adds the flags that say which runtime to talk to.
func targetFlags(cmd *cobra.Command) {
	cmd.Flags().String("url", "", "the runtime's base URL (default $RUNTIME_URL, else the profile's)")
	cmd.Flags().String("key", "", "the API key (default $RUNTIME_API_KEY, else the profile's)")
	cmd.Flags().String("profile", "", "the saved login to use (default: the last one logged in)")
	cmd.Flags().Bool("json", false, "print the API's JSON instead of a table, for scripts")
}

// client resolves the runtime and key: flags, then RUNTIME_URL and RUNTIME_API_KEY, then the
// profile.
func (e *env) client() (*client.Client, error) {
	url, _ := e.cmd.Flags().GetString("url")
	key, _ := e.cmd.Flags().GetString("key")
	name, _ := e.cmd.Flags().GetString("profile")
	if url == "" {
		url = os.Getenv("RUNTIME_URL")
	}
	if key == "" {
		key = os.Getenv("RUNTIME_API_KEY")
	}
	if url == "" || key == "" {
		saved, _, err := loadProfiles()
		if err != nil {
			return nil, err
		}
		if name == "" {
			name = saved.Current
		}
		p, ok := saved.Profiles[name]
		switch {
		case ok && url == "":
			url = p.URL
			if key == "" {
				key = p.Key
			}
		case ok && strings.TrimRight(p.URL, "/") == strings.TrimRight(url, "/") && key == "":
			key = p.Key
		case name != "" && !ok && url == "":
			return nil, usagef("no profile named %q; runtime login --profile %s saves one", name, name)
		}
	}
	if url == "" {
		return nil, usagef("which runtime? pass --url or set RUNTIME_URL, or save one with runtime login")
	}
	return client.New(url, key)
}

// emit prints v: as JSON with --json, else through table.
func (e *env) emit(v any, table func(w io.Writer)) error {
	if e.json {
		enc := json.NewEncoder(e.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	w := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
	table(w)
	return w.Flush()
}

// interactive reports whether f is a terminal: progress bars are drawn only there.
func interactive(f io.Writer) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

// unitPath is the API path of a unit name: "_/name" or "@scope/name".
func unitPath(name string) string {
	if strings.HasPrefix(name, "@") {
		return name
	}
	return "_/" + name
}

// splitVersion splits "name@version" (the name may be scoped, "@team/app@1.2.0"); version is
// "" when none is given.
func splitVersion(s string) (name, version string) {
	if i := strings.LastIndex(s, "@"); i > 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// command builds a Caddy command whose cobra form takes the target flags.
func command(name, usage, short, long string, setup func(cmd *cobra.Command)) caddycmd.Command {
	return caddycmd.Command{Name: name, Usage: usage, Short: short, Long: long, CobraFunc: func(cmd *cobra.Command) {
		targetFlags(cmd)
		if setup != nil {
			setup(cmd)
		}
	}}
}

// subcommand adds a subcommand with the target flags to parent.
func subcommand(parent *cobra.Command, use, short, example string, args cobra.PositionalArgs, f func(env *env, args []string) error) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Example: example, Args: args, RunE: run(f)}
	targetFlags(cmd)
	parent.AddCommand(cmd)
	return cmd
}
