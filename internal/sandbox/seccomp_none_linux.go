//go:build !(amd64 || arm64 || riscv64)

package sandbox

import (
	"fmt"
	"runtime"

	"github.com/caddy-runtime/runtime/internal/launch"
)

// seccompRefusals is empty: the filter is written for amd64, arm64 and riscv64.
func seccompRefusals() []string { return nil }

func probeSeccomp() error { return fmt.Errorf("no filter is written for %s", runtime.GOARCH) }

func seccompFilter() []launch.Filter { return nil }
