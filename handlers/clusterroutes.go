package handlers

import (
	"errors"
	"net/http"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/keystore"
)

// clusterAPI serves GET cluster: the instances sharing the desired state and how far each
// has converged.
type clusterAPI struct {
	*pipeline
	instances Instances // nil answers 503 while the runtime is starting
}

func (a *clusterAPI) clusterRoutes() []route {
	return []route{{
		method: "GET", path: "/cluster", id: "getCluster", tag: "cluster", permission: keystore.WorkersRead,
		summary: "List the instances and how far each has converged",
		description: "The runtime instances sharing this one's desired state: with a package store, every instance that has " +
			"sent a heartbeat to the key store's primary, those not seen for three intervals as gone; without one, this " +
			"instance alone, with change and appliedChange 0. An upload's change number is served by an instance once " +
			"its appliedChange reaches it. When the primary cannot be read, the answer is this instance's own view with " +
			"health degraded.",
		responses: []response{
			{status: http.StatusOK, description: "The instances, this one marked self, and the desired state's latest change number", body: api.Cluster{}},
			errorResponse(http.StatusServiceUnavailable, "The runtime is starting (NOT_READY)"),
		},
		handle: a.getCluster,
	}}
}

func (a *clusterAPI) getCluster(w http.ResponseWriter, r *http.Request) error {
	if a.instances == nil {
		return envelope.Errorf(http.StatusServiceUnavailable, envelope.CodeNotReady, "the runtime is starting")
	}
	c, err := a.instances(r.Context())
	var refused *envelope.Error
	if err != nil && !errors.As(err, &refused) && len(c.Instances) > 0 {
		// The instances could not be read from the primary, but Instances gave this instance's
		// own view: that, degraded, says more than an error. The key store logs the outage.
		for i := range c.Instances {
			c.Instances[i].Health = api.InstanceDegraded
		}
		err = nil
	}
	if err != nil {
		return err
	}
	if c.Instances == nil {
		c.Instances = []api.ClusterInstance{}
	}
	envelope.WriteJSON(w, http.StatusOK, c)
	return nil
}
