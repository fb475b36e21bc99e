package api

// SecretValue is the body of a secret's PUT.
type SecretValue struct {
	Value string `json:"value" doc:"the secret's value, at most 32 KiB, no NUL byte; it is sealed at once and never shown again"`
}

// SecretsChange is the body of a PATCH of a worker's secrets: several set and removed in one
// change, which restarts the worker's processes once.
type SecretsChange struct {
	Set   map[string]string `json:"set,omitempty" doc:"secrets to set, by name; their values are sealed at once and never shown again"`
	Unset []string          `json:"unset,omitempty" doc:"names of secrets to remove; each must exist"`
}

// SecretRecord is a secret as listed: its name and who set it when, never its value nor
// anything derived from it.
type SecretRecord struct {
	Name      string   `json:"name" doc:"the environment variable the worker's processes get"`
	UpdatedAt string   `json:"updatedAt" format:"date-time" doc:"when it was last set"`
	UpdatedBy SecretBy `json:"updatedBy" doc:"the key that set it last"`
}

// SecretBy is the key that set a secret.
type SecretBy struct {
	ID        int64  `json:"id" doc:"the key's id; 0 for the root key"`
	Name      string `json:"name"`
	KeyPrefix string `json:"keyPrefix"`
}

// WorkerSecrets is the body of GET of a worker's secrets.
type WorkerSecrets struct {
	Worker  string         `json:"worker"`
	Secrets []SecretRecord `json:"secrets" doc:"by name"`
}

// SecretsChanged is the body of a change to a worker's secrets.
type SecretsChanged struct {
	Success bool `json:"success"`
	Data    struct {
		Worker    string   `json:"worker"`
		Set       []string `json:"set" doc:"the names set"`
		Unset     []string `json:"unset" doc:"the names removed"`
		Restarted []string `json:"restarted" doc:"the versions whose running process was restarted with the new secrets here; empty when none was running"`
	} `json:"data"`
}
