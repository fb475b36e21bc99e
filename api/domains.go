package api

// WorkerDomain is a custom domain attached to a worker.
type WorkerDomain struct {
	Domain     string `json:"domain" doc:"lower case, without a trailing dot"`
	Worker     string `json:"worker"`
	State      string `json:"state" enum:"pending,verified" doc:"pending: not served until a DNS check finds the token; verified: served, and allowed a certificate on demand"`
	Record     string `json:"record" doc:"the DNS name of the TXT record that verifies the domain: _runtime-challenge.<domain>"`
	Token      string `json:"token" doc:"the value the TXT record must hold"`
	URL        string `json:"url" doc:"where the worker is served once the domain is verified: https://<domain>/"`
	CheckedAt  string `json:"checkedAt,omitempty" format:"date-time" doc:"the last DNS check; absent before any"`
	VerifiedAt string `json:"verifiedAt,omitempty" format:"date-time"`
	Error      string `json:"error,omitempty" doc:"why the last check failed; absent when it passed or none ran. PUT the domain again to check again"`
}
