package cli

import (
	"encoding/json"
	"fmt"
	"io"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-runtime/runtime/api"
)

func cronCommand() caddycmd.Command {
	return caddycmd.Command{Name: "cron", Usage: "list|pause|resume NAME", Short: "List, pause and resume a worker's cron triggers",
		Long: `Lists the cron triggers of a worker (its manifest's cron key) with their next tick and the
last runs, and pauses or resumes them: a paused worker's triggers run no tick, on any instance,
until they are resumed; the ticks missed meanwhile are not run.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.RunE = unknownCommand
			subcommand(cmd, "list NAME", "List a worker's triggers and their last runs", "  caddy runtime cron list @team/reports", cobra.ExactArgs(1), cronList)
			subcommand(cmd, "pause NAME", "Pause a worker's triggers", "  caddy runtime cron pause @team/reports", cobra.ExactArgs(1),
				func(e *env, args []string) error { return cronToggle(e, args[0], "pause") })
			subcommand(cmd, "resume NAME", "Resume a worker's triggers", "  caddy runtime cron resume @team/reports", cobra.ExactArgs(1),
				func(e *env, args []string) error { return cronToggle(e, args[0], "resume") })
		}}
}

// cronPath is the API path of a worker's cron triggers.
func cronPath(name string) string { return "/workers/" + unitPath(name) + "/cron" }

// maxListedRuns is how many runs cron list shows in a table (--json gives them all).
const maxListedRuns = 10

func cronList(e *env, args []string) error {
	return cronCall(e, "GET", args[0], "", "")
}

func cronToggle(e *env, name, action string) error {
	return cronCall(e, "POST", name, "/"+action, map[string]string{"pause": "paused", "resume": "resumed"}[action])
}

// cronCall sends method to the worker's cron path (with suffix) and prints the answer, after
// done when it is set.
func cronCall(e *env, method, arg, suffix, done string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	name, _ := splitVersion(arg)
	var raw json.RawMessage
	if err := c.JSON(e.ctx, method, cronPath(name)+suffix, nil, &raw); err != nil {
		return err
	}
	var wc api.WorkerCron
	_ = json.Unmarshal(raw, &wc)
	return e.emit(raw, func(w io.Writer) {
		if done != "" {
			fmt.Fprintf(w, "%s: cron triggers %s\n", wc.Name, done)
		}
		describeCron(w, wc)
	})
}

// describeCron writes a worker's triggers and its last runs as tables.
func describeCron(w io.Writer, wc api.WorkerCron) {
	state := "active"
	if wc.Paused {
		state = "paused since " + wc.PausedAt + " by " + wc.PausedBy
	}
	if len(wc.Triggers) == 0 {
		fmt.Fprintf(w, "%s has no cron triggers (its active version's manifest has no cron key)\n", wc.Name)
		return
	}
	fmt.Fprintf(w, "%s@%s: triggers %s\n", wc.Name, wc.Version, state)
	fmt.Fprintln(w, "TRIGGER\tSCHEDULE\tTIMEZONE\tREQUEST\tTIMEOUT\tNEXT RUN")
	for _, t := range wc.Triggers {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s %s\t%s\t%s\n", t.Name, t.Schedule, t.Timezone, t.Method, t.Path, t.Timeout, orDash(t.NextRun))
	}
	if len(wc.Runs) == 0 {
		fmt.Fprintln(w, "no runs yet")
		return
	}
	fmt.Fprintln(w, "\nTRIGGER\tSCHEDULED\tINSTANCE\tSTATUS\tHTTP\tDURATION\tERROR")
	for _, r := range wc.Runs[:min(len(wc.Runs), maxListedRuns)] {
		status := "-"
		if r.HTTPStatus != 0 {
			status = fmt.Sprint(r.HTTPStatus)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d ms\t%s\n", r.Trigger, r.ScheduledAt, r.Instance, r.Status, status, r.DurationMs, orDash(r.Error))
	}
}
