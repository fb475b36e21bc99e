package caddymodule

import (
	"net"
	"net/url"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"golang.org/x/net/publicsuffix"

	"github.com/caddy-runtime/runtime/internal/troubleshooting"
)

// warnedSameSite holds the host pairs already warned about, so a reload does not repeat them.
var warnedSameSite sync.Map

// siteHosts are the host names of the site blocks serving the API, and those serving workers
// (with workers_url's).
func (a *App) siteHosts() (apiHosts, workerHosts []string) {
	hosts := map[*Handler][]string{}
	for _, srv := range a.servers() {
		handlerHosts(srv.Routes, nil, hosts)
	}
	for h, names := range hosts {
		serve := h.settings.Serve
		switch {
		case serve.API:
			apiHosts = append(apiHosts, names...)
			if u, err := url.Parse(h.settings.WorkersURL); err == nil && u.Hostname() != "" {
				workerHosts = append(workerHosts, u.Hostname())
			}
			// Workers beside the API share its origin: the shared-origin warning covers that.
		case serve.Workers:
			workerHosts = append(workerHosts, names...)
		}
	}
	return apiHosts, workerHosts
}

// warnSameSite warns when workers are served on a host of the API's registrable domain (or on
// the API's own host, on another port): a worker's page can set cookies there that browsers
// send to the API, such as a session cookie of its author's. The hosts come from the host
// matchers of the site blocks and from workers_url (siteHosts); a block without one names no
// host.
func (a *App) warnSameSite(apiHosts, workerHosts []string) {
	for _, api := range apiHosts {
		for _, workers := range workerHosts {
			domain, ok := sameSite(api, workers)
			if !ok {
				continue
			}
			if _, warned := warnedSameSite.LoadOrStore(api+" "+workers, true); warned {
				continue
			}
			a.logger.Warn("workers are served on a host of the API's registrable domain: a worker's page can set cookies for the "+
				"domain, which browsers send to the API too, such as a session cookie of its author's; over HTTPS the runtime's "+
				"__Host- cookie keeps a signed-in admin's own session and over HTTP two session cookies are refused, but a browser "+
				"without a session of its own takes the planted one; serve workers on a registrable domain of their own, "+
				"as workers.dev is to cloudflare.com (see docs/security.md)",
				zap.String("api_host", api), zap.String("workers_host", workers), zap.String("registrable_domain", domain),
				troubleshooting.SameSite.Field())
		}
	}
}

// handlerHosts adds to out the host names each runtime handler among routes answers: those of
// the innermost host matchers around it, inherited is the outer routes' ones.
func handlerHosts(routes caddyhttp.RouteList, inherited []string, out map[*Handler][]string) {
	for _, route := range routes {
		names := inherited
		if own := matchedHosts(route.MatcherSets); len(own) > 0 {
			names = own
		}
		for _, h := range route.Handlers {
			switch h := h.(type) {
			case *Handler:
				out[h] = append(out[h], names...)
			case *caddyhttp.Subroute:
				handlerHosts(h.Routes, names, out)
			}
		}
	}
}

// matchedHosts are the host names of the host matchers among sets.
func matchedHosts(sets caddyhttp.MatcherSets) []string {
	var names []string
	for _, set := range sets {
		for _, m := range set {
			switch m := m.(type) {
			case caddyhttp.MatchHost:
				names = append(names, m...)
			case *caddyhttp.MatchHost:
				names = append(names, *m...)
			}
		}
	}
	return names
}

// sameSite reports whether a page of host b can set cookies that a browser sends to host a:
// both are one host (cookies ignore ports), or they share a registrable domain by the public
// suffix list, which it returns. Wildcard labels ("*.example.com") stand for the domain below.
func sameSite(a, b string) (string, bool) {
	a, b = cookieHost(a), cookieHost(b)
	if a == "" || b == "" {
		return "", false
	}
	if a == b {
		return a, true
	}
	if net.ParseIP(a) != nil || net.ParseIP(b) != nil {
		return "", false
	}
	da, errA := publicsuffix.EffectiveTLDPlusOne(a)
	db, errB := publicsuffix.EffectiveTLDPlusOne(b)
	return da, errA == nil && errB == nil && da == db
}

// cookieHost is a matcher's or URL's host name as cookies see it: lower case, without a
// trailing dot and wildcard labels; "" for a pattern it cannot tell (a placeholder).
func cookieHost(name string) string {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	for strings.HasPrefix(name, "*.") {
		name = name[2:]
	}
	if strings.ContainsAny(name, "*{}") {
		return ""
	}
	return name
}
