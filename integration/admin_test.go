package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// TestAdminOnTCPWarning: with process workers on, the start-up log warns when something
// answers on TCP at Caddy's default admin address (CADDY_ADMIN here, standing for
// localhost:2019), and stays quiet when nothing does.
func TestAdminOnTCPWarning(t *testing.T) {
	t.Parallel()
	const warning = "Caddy's admin endpoint answers on TCP"
	listening, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listening.Close() }) // after the parallel subtests, unlike defer
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	for _, tc := range []struct {
		name, admin string
		warns       bool
	}{
		{"something answers", listening.Addr().String(), true},
		{"nothing answers", closed.Addr().String(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := harness.Start(t, harness.Config{Env: map[string]string{"CADDY_ADMIN": tc.admin, "RUNTIME_PROCESS_WORKERS": "on"}})
			if _, err := s.WaitLog("serving initial configuration", 10*time.Second); err != nil {
				t.Fatal(err)
			}
			var found []map[string]any
			for _, line := range strings.Split(s.Logs(), "\n") {
				var e map[string]any
				if json.Unmarshal([]byte(line), &e) == nil && strings.HasPrefix(fmt.Sprint(e["msg"]), warning) {
					found = append(found, e)
				}
			}
			if got := len(found) > 0; got != tc.warns {
				t.Fatalf("warned %v, want %v; log:\n%s", got, tc.warns, s.Logs())
			}
			if tc.warns && found[0]["admin"] != tc.admin {
				t.Errorf("the warning names %v, want %s", found[0]["admin"], tc.admin)
			}
		})
	}
}
