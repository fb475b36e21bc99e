// Package cli is the runtime's command-line client: Caddy commands that drive a runtime over
// HTTP through package client, from a terminal or from CI. The module's entry point registers
// them once, as the subcommands of one runtime command (caddy runtime deploy …), so that they
// cannot clash with another module's commands in an xcaddy build; bin/runtime also offers them
// at its top level.
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
	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/caddy-runtime/runtime/client"
)

// Exit codes, as docs/cli.md documents them.
const (
	exitRefused     = 1 // a usage error, or refused by the server
	exitUnreachable = 3 // no answer from the server
	exitAuth        = 4 // the key was not accepted
)

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitCode maps an error to the exit code docs/cli.md promises.
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

// Commands returns the client's commands. The module's entry point registers them under
// Group's command; they are not registered here, so that importing the package changes no
// binary's command line.
func Commands() []caddycmd.Command {
	return []caddycmd.Command{loginCommand(), logoutCommand(), deployCommand(), rollbackCommand(), rolloutCommand(), cronCommand(), workersCommand(), secretsCommand(), domainsCommand(),
		pluginsCommand(), keysCommand(), healthCommand(), clusterCommand(), auditCommand(), versionCommand(), buildInfoCommand()}
}

// Group returns the runtime command, whose subcommands are subs: the one command the module
// adds to Caddy's command line.
func Group(subs []caddycmd.Command) caddycmd.Command {
	return caddycmd.Command{Name: "runtime", Usage: "<command>", Short: "Drive a runtime: deploy, workers, keys, … (the runtime module's commands)",
		Long: `The runtime module's commands. Most drive a runtime over HTTP, from a terminal or from CI:
the target comes from --url, else $RUNTIME_URL, else the profile caddy runtime login saved; the key
from --key, else $RUNTIME_API_KEY, else the profile. Every such command takes --json.

Exit codes: 0 done; 1 a usage error or a refusal from the server; 3 the server cannot be
reached; 4 the key was not accepted.`,
		CobraFunc: func(cmd *cobra.Command) {
			for _, sub := range subs {
				cmd.AddCommand(cobraCommand(sub))
			}
			cmd.RunE = unknownCommand
			helpNamed(cmd)
		}}
}

// TopLevel returns c for a binary that offers it at its top level (bin/runtime deploy): its
// help names the program as the user ran it, as it does under the runtime command.
func TopLevel(c caddycmd.Command) caddycmd.Command {
	inner := c
	c.CobraFunc = func(cmd *cobra.Command) {
		setUp(inner, cmd)
		helpNamed(cmd)
	}
	return c
}

// program is how the user ran the runtime's commands, for messages and help: "runtime" in
// bin/runtime (its root command is named so, and offers them at its top level), else the
// binary and its runtime command, "caddy runtime".
func program(cmd *cobra.Command) string {
	root := cmd.Root()
	if root.Name() == "runtime" {
		return "runtime"
	}
	for c := cmd; c.HasParent(); c = c.Parent() {
		if c.Name() == "runtime" && c.Parent() == root {
			return c.CommandPath()
		}
	}
	return root.Name()
}

// writtenAs is how the commands' texts name the program; help shows program instead.
const writtenAs = "caddy runtime"

// helpNamed makes cmd's help, and its subcommands', name the program as the user ran it.
func helpNamed(cmd *cobra.Command) {
	help := cmd.HelpFunc()
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		if prog := program(c); prog != writtenAs {
			c.Long = strings.ReplaceAll(c.Long, writtenAs, prog)
			c.Example = strings.ReplaceAll(c.Example, writtenAs, prog)
			for _, sub := range c.Commands() {
				sub.Short = strings.ReplaceAll(sub.Short, writtenAs, prog)
			}
		}
		help(c, args)
	})
}

// cobraCommand builds the cobra form of c as Caddy builds a top-level command's.
func cobraCommand(c caddycmd.Command) *cobra.Command {
	cmd := &cobra.Command{Use: strings.TrimSpace(c.Name + " " + c.Usage), Short: c.Short, Long: c.Long}
	setUp(c, cmd)
	return cmd
}

// setUp gives cmd, the cobra form of c, what c declares: through its CobraFunc, else its Func
// and Flags, as Caddy does.
func setUp(c caddycmd.Command, cmd *cobra.Command) {
	if c.CobraFunc != nil {
		c.CobraFunc(cmd)
		return
	}
	cmd.RunE = caddycmd.WrapCommandFuncForCobra(c.Func)
	cmd.Flags().AddGoFlagSet(c.Flags)
}

