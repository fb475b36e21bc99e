package api

// Cluster is the body of GET cluster: the instances sharing this runtime's desired state
// (one instance without a package store) and how far each has converged.
type Cluster struct {
	Instances []ClusterInstance `json:"instances"`
	// Change is the desired state's latest change number as this instance holds it.
	Change int64 `json:"change" doc:"the latest change number of the desired state (uploads, enables, disables, removals), as this instance's replica holds it; 0 without a package store"`
}

// The health of a ClusterInstance.
const (
	InstanceOK = "ok"
	// InstanceDegraded serves, but cannot reach the key store's primary, or (in a cluster)
	// its last reconcile left a unit version unconverged or could not run.
	InstanceDegraded = "degraded"
	// InstanceGone has not been seen for three intervals.
	InstanceGone = "gone"
)

// ClusterInstance is one runtime instance as its heartbeats describe it.
type ClusterInstance struct {
	ID            string `json:"id" doc:"generated once and kept in state_dir"`
	Address       string `json:"address" doc:"where the instance says it is reached"`
	Version       string `json:"version" doc:"the runtime version it runs"`
	AppliedChange int64  `json:"appliedChange" doc:"the change number up to which its folders match the desired state"`
	LastSeen      string `json:"lastSeen" format:"date-time" doc:"its last heartbeat (RFC 3339)"`
	Health        string `json:"health" enum:"ok,degraded,gone" doc:"gone: not seen for three intervals"`
	Self          bool   `json:"self,omitempty" doc:"the instance that answered"`
}
