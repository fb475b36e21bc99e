package api

// StatsSeries is the last hour of one series in steps of step seconds (the field beside it), oldest
// first, one item per step in every array; the last step is still in progress. A step without
// requests has 0 in requests and requestsPerSecond and null in errorRate, p50Ms and p99Ms; a step
// without a memory sample has null in memoryBytes.
type StatsSeries struct {
	Requests          []int64    `json:"requests" doc:"requests answered in the step"`
	RequestsPerSecond []float64  `json:"requestsPerSecond" doc:"requests divided by the step's seconds; for the step in progress, by the seconds elapsed in it (at least 1)"`
	ErrorRate         []*float64 `json:"errorRate" doc:"the share of 5xx answers, 0 to 1; null without requests"`
	P50Ms             []*float64 `json:"p50Ms" doc:"median latency in milliseconds, within 4.5% of the exact one; null without requests"`
	P99Ms             []*float64 `json:"p99Ms" doc:"99th percentile latency in milliseconds, within 4.5% of the exact one; null without requests"`
	MemoryBytes       []*int64   `json:"memoryBytes" doc:"resident memory of the processes, sampled once a step; null without a sample (no process worker, or a platform that does not tell)"`
}

// RuntimeStats is the body of GET stats.
type RuntimeStats struct {
	Start   int64       `json:"start" doc:"Unix seconds at which the first step begins"`
	Step    int         `json:"step" doc:"seconds per step (10)"`
	Points  int         `json:"points" doc:"steps in each array (360: the last hour)"`
	Workers StatsSeries `json:"workers" doc:"every worker request together; memoryBytes: every worker process together (0 with none running)"`
	API     StatsSeries `json:"api" doc:"management API requests; latency leaves out followed log streams; memoryBytes is all null"`
}

// WorkerStats is the body of GET workers/{scope}/{name}/stats.
type WorkerStats struct {
	Start  int64       `json:"start" doc:"Unix seconds at which the first step begins"`
	Step   int         `json:"step" doc:"seconds per step (10)"`
	Points int         `json:"points" doc:"steps in each array (360: the last hour)"`
	Worker string      `json:"worker"`
	Stats  StatsSeries `json:"stats" doc:"the worker's requests, and the memory of its processes (process workers)"`
}
