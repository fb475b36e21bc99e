package serving

import (
	"github.com/caddy-runtime/runtime/internal/hosts"
	"github.com/caddy-runtime/runtime/packages"
)

// HostServed returns why host name (a TLS server name) is not served, "" when it is: an
// enabled worker's host under workers_domain, or a verified custom domain of an enabled worker.
// It answers from memory (the router, the catalog's snapshot), as a TLS handshake waits for it.
func HostServed(r *hosts.Router, c *packages.Catalog, name string) string {
	worker, custom, ok := r.Worker(name)
	if !ok {
		if worker, ok := r.Pending(name); ok {
			return "a custom domain of worker " + worker + " that is not verified yet: its TXT record has not been found"
		}
		if d := r.Domain(); d.Under(hosts.Normalize(name)) {
			return "not a worker's host: workers have one level under " + d.Name + ", scoped workers two"
		}
		return "neither a worker's host nor a verified custom domain"
	}
	u, found := c.Find(worker)
	if !found {
		if custom {
			return "a custom domain of worker " + worker + ", which is not installed"
		}
		return "no worker named " + worker
	}
	for _, v := range u.Versions {
		if v.Enabled {
			return ""
		}
	}
	return "worker " + worker + " has no enabled version"
}
