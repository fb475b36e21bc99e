package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/client"
	"github.com/caddy-runtime/runtime/packages"
)

func rolloutCommand() caddycmd.Command {
	return caddycmd.Command{Name: "rollout", Usage: "show|set|promote|abort", Short: "Split a worker's traffic between its versions",
		Long: `Shows and changes the traffic split of a worker: the shares of its unpinned requests each
version serves, sticky per visitor. Start one with caddy runtime deploy --canary N, which installs
the new version with N % of the traffic; grow it with set, then promote or abort it.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.RunE = unknownCommand
			subcommand(cmd, "show NAME", "Show the split in force", "  caddy runtime rollout show @team/shop", cobra.ExactArgs(1), rolloutShow)
			subcommand(cmd, "set NAME VERSION=PERCENT...", "Put a split in force",
				"  caddy runtime rollout set shop 1.2.0=70 1.3.0=30\n"+
					"  caddy runtime rollout set shop 1.3.0=50   # the other version of the split takes the rest",
				cobra.MinimumNArgs(2), rolloutSet)
			subcommand(cmd, "promote NAME [VERSION]", "Send every request to a version (by default the split's newest)",
				"  caddy runtime rollout promote shop", cobra.RangeArgs(1, 2), rolloutPromote)
			subcommand(cmd, "abort NAME", "Take the split's newest version out of service and end the split",
				"  caddy runtime rollout abort shop", cobra.ExactArgs(1), rolloutAbort)
		}}
}

// trafficPath is the API path of a worker's split.
func trafficPath(name string) string { return "/workers/" + unitPath(name) + "/traffic" }

// currentSplit reads the split of name in force.
func currentSplit(e *env, c *client.Client, name string) (api.WorkerTraffic, error) {
	var t api.WorkerTraffic
	err := c.JSON(e.ctx, "GET", trafficPath(name), nil, &t)
	return t, err
}

// emitSplit prints the split the API answered, after what was done.
func emitSplit(e *env, raw json.RawMessage, done string) error {
	var t api.WorkerTraffic
	_ = json.Unmarshal(raw, &t)
	return e.emit(raw, func(w io.Writer) {
		if done != "" {
			fmt.Fprintln(w, done)
		}
		fmt.Fprintln(w, describeSplit(t.Name, t.Split))
	})
}

// describeSplit says in words what a split does.
func describeSplit(name string, split []api.TrafficShare) string {
	if len(split) == 0 {
		return name + ": no split; the active version serves every unpinned request"
	}
	parts := make([]string, len(split))
	for i, sh := range split {
		parts[i] = fmt.Sprintf("%s %d%%", sh.Version, sh.Percent)
	}
	return name + ": " + strings.Join(parts, ", ")
}

func rolloutShow(e *env, args []string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	name, _ := splitVersion(args[0])
	var raw json.RawMessage
	if err := c.JSON(e.ctx, "GET", trafficPath(name), nil, &raw); err != nil {
		return err
	}
	return emitSplit(e, raw, "")
}

// parseShares reads VERSION=PERCENT arguments.
func parseShares(args []string) ([]api.TrafficShare, error) {
	var out []api.TrafficShare
	for _, arg := range args {
		version, pct, ok := strings.Cut(arg, "=")
		n, err := strconv.Atoi(strings.TrimSuffix(pct, "%"))
		if !ok || version == "" || err != nil {
			return nil, usagef("%q is not VERSION=PERCENT, e.g. 1.3.0=10", arg)
		}
		out = append(out, api.TrafficShare{Version: version, Percent: n})
	}
	return out, nil
}

func rolloutSet(e *env, args []string) error {
	name, _ := splitVersion(args[0])
	shares, err := parseShares(args[1:])
	if err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	// A version that is not installed is named before anything else is said of the split.
	w, err := findWorker(e, c, name)
	if err != nil {
		return err
	}
	for _, sh := range shares {
		if !slices.Contains(w.Versions, sh.Version) {
			return fmt.Errorf("%s has no version %s (installed: %s); deploy it first, or name an installed version",
				name, sh.Version, strings.Join(w.Versions, ", "))
		}
	}
	if len(shares) == 1 && shares[0].Percent < 100 {
		// One share: the other version of the split in force takes the rest.
		cur, err := currentSplit(e, c, name)
		if err != nil {
			return err
		}
		others := slices.DeleteFunc(slices.Clone(cur.Split), func(sh api.TrafficShare) bool { return sh.Version == shares[0].Version })
		if len(others) != 1 {
			return usagef("%s: name every version and its share (VERSION=PERCENT ...): the split in force has %d other versions to give the rest to",
				describeSplit(name, cur.Split), len(others))
		}
		shares = append(shares, api.TrafficShare{Version: others[0].Version, Percent: 100 - shares[0].Percent})
	}
	var raw json.RawMessage
	if err := c.JSON(e.ctx, "PUT", trafficPath(name), api.TrafficRequest{Split: shares}, &raw); err != nil {
		return err
	}
	return emitSplit(e, raw, "")
}

// newestOf returns the highest of versions.
func newestOf(versions []string) string {
	return slices.MaxFunc(versions, packages.CompareVersions)
}

func rolloutPromote(e *env, args []string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	name, _ := splitVersion(args[0])
	w, err := findWorker(e, c, name)
	if err != nil {
		return err
	}
	version := ""
	if len(args) == 2 {
		version = args[1]
	} else {
		cur, err := currentSplit(e, c, name)
		if err != nil {
			return err
		}
		if len(cur.Split) == 0 {
			return usagef("%s has no split to promote; name the version: promote %s VERSION", name, name)
		}
		version = newestOf(versionsOf(cur.Split))
	}
	for _, f := range w.FailedVersions {
		if f.Version == version {
			return fmt.Errorf("%s %s failed its health check on this instance (%s), so it would get no request; fix it and upload it again, or enable it again to check it once more",
				name, version, f.Reason)
		}
	}
	var raw json.RawMessage
	if version == w.Served {
		// The active version (what serving chooses without a split): ending the split sends
		// everyone to it, and a later upload is served as usual.
		err = c.JSON(e.ctx, "DELETE", trafficPath(name), nil, &raw)
	} else {
		err = c.JSON(e.ctx, "PUT", trafficPath(name), api.TrafficRequest{Split: []api.TrafficShare{{Version: version, Percent: 100}}}, &raw)
	}
	if err != nil {
		return err
	}
	return emitSplit(e, raw, fmt.Sprintf("Promoted %s %s: it serves every request", name, version))
}

func rolloutAbort(e *env, args []string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	name, _ := splitVersion(args[0])
	cur, err := currentSplit(e, c, name)
	if err != nil {
		return err
	}
	if len(cur.Split) < 2 {
		return usagef("%s: there is no canary to abort", describeSplit(name, cur.Split))
	}
	canary := newestOf(versionsOf(cur.Split))
	// Disabled first: its share goes to the active version at once (a disabled version is
	// never active), and ending the split then changes nothing for anyone.
	if err := c.JSON(e.ctx, "POST", "/workers/"+unitPath(name)+"/"+canary+"/disable", nil, nil); err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.JSON(e.ctx, "DELETE", trafficPath(name), nil, &raw); err != nil {
		return fmt.Errorf("disabled %s %s, but ending the split failed: %w", name, canary, err)
	}
	return emitSplit(e, raw, fmt.Sprintf("Aborted %s %s: disabled it and ended the split (enable it again with %s workers enable %s@%s)",
		name, canary, program(e.cmd), name, canary))
}

// versionsOf lists the versions of a split.
func versionsOf(split []api.TrafficShare) []string {
	out := make([]string, len(split))
	for i, sh := range split {
		out[i] = sh.Version
	}
	return out
}
