package cli

import (
	"fmt"
	"io"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-runtime/runtime/internal/version"
)

// localCommand builds a command that reads nothing from a server: it takes --json only.
func localCommand(name, short, long string, f func(env *env) error) caddycmd.Command {
	return caddycmd.Command{Name: name, Usage: "[--json]", Short: short, Long: long, CobraFunc: func(cmd *cobra.Command) {
		jsonFlag(cmd)
		cmd.Args = cobra.NoArgs
		cmd.RunE = run(func(e *env, _ []string) error { return f(e) })
	}}
}

func versionCommand() caddycmd.Command {
	return localCommand("version", "Print the runtime module's version",
		`Prints the version of the runtime module in this binary, whichever binary it is, and the
commit it was built from ("unknown" when the build recorded none, as xcaddy's do):
"runtime v0.4.0 (commit abc1234)". caddy version prints the binary's own.

Example:
  caddy runtime version`,
		func(e *env) error {
			v := struct {
				Version string `json:"version"`
				Commit  string `json:"commit"`
			}{version.String(), version.Commit()}
			return e.emit(v, func(w io.Writer) { fmt.Fprintln(w, version.Line()) })
		})
}

func buildInfoCommand() caddycmd.Command {
	return localCommand("build-info", "Print what this binary records of the runtime module",
		`Prints the runtime module's version, path and checksum (or what replaced it), the binary's
main module, and the versions of Caddy and Go it was built with: what a bug report needs.

Example:
  caddy runtime build-info --json`,
		func(e *env) error {
			i := version.Build()
			return e.emit(i, func(w io.Writer) {
				for _, row := range [][2]string{{"version", i.Version}, {"commit", i.Commit}, {"module", i.Module}, {"sum", i.Sum}, {"replace", i.Replace},
					{"main", i.Main}, {"caddy", i.Caddy}, {"go", i.Go}} {
					if row[1] != "" {
						fmt.Fprintf(w, "%s\t%s\n", row[0], row[1])
					}
				}
			})
		})
}
