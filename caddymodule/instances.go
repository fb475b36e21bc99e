package caddymodule

import (
	"context"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/version"
)

// instances answers GET cluster on a single instance (no package store): this instance
// alone, at change 0.
func (s *state) instances(context.Context) (api.Cluster, error) {
	if err := s.ready(); err != nil {
		return api.Cluster{}, envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "%v", err)
	}
	return api.Cluster{Instances: []api.ClusterInstance{s.self()}}, nil
}

// self is this instance as GET cluster shows it, and as its heartbeat describes it: the id
// kept in state_dir, where it is reached, its version, now as last seen, and degraded while a
// sync-mode key store cannot reach its primary. AppliedChange is 0: the caller that has a
// desired state sets it.
func (s *state) self() api.ClusterInstance {
	in := api.ClusterInstance{ID: s.instanceID, Version: version.String(), Health: api.InstanceOK, Self: true,
		LastSeen: time.Now().UTC().Format(time.RFC3339)}
	if addr := s.address.Load(); addr != nil {
		in.Address = *addr
	}
	if store := s.keys.Load(); store != nil {
		if st, ok := store.Sync(); ok && !st.Reachable {
			in.Health = api.InstanceDegraded
		}
	}
	return in
}

// instanceAddress is where this instance says it is reached, host:port: the first TCP
// listener of the config's servers (in the order of their names: srv0, srv1, … from a
// Caddyfile), its host replaced by the machine's host name where it listens on every
// interface. Unix sockets and inherited descriptors name no address others can reach; with
// no TCP listener the host name stands alone.
func instanceAddress(servers map[string]*caddyhttp.Server, hostname func() (string, error)) string {
	host, err := hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		for _, listen := range servers[name].Listen {
			addr, err := caddy.ParseNetworkAddress(listen)
			if err != nil || addr.IsUnixNetwork() || addr.IsFdNetwork() || !tcpNetwork(addr.Network) {
				continue
			}
			h := addr.Host
			if ip := net.ParseIP(h); h == "" || (ip != nil && ip.IsUnspecified()) {
				h = host
			}
			return net.JoinHostPort(h, strconv.Itoa(int(addr.StartPort)))
		}
	}
	return host
}

// tcpNetwork reports whether network is one of Caddy's TCP listener networks.
func tcpNetwork(network string) bool {
	return network == "tcp" || network == "tcp4" || network == "tcp6"
}

// hostname is the machine's host name, for instanceAddress.
var hostname = os.Hostname
