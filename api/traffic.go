package api

// TrafficShare is one version's part of a traffic split.
type TrafficShare struct {
	Version string `json:"version" doc:"an enabled version of the worker"`
	Percent int    `json:"percent" doc:"the whole percentage of unpinned requests this version serves, 1 to 100"`
}

// TrafficRequest is the body of PUT traffic.
type TrafficRequest struct {
	Split []TrafficShare `json:"split" doc:"the enabled versions and their shares, each version once, the percentages summing to 100; one version at 100 sends every unpinned request to it"`
}

// WorkerTraffic is the traffic split of a worker: what GET, PUT and DELETE traffic answer.
type WorkerTraffic struct {
	Name  string         `json:"name"`
	Split []TrafficShare `json:"split" doc:"the split in force, newest version first; empty when none is: unpinned requests get the newest enabled version"`
	// UpdatedAt and ChangedBy say who set or ended the split last; absent before any.
	UpdatedAt string `json:"updatedAt,omitempty" format:"date-time" doc:"when the split was last set or ended"`
	ChangedBy string `json:"changedBy,omitempty" doc:"the key prefix of the key that last set or ended it (the root key's is root)"`
	Change    int64  `json:"change,omitempty" doc:"the key store's change number of the last change; in cluster mode an instance has it once its appliedChange reaches it"`
}
