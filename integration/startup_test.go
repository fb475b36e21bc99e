package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// TestHealthMeansUsable starts the runtime twenty times and acts the moment GET /api/health
// first answers 200, as a script waiting for health does: POST /api/keys must then succeed,
// never 503 NOT_READY because the key store is still opening. Half the starts use the root
// key; the other half read the bootstrap key's file, which must exist by then too. The starts
// run four at a time: a loaded machine widens the window between listening and being ready.
func TestHealthMeansUsable(t *testing.T) {
	t.Parallel()
	const starts, together = 20, 4
	var wg sync.WaitGroup
	slots := make(chan struct{}, together)
	for i := range starts {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if err := actOnFirstHealth(t, i%2 == 0); err != nil {
				t.Errorf("start %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
}

// actOnFirstHealth starts a runtime, polls /api/health until it first answers 200, then
// creates a key at once.
func actOnFirstHealth(t *testing.T, withRoot bool) error {
	env := map[string]string{}
	if withRoot {
		env["RUNTIME_ROOT_KEY"] = rootKey
	}
	s, err := harness.Launch(t, harness.Config{Env: env})
	if err != nil {
		return err
	}
	defer s.Stop()
	client := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-s.Exited():
			return fmt.Errorf("the runtime exited before /api/health answered 200:\n%s", s.Logs())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("/api/health never answered 200:\n%s", s.Logs())
		}
		resp, err := client.Get(s.URL + "/api/health")
		if err != nil {
			time.Sleep(time.Millisecond) // not listening yet
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
	}
	key := rootKey
	if !withRoot {
		b, err := os.ReadFile(filepath.Join(s.DataDir, "state", "bootstrap-key"))
		if err != nil {
			return fmt.Errorf("the bootstrap key right after health: %v", err)
		}
		key = strings.TrimSpace(string(b))
	}
	resp, err := s.Send("POST", "/api/keys", harness.WithKey(key), harness.WithOrigin(""),
		harness.WithJSON(map[string]any{"name": "right-after-health", "role": "viewer"}))
	if err != nil {
		return fmt.Errorf("POST /api/keys right after health: %v", err)
	}
	if resp.Status != http.StatusOK {
		return fmt.Errorf("POST /api/keys right after health answered %s", resp)
	}
	return nil
}
