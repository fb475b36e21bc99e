package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/caddy-runtime/runtime/api"
)

func secretsCommand() caddycmd.Command {
	return caddycmd.Command{Name: "secrets", Usage: "set|list|unset", Short: "Set, list and remove workers' secrets",
		Long: `Manages a worker's secrets: environment variables its processes get at start, sealed on the
runtime (AES-256-GCM under its secrets_key) and never shown again. A change drains and restarts
the worker's running processes. A value is read from standard input, never from an argument,
where the shell's history and the process list would keep it.

Needs a key with workers:secrets (admin and editor keys hold it), in the worker's namespace.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.RunE = unknownCommand
			subcommand(cmd, "set WORKER NAME", "Set a secret, its value read from standard input",
				"  printf '%s' \"$STRIPE_KEY\" | caddy runtime secrets set @team/shop STRIPE_KEY\n  caddy runtime secrets set @team/shop STRIPE_KEY < stripe-key.txt",
				secretArgs("set"), setSecret)
			subcommand(cmd, "list WORKER", "List a worker's secrets: names, when and by whom they were set, never values",
				"  caddy runtime secrets list @team/shop", cobra.ExactArgs(1), func(e *env, args []string) error {
					return listing(e, "/workers/"+unitPath(args[0])+"/secrets", "NAME\tUPDATED\tBY", func(raw json.RawMessage, w io.Writer) {
						var list api.WorkerSecrets
						_ = json.Unmarshal(raw, &list)
						for _, s := range list.Secrets {
							fmt.Fprintf(w, "%s\t%s\t%s (%s)\n", s.Name, s.UpdatedAt, s.UpdatedBy.Name, s.UpdatedBy.KeyPrefix)
						}
					})
				})
			subcommand(cmd, "unset WORKER NAME", "Remove a secret", "  caddy runtime secrets unset @team/shop STRIPE_KEY", cobra.ExactArgs(2),
				func(e *env, args []string) error {
					return act(e, "DELETE", "/workers/"+unitPath(args[0])+"/secrets/"+args[1],
						fmt.Sprintf("Removed secret %s of %s; its running processes were restarted", args[1], args[0]))
				})
		}}
}

// secretArgs takes WORKER NAME, and says where the value goes when a third argument is given.
func secretArgs(verb string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 2 {
			return usagef("secrets %s reads the value from standard input, never from an argument (the shell's history and the process list "+
				"would keep it): printf '%%s' \"$VALUE\" | %s secrets %s WORKER NAME", verb, program(cmd), verb)
		}
		return cobra.ExactArgs(2)(cmd, args)
	}
}

func setSecret(e *env, args []string) error {
	worker, name := args[0], args[1]
	value, err := readSecret(e, name)
	if err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	var out api.SecretsChanged
	if err := c.JSON(e.ctx, "PUT", "/workers/"+unitPath(worker)+"/secrets/"+name, api.SecretValue{Value: value}, &out); err != nil {
		return err
	}
	return e.emit(out, func(w io.Writer) {
		fmt.Fprintf(w, "Set secret %s of %s", name, worker)
		if len(out.Data.Restarted) > 0 {
			fmt.Fprintf(w, "; restarted its running version(s) %s", strings.Join(out.Data.Restarted, ", "))
		}
		fmt.Fprintln(w)
	})
}

// readSecret reads a secret's value: on a terminal, typed without echo; else all of stdin,
// less one final line break (what echo and a file's last line add), which must not be empty.
func readSecret(e *env, name string) (string, error) {
	in := e.cmd.InOrStdin()
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(e.errOut, "Value of %s (not shown): ", name)
		typed, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(e.errOut)
		if err != nil {
			return "", fmt.Errorf("reading the value from the terminal: %w", err)
		}
		return string(typed), nil
	}
	b, err := io.ReadAll(io.LimitReader(in, maxSecretInput+1))
	if err != nil {
		return "", fmt.Errorf("reading the value from stdin: %w", err)
	}
	if len(b) > maxSecretInput {
		return "", usagef("the value on stdin is over %d KiB", maxSecretInput>>10)
	}
	value := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if value == "" {
		// Most likely nothing was piped in: an empty secret is refused rather than set.
		return "", usagef("no value for %s on standard input: pipe it in, as in printf '%%s' \"$VALUE\" | %s secrets set WORKER %s",
			name, program(e.cmd), name)
	}
	return value, nil
}

// maxSecretInput bounds what secrets set reads; the runtime refuses values over 32 KiB.
const maxSecretInput = 64 << 10

// readEnvFile reads a .env-style file of secrets: NAME=value lines, optionally after export,
// with # comments and blank lines; a value may be quoted, '…' as written, "…" with \n, \t,
// \" and \\ escapes. Errors name the line, never a value.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		name, value, ok := strings.Cut(line, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, usagef("%s line %d: not NAME=value", path, n)
		}
		if _, dup := out[name]; dup {
			return nil, usagef("%s line %d: %s is set twice", path, n, name)
		}
		if value, err = envValue(strings.TrimSpace(value)); err != nil {
			return nil, usagef("%s line %d (%s): %v", path, n, name, err)
		}
		out[name] = value
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return out, nil
}

// envValue unquotes a .env value; an unquoted one ends at " #", a comment.
func envValue(v string) (string, error) {
	switch {
	case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
		return v[1 : len(v)-1], nil
	case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
		s, err := strconv.Unquote(v)
		if err != nil {
			return "", errors.New("a double-quoted value with a bad escape")
		}
		return s, nil
	case strings.HasPrefix(v, "'") || strings.HasPrefix(v, "\""):
		return "", errors.New("an unterminated quote")
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	return v, nil
}

// sortedNames are the names of secrets, sorted.
func sortedNames(secrets map[string]string) []string {
	names := make([]string, 0, len(secrets))
	for name := range secrets {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
