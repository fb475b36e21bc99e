// Command runtime is Caddy with its standard modules, the runtime module and the runtime's
// command-line client.
package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/caddy-runtime/runtime"
	"github.com/caddy-runtime/runtime/internal/cli"
	"github.com/caddy-runtime/runtime/internal/version"
)

// binaryName is this binary's name in its help and messages.
const binaryName = "runtime"

// description is what runtime --help says first, instead of Caddy's own description.
const description = `runtime is Caddy with its standard modules and the runtime module: a serverless runtime
with a management API, a control panel (the cpanel at /cpanel/) and this command-line client.

Serve with a Caddyfile:
  runtime run --config Caddyfile

Deploy from here:
  runtime login --url http://localhost:8080
  runtime deploy ./site

Caddy's own commands (run, start, stop, reload, adapt, …) work as they do in caddy. upgrade,
add-package and remove-package are not available: they would replace this binary with a
stock Caddy; build a new one from the project instead.`

func main() {
	caddys := setUp()
	// Caddy's version command prints caddy.Version() on one line; this binary's first line is
	// the runtime's own, as caddy runtime version prints it, then Caddy's.
	if len(os.Args) == 2 && os.Args[1] == "version" {
		fmt.Print(versionText(caddys))
		return
	}
	if code, done := refuse(os.Args[1:], os.Stderr); done {
		os.Exit(code)
	}
	caddycmd.Main()
}

// setUp makes this binary the runtime's: `version` names the runtime, help and messages name
// the binary runtime, and the runtime's commands are also offered at the top level
// (bin/runtime deploy is bin/runtime runtime deploy). Only this binary does so: the module
// changes no other build's identity or command names. It returns Caddy's own full version.
func setUp() string {
	_, caddys := caddy.Version()
	caddy.CustomVersion = customVersion(caddy.CustomVersion)
	caddy.CustomBinaryName, caddy.CustomLongDescription = binaryName, description
	for _, c := range runtime.Commands() {
		// Caddy's own commands of the same name (version, build-info) keep the name.
		if _, taken := caddycmd.Commands()[c.Name]; !taken {
			caddycmd.RegisterCommand(cli.TopLevel(c))
		}
	}
	return caddys
}

// customVersion returns what caddy.Version() reports (in --version, metrics and traces): the
// runtime's version line, then what a packager set, if anything. It reads as
// "runtime v1.2.3 (commit abc1234), Caddy v2.11.9-debian".
func customVersion(packaged string) string {
	return strings.TrimSpace(version.Line() + ", Caddy " + packaged)
}

// versionText is what `version` prints: the runtime's version line, then Caddy's.
func versionText(caddys string) string {
	return version.Line() + "\nCaddy " + caddys + "\n"
}

// replacing are Caddy's commands that replace the running binary with one downloaded from
// Caddy's build server: a stock Caddy, without the runtime.
var replacing = []string{"upgrade", "add-package", "remove-package"}

// cobraCommands are the commands cobra adds to every root command.
var cobraCommands = []string{"help", "completion", "__complete", "__completeNoDesc"}

// refuse answers, before Caddy's command line runs, what it would get wrong for this binary:
// a command that would replace it with a stock Caddy is refused, and an unknown command gets
// the list of commands. done tells whether it answered, with code the exit code.
func refuse(args []string, stderr io.Writer) (code int, done bool) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return 0, false
	}
	name := args[0]
	if slices.Contains(replacing, name) {
		fmt.Fprintf(stderr, "error: %s %s is not available: this binary is built from the runtime project, and %s would replace it "+
			"with a stock Caddy without the runtime. Build a new one from the project instead (make build, or xcaddy with the module)\n",
			binaryName, name, name)
		return 1, true
	}
	commands := caddycmd.Commands()
	if _, ok := commands[name]; ok || slices.Contains(cobraCommands, name) {
		return 0, false
	}
	names := make([]string, 0, len(commands))
	for n := range commands {
		if !slices.Contains(replacing, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	if hint := cli.DidYouMean(name, names); hint != "" {
		// What was meant, rather than the whole list.
		fmt.Fprintf(stderr, "error: %s has no command %q; %s\nrun %s --help for every command\n", binaryName, name, hint, binaryName)
		return 1, true
	}
	fmt.Fprintf(stderr, "error: %s has no command %q\n\nUsage:\n  %s <command> [flags]\n\nCommands:\n", binaryName, name, binaryName)
	w := tabwriter.NewWriter(stderr, 0, 4, 2, ' ', 0)
	for _, n := range names {
		fmt.Fprintf(w, "  %s\t%s\n", n, commands[n].Short)
	}
	w.Flush()
	fmt.Fprintf(stderr, "\nrun %s <command> --help for a command's usage\n", binaryName)
	return 1, true
}
