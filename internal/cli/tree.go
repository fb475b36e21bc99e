package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// Command is a command of caddy runtime and where it hangs in the tree, for the commands the
// client does not hold: those that work on the runtime's local state (its config, key store
// and folders) rather than over HTTP.
type Command struct {
	// Parent is the path, below caddy runtime, of the command this one goes beneath: "" for
	// caddy runtime itself, "cluster" for caddy runtime cluster, "a b" deeper down.
	Parent string
	caddycmd.Command
}

// Tree assembles the tree of caddy runtime: the client's commands (Commands) and more, each
// beneath the command its Parent names. It returns the top of the tree, the subcommands of
// Group's command, each carrying those beneath it. A command whose parent is not in the tree
// would never run: Tree panics naming it, as Caddy does on a name registered twice.
func Tree(more ...Command) []caddycmd.Command {
	all := make([]Command, 0, len(more)+16)
	for _, c := range Commands() {
		all = append(all, Command{Command: c})
	}
	all = append(all, more...)
	for _, c := range all {
		if c.Parent != "" && !slices.ContainsFunc(all, func(p Command) bool { return p.path() == c.Parent }) {
			panic(fmt.Sprintf("runtime command %q hangs beneath %q, which is no command of caddy runtime", c.Name, c.Parent))
		}
	}
	return beneath("", all)
}

// path is c's path below caddy runtime.
func (c Command) path() string { return strings.TrimSpace(c.Parent + " " + c.Name) }

// beneath returns the commands of all whose parent is path, each with those beneath it.
func beneath(path string, all []Command) []caddycmd.Command {
	var out []caddycmd.Command
	for _, c := range all {
		if c.Parent == path {
			out = append(out, withSubcommands(c.Command, beneath(c.path(), all)))
		}
	}
	return out
}

// withSubcommands returns c with subs beneath it, added once c's own setup has run (which
// may add subcommands of its own, as secrets does).
func withSubcommands(c caddycmd.Command, subs []caddycmd.Command) caddycmd.Command {
	if len(subs) == 0 {
		return c
	}
	inner := c
	c.CobraFunc = func(cmd *cobra.Command) {
		setUp(inner, cmd)
		for _, sub := range subs {
			cmd.AddCommand(cobraCommand(sub))
		}
	}
	return c
}

// DidYouMean says which of names typed is likely a typo of, as cobra suggests subcommands
// (a Levenshtein distance of 2 at most, or a prefix): "did you mean deploy?", or "" when none
// is close. A word of four letters or fewer may differ by one edit or two swapped letters
// only ("lsit" is list), since two edits make another word of it ("frob" is not cron). A
// mistyped command is answered with what was meant, not with the whole list.
func DidYouMean(typed string, names []string) string {
	root := &cobra.Command{Use: "runtime", SuggestionsMinimumDistance: 2}
	for _, n := range names {
		root.AddCommand(&cobra.Command{Use: n, Run: func(*cobra.Command, []string) {}})
	}
	meant := root.SuggestionsFor(typed)
	if len([]rune(typed)) <= 4 {
		meant = slices.DeleteFunc(meant, func(name string) bool {
			return !strings.HasPrefix(name, typed) && levenshtein.ComputeDistance(typed, name) > 1 && !swapped(typed, name)
		})
	}
	if len(meant) == 0 {
		return ""
	}
	return "did you mean " + strings.Join(meant, " or ") + "?"
}

// swapped reports whether a is b with two neighbouring letters swapped.
func swapped(a, b string) bool {
	x, y := []rune(a), []rune(b)
	if len(x) != len(y) {
		return false
	}
	for i := 0; i+1 < len(x); i++ {
		if x[i] != y[i] {
			return x[i] == y[i+1] && x[i+1] == y[i] && string(x[i+2:]) == string(y[i+2:])
		}
	}
	return false
}
