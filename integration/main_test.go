// Package integration holds black-box tests of the real runtime binary over real HTTP.
package integration

import (
	"os"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}
