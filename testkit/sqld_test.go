package testkit

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestStartSqld starts the libSQL server the sync-mode tests use and runs a statement on it
// over its HTTP API (Hrana's pipeline), which is how libsql-client-go talks to it.
func TestStartSqld(t *testing.T) {
	s := StartSqld(t, "..")
	exec := func(sql string) string {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"requests": []any{
			map[string]any{"type": "execute", "stmt": map[string]any{"sql": sql}},
			map[string]any{"type": "close"},
		}})
		resp, err := http.Post(s.URL+"/v2/pipeline", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", sql, resp.StatusCode, out.String())
		}
		return out.String()
	}
	exec("CREATE TABLE t (v TEXT)")
	exec("INSERT INTO t VALUES ('from the test')")
	if got := exec("SELECT v FROM t"); !strings.Contains(got, "from the test") {
		t.Errorf("SELECT answered %s", got)
	}
	s.Stop()
	if err := s.ready(); err == nil {
		t.Error("sqld still answers after Stop")
	}
}
