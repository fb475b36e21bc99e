package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/client"
)

func clusterCommand() caddycmd.Command {
	return command("cluster", "[--json]", "List the instances and how far each has converged",
		`Prints the runtime instances that share the desired state (GET cluster): id, address,
version, the change number each has applied against the latest, when it was last seen and its
health (ok, degraded: its key store's primary is unreachable, gone: not seen for three
intervals). Without a package store it lists the one instance. The key needs workers:read.

Example:
  caddy runtime cluster --url https://runtime.example.com`,
		func(cmd *cobra.Command) {
			cmd.Args = cobra.NoArgs
			cmd.RunE = run(listCluster)
		})
}

func listCluster(e *env, _ []string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.JSON(e.ctx, "GET", "/cluster", nil, &raw); err != nil {
		return err
	}
	var cl api.Cluster
	if err := json.Unmarshal(raw, &cl); err != nil {
		return err
	}
	return e.emit(raw, func(w io.Writer) {
		fmt.Fprintln(w, "ID\tADDRESS\tVERSION\tAPPLIED\tLAST SEEN\tHEALTH")
		for _, in := range cl.Instances {
			id := in.ID
			if in.Self {
				id += " (answered)"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", id, in.Address, in.Version, in.AppliedChange, cl.Change, in.LastSeen, in.Health)
		}
	})
}

// converged is what deploy --wait prints with --json: the change waited for (0 on a single
// instance, which serves an upload when it answers) and the live instances, each at that
// change or past it.
type converged struct {
	Change    int64                 `json:"change"`
	Instances []api.ClusterInstance `json:"instances"`
}

// uploadChange is the change number an upload's answer carries in cluster mode, else 0.
func uploadChange(answer json.RawMessage) int64 {
	var body struct {
		Data struct {
			Worker, Plugin api.InstalledUnit
		}
	}
	_ = json.Unmarshal(answer, &body)
	return max(body.Data.Worker.Change, body.Data.Plugin.Change)
}

// clusterPoll is how often deploy --wait reads GET cluster.
const clusterPoll = 500 * time.Millisecond

// waitConverged waits until every instance not gone has applied change, telling how many
// have on stderr whenever that changes, for at most timeout; change 0 needs no wait.
func waitConverged(e *env, c *client.Client, change int64, timeout time.Duration) (*converged, error) {
	if change == 0 {
		return &converged{Instances: []api.ClusterInstance{}}, nil
	}
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	defer cancel()
	progress := ""
	var lagging []api.ClusterInstance
	var lastErr error
	for {
		var cl api.Cluster
		err := c.JSON(ctx, "GET", "/cluster", nil, &cl)
		var refused *client.Error
		switch {
		case errors.As(err, &refused) && refused.Status != http.StatusServiceUnavailable:
			return nil, fmt.Errorf("uploaded, but its convergence cannot be read: %w", err)
		case err != nil:
			// An instance restarting or a network hiccup: read again. A read the deadline cut
			// short says less than the failure before it.
			if ctx.Err() == nil || lastErr == nil {
				lastErr = err
			}
		default:
			lastErr = nil
			var live []api.ClusterInstance
			live, lagging = behind(cl.Instances, change)
			if len(lagging) == 0 && len(live) > 0 {
				return &converged{Change: change, Instances: live}, nil
			}
			if p := fmt.Sprintf("waiting for change %d: %d of %d instances have applied it", change, len(live)-len(lagging), len(live)); p != progress {
				progress = p
				fmt.Fprintln(e.errOut, p)
			}
		}
		select {
		case <-ctx.Done():
			if e.ctx.Err() != nil {
				return nil, e.ctx.Err()
			}
			return nil, notConverged(program(e.cmd), change, timeout, lagging, lastErr)
		case <-time.After(clusterPoll):
		}
	}
}

// behind returns the live instances (not gone) and those of them short of change.
func behind(instances []api.ClusterInstance, change int64) (live, lagging []api.ClusterInstance) {
	for _, in := range instances {
		if in.Health == api.InstanceGone {
			continue
		}
		live = append(live, in)
		if in.AppliedChange < change {
			lagging = append(lagging, in)
		}
	}
	return live, lagging
}

// notConverged is the error of a wait that timed out, naming the instances that had not
// applied change, or the last failure to read GET cluster; prog is how the user ran the
// commands.
func notConverged(prog string, change int64, timeout time.Duration, lagging []api.ClusterInstance, lastErr error) error {
	if len(lagging) == 0 && lastErr != nil {
		return fmt.Errorf("uploaded, but whether every instance applied change %d could not be read within %s: %w", change, timeout, lastErr)
	}
	if len(lagging) == 0 {
		return fmt.Errorf("uploaded, but GET cluster listed no live instance within %s to apply change %d", timeout, change)
	}
	names := make([]string, len(lagging))
	for i, in := range lagging {
		names[i] = fmt.Sprintf("%s (%s, at change %d, %s)", in.ID, in.Address, in.AppliedChange, in.Health)
	}
	return fmt.Errorf("uploaded, but after %s %d instance(s) have not applied change %d: %s; "+
		"%s cluster shows them, and their logs say why", timeout, len(lagging), change, strings.Join(names, ", "), prog)
}
