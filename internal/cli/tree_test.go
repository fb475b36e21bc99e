package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// local is a command of the kind Tree takes from outside the client: it prints its path when run.
func local(parent, name string) Command {
	return Command{Parent: parent, Command: caddycmd.Command{Name: name, Usage: "[--flag]", Short: "the local " + name,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Args = cobra.NoArgs
			cmd.Flags().Bool("flag", false, "a flag of its own")
			cmd.RunE = func(cmd *cobra.Command, _ []string) error {
				cmd.Print("ran " + cmd.CommandPath())
				return nil
			}
		}}}
}

// TestTree hangs commands where each says: beside the client's at the top, beneath one of the
// client's (cluster, secrets, whose own subcommands stay), and beneath another local command;
// each runs with its flags under caddy runtime, and the client's commands are all there.
func TestTree(t *testing.T) {
	top := Tree(local("", "backup"), local("cluster", "publish"), local("secrets", "rotate"), local("", "store"), local("store", "migrate"),
		local("store migrate", "check"))
	root := &cobra.Command{Use: "caddy", SilenceUsage: true}
	root.AddCommand(cobraCommand(Group(top)))
	var names []string
	for _, c := range top {
		names = append(names, c.Name)
	}
	for _, c := range Commands() {
		if !slices.Contains(names, c.Name) {
			t.Errorf("Tree left out the client's %s", c.Name)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", "--flag"}, "ran caddy runtime backup"},
		{[]string{"cluster", "publish", "--flag"}, "ran caddy runtime cluster publish"},
		{[]string{"secrets", "rotate"}, "ran caddy runtime secrets rotate"},
		{[]string{"store", "migrate", "--flag"}, "ran caddy runtime store migrate"},
		{[]string{"store", "migrate", "check"}, "ran caddy runtime store migrate check"},
		{[]string{"secrets", "--help"}, "\n  rotate      the local rotate\n"},
		{[]string{"secrets", "--help"}, "\n  set         Set a secret"},
		{[]string{"cluster", "--help"}, "\n  publish     the local publish\n"},
		{[]string{"cluster", "--help"}, "--url string"},
	} {
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"runtime"}, tc.args...))
		if err := root.Execute(); err != nil || !strings.Contains(out.String(), tc.want) {
			t.Errorf("caddy runtime %s: %v, printed %q; want %q", strings.Join(tc.args, " "), err, out.String(), tc.want)
		}
	}
}

// TestTreeRefusesAnOrphan: a command beneath a parent the tree does not hold would never run,
// so building the tree fails naming both.
func TestTreeRefusesAnOrphan(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `"publish"`) || !strings.Contains(r.(string), `"clusters"`) {
			t.Errorf("Tree with an orphan: %v; want a panic naming it and its parent", r)
		}
	}()
	Tree(local("clusters", "publish"))
}

func TestDidYouMean(t *testing.T) {
	names := []string{"cron", "deploy", "list", "domains", "login", "logout", "rollback", "rollout", "workers"}
	for _, tt := range []struct{ typed, want string }{
		{"deplyo", "did you mean deploy?"},
		{"wokrers", "did you mean workers?"},
		{"rollot", "did you mean rollout?"},
		{"frobnicate", ""},
		{"frob", ""}, // two edits from cron: too far for a word this short
		{"crn", "did you mean cron?"},
		{"lgoin", "did you mean login?"},
		{"lgin", "did you mean login?"},
		{"lsit", "did you mean list?"},
	} {
		if got := DidYouMean(tt.typed, names); got != tt.want {
			t.Errorf("DidYouMean(%q) = %q, want %q", tt.typed, got, tt.want)
		}
	}
}
