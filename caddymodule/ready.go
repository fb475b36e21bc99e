package caddymodule

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-runtime/runtime/internal/cpanel"
)

// readyMessage starts the line the runtime logs once its config is running.
const readyMessage = "runtime ready"

// surfaceURLs are where a config serves the cpanel and the API, in the order of its servers
// (by name) and routes.
type surfaceURLs struct {
	CPanel, API []string
}

// announceReady logs one info line once the config being started is the one Caddy runs
// (every app started, the listeners open): where the cpanel and the API are and where the
// bootstrap key file is, so a person running it knows where to go. It gives up when the
// config stops first (a failed start, or a reload replacing it).
func (a *App) announceReady() {
	urls := surfacesOf(a.servers())
	var bootstrap string
	if store := a.state.keys.Load(); store != nil {
		if _, err := os.Stat(store.BootstrapPath()); err == nil {
			bootstrap = displayPath(store.BootstrapPath())
		}
	}
	done := a.ctx.Done()
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if active, err := caddy.ActiveContext().AppIfConfigured(appID); err == nil && active == a {
				a.logger.Info(readyLine(urls, bootstrap), zap.Strings("cpanel", urls.CPanel), zap.Strings("api", urls.API),
					zap.String("bootstrap_key_file", bootstrap))
				return
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
}

// readyLine is the ready line's message: "runtime ready: cpanel http://localhost:8080/cpanel/,
// API http://localhost:8080/api, bootstrap key in data/state/bootstrap-key".
func readyLine(urls surfaceURLs, bootstrap string) string {
	var parts []string
	if len(urls.CPanel) > 0 {
		parts = append(parts, "cpanel "+strings.Join(urls.CPanel, " and "))
	}
	if len(urls.API) > 0 {
		parts = append(parts, "API "+strings.Join(urls.API, " and "))
	}
	if len(parts) == 0 {
		parts = append(parts, "no site block of this config serves the API or the cpanel")
	}
	if bootstrap != "" {
		parts = append(parts, "bootstrap key in "+bootstrap)
	}
	return readyMessage + ": " + strings.Join(parts, ", ")
}

// surfacesOf walks the servers' routes, subroutes included, to the runtime handlers and
// builds the URL of each one's cpanel and API from the server's first TCP listener, the
// host a route matches (a site block's address) and the path prefix it mounts the runtime
// at (handle_path /admin/*).
func surfacesOf(servers map[string]*caddyhttp.Server) surfaceURLs {
	var out surfaceURLs
	add := func(list *[]string, u string) {
		if !slices.Contains(*list, u) {
			*list = append(*list, u)
		}
	}
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		srv := servers[name]
		scheme, port, listenHost, ok := listenerOf(srv)
		if !ok {
			continue
		}
		walkRoutes(srv.Routes, "", "", func(host, prefix string, h *Handler) {
			host = browserHost(host, listenHost)
			origin := scheme + "://" + hostPort(host, port, scheme)
			if h.settings.Serve.CPanel {
				add(&out.CPanel, origin+prefix+cpanel.Path+"/")
			}
			if h.settings.Serve.API {
				add(&out.API, origin+prefix+h.settings.APIPrefix)
			}
		})
	}
	return out
}

// walkRoutes calls visit for each runtime handler in routes with the host and the path
// prefix its enclosing routes match.
func walkRoutes(routes caddyhttp.RouteList, host, prefix string, visit func(host, prefix string, h *Handler)) {
	for _, route := range routes {
		h, p := host, prefix
		for _, set := range route.MatcherSets {
			for _, m := range set {
				switch m := m.(type) {
				case caddyhttp.MatchHost:
					h = firstHost(m, h)
				case *caddyhttp.MatchHost:
					h = firstHost(*m, h)
				case caddyhttp.MatchPath:
					p += mountOf(m)
				case *caddyhttp.MatchPath:
					p += mountOf(*m)
				}
			}
		}
		for _, handler := range route.Handlers {
			switch handler := handler.(type) {
			case *Handler:
				visit(h, p, handler)
			case *caddyhttp.Subroute:
				walkRoutes(handler.Routes, h, p, visit)
			}
		}
	}
}

// firstHost is the first host name of a host matcher that names one host (no wildcard).
func firstHost(hosts []string, otherwise string) string {
	for _, h := range hosts {
		if !strings.Contains(h, "*") {
			return h
		}
	}
	return otherwise
}

// listenerOf is the scheme, port and host of a server's first TCP listener.
func listenerOf(srv *caddyhttp.Server) (scheme string, port uint, host string, ok bool) {
	scheme = "http"
	if len(srv.TLSConnPolicies) > 0 {
		scheme = "https"
	}
	for _, listen := range srv.Listen {
		addr, err := caddy.ParseNetworkAddress(listen)
		if err != nil || !tcpNetwork(addr.Network) {
			continue
		}
		return scheme, addr.StartPort, addr.Host, true
	}
	return "", 0, "", false
}

// browserHost is the host a browser on this machine uses: the route's, else the listener's,
// else localhost for a listener on every address.
func browserHost(route, listen string) string {
	if route != "" {
		return route
	}
	if ip := net.ParseIP(listen); listen == "" || (ip != nil && ip.IsUnspecified()) {
		return "localhost"
	}
	return listen
}

// hostPort joins host and port, leaving out the scheme's default port.
func hostPort(host string, port uint, scheme string) string {
	if (scheme == "http" && port == 80) || (scheme == "https" && port == 443) {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, strconv.FormatUint(uint64(port), 10))
}

// displayPath is path relative to the working directory when it lies below it, else
// absolute.
func displayPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	wd, err := os.Getwd()
	if err != nil {
		return abs
	}
	if rel, err := filepath.Rel(wd, abs); err == nil && filepath.IsLocal(rel) {
		return rel
	}
	return abs
}
