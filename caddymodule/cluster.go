package caddymodule

import (
	"context"
	"errors"
	"net/http"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/handlers"
	"github.com/caddy-runtime/runtime/internal/cluster"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/internal/pluginhost"
	"github.com/caddy-runtime/runtime/internal/plugins"
	"github.com/caddy-runtime/runtime/internal/version"
	"github.com/caddy-runtime/runtime/internal/workers"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// clustered reports whether the state is an instance of a cluster: a package store and the
// key store's primary, whose desired state every change to an uploaded unit goes through.
func (s *state) clustered() bool { return s.store != nil && s.settings.KeyStore == "sync" }

// openCluster builds this instance's part of the cluster on the opened key store and starts
// its loop, which stops before the key store closes.
func (s *state) openCluster() error {
	c, err := cluster.New(cluster.Options{
		Keys: s.keys.Load(), Store: s.store, Workers: s.workerCatalog, Plugins: s.pluginCatalog, Admit: s.admit,
		Reload: func() {
			s.pluginCatalog.Forget()
			s.pluginReloads.Publish(pluginhost.Reload{})
		},
		Interval: s.settings.Sync.Interval, ID: s.instanceID, Address: func() string { return s.self().Address },
		Version: version.String(), Logger: s.logger.Named("cluster"), Metrics: runtimeMetrics,
		Activity: s.requests.Load,
	})
	if err != nil {
		return err
	}
	s.cluster.Store(c)
	s.clusterLoop.Go(c.Run)
	return nil
}

// admit admits a unit version the reconciler is about to install from the package store
// with this instance's policies, as an upload here by a key with every namespace would be:
// the instance that received it checked the uploader's key.
func (s *state) admit(kind string, md packages.Metadata) error {
	workerPolicy, pluginPolicy := policies(s.settings)
	installed := map[string][]packages.Unit{}
	for _, c := range []*packages.Catalog{s.workerCatalog, s.pluginCatalog} {
		units, err := c.List()
		if err != nil {
			return err
		}
		installed[c.Layout().Noun] = units
	}
	bases := plugins.Bases(installed[packages.PluginLayout.Noun])
	if kind == keystore.UnitWorker {
		if err := workers.Admit(md, workerPolicy, bases); err != nil {
			return err
		}
		// Held back from the moment it is on disk until this instance has checked it.
		s.activator.Expect(md)
		return nil
	}
	return plugins.Admit(md, pluginPolicy, true, plugins.World{Workers: packages.Names(installed[packages.WorkerLayout.Noun]), Bases: bases})
}

// readiness reports why the runtime cannot take traffic yet: starting or stopping, loading the
// WebAssembly modules it kept compiled before a restart, or, in a cluster, before its first
// pass has gone through the desired state.
func (s *state) readiness() error {
	if err := s.ready(); err != nil {
		return err
	}
	if w := s.wasm.Load(); w != nil {
		if err := w.warming(); err != nil {
			return err
		}
	}
	if !s.clustered() {
		return nil
	}
	c := s.cluster.Load()
	if c == nil {
		return errStarting
	}
	select {
	case <-c.Ready():
		return nil
	default:
		return errConverging
	}
}

var errConverging = errors.New("this instance has not converged with the cluster's desired state yet")

// clusterOf returns the cluster, or 503 while the state starts.
func (s *state) clusterOf() (*cluster.Cluster, error) {
	if c := s.cluster.Load(); c != nil {
		return c, nil
	}
	return nil, envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "the runtime is starting")
}

// missing is serving's Missing: in a cluster, a request for a worker this instance does not
// serve asks for a pull and a pass.
func (s *state) missing(ctx context.Context, name string) bool {
	c := s.cluster.Load()
	return c != nil && c.Missing(ctx, name)
}

// clusterInstances answers GET cluster in a cluster; without one, instances (instances.go)
// does.
func (s *state) clusterInstances(ctx context.Context) (api.Cluster, error) {
	c, err := s.clusterOf()
	if err != nil {
		return api.Cluster{}, err
	}
	return c.Instances(ctx)
}

// handlerCluster is what a handler's API and data plane get of the cluster: the desired state,
// the instances and the hook of unknown workers in a cluster; without one, no desired state
// and this instance alone.
func (s *state) handlerCluster() (handlers.Cluster, handlers.Instances, func(context.Context, string) bool) {
	if !s.clustered() {
		return nil, s.instances, nil
	}
	return clusterLink{s}, s.clusterInstances, s.missing
}

// clusterLink is the handlers' Cluster of a state: the state's cluster once it has started.
type clusterLink struct{ s *state }

func (l clusterLink) Publish(ctx context.Context, kind string, st *packages.Staged, by keystore.Principal) (packages.Installed, int64, error) {
	c, err := l.s.clusterOf()
	if err != nil {
		return packages.Installed{}, 0, err
	}
	return c.Publish(ctx, kind, st, by)
}

func (l clusterLink) SetEnabled(ctx context.Context, ref keystore.UnitRef, enabled bool, by keystore.Principal) (int64, error) {
	c, err := l.s.clusterOf()
	if err != nil {
		return 0, err
	}
	return c.SetEnabled(ctx, ref, enabled, by)
}

func (l clusterLink) Remove(ctx context.Context, ref keystore.UnitRef, by keystore.Principal) (int64, error) {
	c, err := l.s.clusterOf()
	if err != nil {
		return 0, err
	}
	return c.Remove(ctx, ref, by)
}

func (l clusterLink) ReloadPlugins(ctx context.Context, by keystore.Principal) (int64, error) {
	c, err := l.s.clusterOf()
	if err != nil {
		return 0, err
	}
	return c.ReloadPlugins(ctx, by)
}

// Interface guards
var (
	_ handlers.Cluster   = clusterLink{}
	_ handlers.Cluster   = (*cluster.Cluster)(nil)
	_ handlers.Instances = (*cluster.Cluster)(nil).Instances
)
