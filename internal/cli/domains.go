package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-runtime/runtime/api"
)

func domainsCommand() caddycmd.Command {
	return caddycmd.Command{Name: "domains", Usage: "list|add|remove", Short: "Serve workers at domains of your own",
		Long: `Attaches custom domains to a worker. add attaches one and prints the DNS TXT record that proves
the domain is yours (_runtime-challenge.<domain>, holding a token); once the record is in place,
add again checks it, and the verified domain is served, with a certificate obtained on demand
when the runtime's config asks for one. Point the domain itself (A/AAAA or CNAME) at the runtime.
A pending domain is not served.

add and remove need a key with workers:install (admin and editor keys hold it), list one with
workers:read, in the worker's namespace.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.RunE = unknownCommand
			subcommand(cmd, "list WORKER", "List a worker's domains and their state",
				"  caddy runtime domains list @team/shop", cobra.ExactArgs(1), func(e *env, args []string) error {
					return listing(e, domainsPath(args[0]), "DOMAIN\tSTATE\tCHECKED\tERROR", func(raw json.RawMessage, w io.Writer) {
						var list []api.WorkerDomain
						_ = json.Unmarshal(raw, &list)
						for _, d := range list {
							fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", d.Domain, d.State, orDash(d.CheckedAt), orDash(d.Error))
						}
					})
				})
			subcommand(cmd, "add WORKER DOMAIN", "Attach a domain, or check a pending one's TXT record again",
				"  caddy runtime domains add @team/shop shop.example.com", cobra.ExactArgs(2), addDomain)
			subcommand(cmd, "remove WORKER DOMAIN", "Detach a domain: it is no longer served",
				"  caddy runtime domains remove @team/shop shop.example.com", cobra.ExactArgs(2), func(e *env, args []string) error {
					return act(e, "DELETE", domainsPath(args[0])+"/"+url.PathEscape(args[1]), fmt.Sprintf("Detached %s from %s", args[1], args[0]))
				})
		}}
}

// domainsPath is the API path of a worker's domains.
func domainsPath(worker string) string { return "/workers/" + unitPath(worker) + "/domains" }

func addDomain(e *env, args []string) error {
	worker, domain := args[0], args[1]
	c, err := e.client()
	if err != nil {
		return err
	}
	var d api.WorkerDomain
	if err := c.JSON(e.ctx, "PUT", domainsPath(worker)+"/"+url.PathEscape(domain), nil, &d); err != nil {
		return err
	}
	return e.emit(d, func(w io.Writer) {
		if d.State == "verified" {
			fmt.Fprintf(w, "%s is verified: %s serves %s once the domain points at the runtime\n", d.Domain, d.URL, worker)
			return
		}
		fmt.Fprintf(w, "%s is pending, and not served until its DNS record is found. Create this record:\n\n", d.Domain)
		fmt.Fprintf(w, "  %s  TXT  %q\n\n", d.Record, d.Token)
		fmt.Fprintf(w, "then run again: %s domains add %s %s\n", program(e.cmd), worker, d.Domain)
		if d.Error != "" {
			fmt.Fprintf(w, "Last check: %s\n", d.Error)
		}
	})
}

// orDash is s, or "-" for an empty table cell.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
