// Package api is the management API's wire contract: the JSON bodies of its requests and
// answers, and where clients find it. Package handlers serves them and documents them in the
// OpenAPI document its route table generates (their doc, enum and format tags describe the
// fields there); package client and the command line decode them; the cpanel's TypeScript
// types are generated from that document. It imports nothing of the runtime.
package api

// DiscoveryPath is where clients find the API path and the runtime version, whatever the
// API path is.
const DiscoveryPath = "/.well-known/runtime"

// Discovery is the discovery document at DiscoveryPath.
type Discovery struct {
	API     string `json:"api" doc:"the API path in effect as the client sees it, e.g. /api, /_/api, or /hp/api when the runtime is mounted at /hp"`
	Version string `json:"version" doc:"runtime version"`
	Workers string `json:"workers,omitempty" doc:"the workers' base URL when they are served on another origin, e.g. https://apps.example.com (a worker is at <workers>/<name>/), as configured in workers_url; absent when they share this origin"`
	// WorkersDomain extends the spec's document: each worker's own host.
	WorkersDomain string `json:"workersDomain,omitempty" doc:"set when each worker has a host of its own (workers_domain): the domain as a base URL, e.g. https://apps.example.com; worker app is then at https://app.apps.example.com/ and @team/app at https://app.team.apps.example.com/ (the listing's url says which workers have one). Absent when unset"`
}

// Health is the body of the health probes.
type Health struct {
	OK      bool   `json:"ok"`
	Status  string `json:"status" enum:"healthy,ready,live"`
	Version string `json:"version" doc:"runtime version"`
	// KeyStore is set by the readiness probe in sync mode only.
	KeyStore string `json:"keyStore,omitempty" enum:"ok,degraded" doc:"sync mode only: degraded while the key store's primary is unreachable (credentials are checked against the instance's replica; key and session writes answer 503)"`
}

// Envelope is the body of every error answer.
type Envelope struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the content of the error envelope.
type ErrorBody struct {
	Code    string `json:"code" doc:"machine-readable error code, e.g. NOT_FOUND"`
	Message string `json:"message" doc:"what went wrong and what to do about it"`
}

// Success is the body of a change that returns nothing else.
type Success struct {
	Success bool `json:"success"`
}