// unknownCommand runs a command that only groups others: without arguments it shows the help;
// an argument is a subcommand it does not have.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	cmd.SilenceErrors = true
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	if hint := DidYouMean(args[0], names); hint != "" {
		// What was meant, rather than the whole list.
		fmt.Fprintf(cmd.ErrOrStderr(), "error: %s has no command %q; %s\nrun %s --help for its commands\n", cmd.CommandPath(), args[0], hint, cmd.CommandPath())
		return usagef("%s has no command %q; %s", cmd.CommandPath(), args[0], hint)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "error: %s has no command %q\n\n%s", cmd.CommandPath(), args[0], cmd.UsageString())
	return usagef("%s has no command %q", cmd.CommandPath(), args[0])
}

// run adapts a command to cobra: the error is printed as "error: …" (with the server's code
// and the request id for a refusal), and Caddy's command line exits with its code.
func run(f func(env *env, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		e := &env{cmd: cmd, ctx: ctx, out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr()}
		e.json, _ = cmd.Flags().GetBool("json")
		if err := f(e, args); err != nil {
			return fail(cmd, e.loginHint(err))
		}
		return nil
	}
}

// fail prints err for a person and returns what makes caddycmd.Main exit with err's code.
// Caddy's command wrapper alone makes the error that carries a code other than 1 (its type is
// unexported); it would also log err through Caddy's logger, so it is given the code only.
// Any other error exits 1.
func fail(cmd *cobra.Command, err error) error {
	errOut := cmd.ErrOrStderr()
	fmt.Fprintln(errOut, "error: "+err.Error())
	if errors.As(err, new(usageError)) {
		fmt.Fprintf(errOut, "run %s --help for the usage\n", cmd.CommandPath())
	}
	cmd.SilenceErrors = true // printed already
	return exitWith(cmd, exitCode(err), err)
}

// exitWith returns what makes caddycmd.Main exit with code: err itself for 1 (or nil for 0),
// else the error that carries the code, which only Caddy's command wrapper makes.
func exitWith(cmd *cobra.Command, code int, err error) error {
	if code <= exitRefused {
		return err
	}
	return caddycmd.WrapCommandFuncForCobra(func(caddycmd.Flags) (int, error) { return code, nil })(cmd, nil)
}

// Local adapts f, a command on the runtime's local state, to cobra as run does the client's
// commands: its error is printed as one "error: …" line, as every command prints it (Caddy's
// own wrapper would log it as a JSON line through Caddy's logger), and it exits with f's code.
func Local(f caddycmd.CommandFunc) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		code, err := f(caddycmd.Flags{FlagSet: cmd.Flags()})
		if err != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), "error: "+err.Error())
			cmd.SilenceErrors = true
			code = max(code, exitRefused)
		}
		return exitWith(cmd, code, err)
	}
}

// env is what a running command works with.
type env struct {
	cmd         *cobra.Command
	ctx         context.Context
	out, errOut io.Writer
	json        bool
	// profile names the saved login whose key the client uses, and profileURL its runtime;
	// "" when the key came from --key or RUNTIME_API_KEY.
	profile, profileURL string
}

// loginHint adds to err, when the runtime did not accept the key saved in a profile (revoked,
// or expired), what to do: log in again. The exit code stays the refused key's.
func (e *env) loginHint(err error) error {
	if e.profile == "" || exitCode(err) != exitAuth {
		return err
	}
	return fmt.Errorf("%w\nthe key saved in profile %q was not accepted (revoked or expired?): run %s login --url %s --profile %s to save a new one",
		err, e.profile, program(e.cmd), e.profileURL, e.profile)
}

// targetFlags adds the flags that say which runtime to talk to.
func targetFlags(cmd *cobra.Command) {
	cmd.Flags().String("url", "", "the runtime's base URL (default $RUNTIME_URL, else the profile's)")
	cmd.Flags().String("key", "", "the API key (default $RUNTIME_API_KEY, else the profile's)")
	cmd.Flags().String("profile", "", "the saved login to use (default: the last one logged in)")
	jsonFlag(cmd)
}

// jsonFlag adds --json.
func jsonFlag(cmd *cobra.Command) {
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
				key, e.profile, e.profileURL = p.Key, name, p.URL
			}
		case ok && strings.TrimRight(p.URL, "/") == strings.TrimRight(url, "/") && key == "":
			key, e.profile, e.profileURL = p.Key, name, p.URL
		case name != "" && !ok && url == "":
			return nil, usagef("no profile named %q; %s login --profile %s saves one", name, program(e.cmd), name)
		}
	}
	if url == "" {
		return nil, usagef("which runtime? pass --url or set RUNTIME_URL, or save one with %s login", program(e.cmd))
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

// size formats a byte count for a person: 512 B, 1.5 KiB, 12 MiB.
func size(bytes int64) string {
	return humanize.IBytes(uint64(max(bytes, 0)))
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
