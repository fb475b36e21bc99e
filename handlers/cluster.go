package handlers

import (
	"context"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// Cluster is the desired state that the instances of a cluster share (a package store is
// configured): every change to an uploaded unit is written there, never straight to this
// instance's disk, and each instance converges on it. Nil on a single instance.
type Cluster interface {
	// Publish puts the staged upload's archive in the package store, writes its live row
	// on the primary, and installs it on this instance; it answers the install and the
	// change number it created. kind is keystore.UnitWorker or keystore.UnitPlugin.
	Publish(ctx context.Context, kind string, s *packages.Staged, by keystore.Principal) (packages.Installed, int64, error)
	// SetEnabled writes the enabled state of a unit version (every live version when
	// ref.Version is empty) and applies it on this instance.
	SetEnabled(ctx context.Context, ref keystore.UnitRef, enabled bool, by keystore.Principal) (int64, error)
	// Remove removes a unit version (every version when ref.Version is empty) from the
	// desired state and from this instance.
	Remove(ctx context.Context, ref keystore.UnitRef, by keystore.Principal) (int64, error)
	// ReloadPlugins asks every instance to reload its plugins; this one has when it returns.
	ReloadPlugins(ctx context.Context, by keystore.Principal) (int64, error)
}

// Instances answers GET cluster: this instance alone without a package store, else every
// instance of the cluster. When the primary cannot be read it returns the error together with
// this instance's own view, which GET cluster answers with health degraded instead of the
// error; an *envelope.Error (NOT_READY while starting) is answered as it is.
type Instances func(ctx context.Context) (api.Cluster, error)
