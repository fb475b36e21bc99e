package harness

import (
	"os"
	"path/filepath"
	"strings"
)

// BootstrapKey returns the secret of the first-run admin key from the state folder.
func (s *Server) BootstrapKey() string {
	s.tb.Helper()
	b, err := os.ReadFile(filepath.Join(s.DataDir, "state", "bootstrap-key"))
	if err != nil {
		s.tb.Fatalf("reading the bootstrap key: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// Key is a key created through the API.
type Key struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	Secret    string `json:"key"`
	KeyPrefix string `json:"keyPrefix"`
	Role      string `json:"role"`
}

// CreateKey creates a key with body (the POST keys request) as the holder of admin, failing
// the test unless it succeeds.
func (s *Server) CreateKey(admin string, body map[string]any) Key {
	s.tb.Helper()
	resp := s.Do("POST", s.API+"/keys", WithKey(admin), WithOrigin(""), WithJSON(body))
	var out struct {
		Success bool `json:"success"`
		Data    Key  `json:"data"`
	}
	if resp.Status != 200 || resp.JSON(&out) != nil || !out.Success {
		s.tb.Fatalf("creating key %v: %s", body, resp)
	}
	return out.Data
}
