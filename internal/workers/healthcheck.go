package workers

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Healthcheck is the manifest's healthcheck: a path the worker answers 2xx at once it is able
// to serve, asked every HealthcheckInterval until Timeout.
type Healthcheck struct {
	Path    string   `yaml:"path"`
	Timeout Duration `yaml:"timeout"`
}

// Bounds of a healthcheck.
const (
	DefaultHealthcheckTimeout = 30 * time.Second
	MaxHealthcheckTimeout     = 10 * time.Minute
	HealthcheckInterval       = 500 * time.Millisecond
	maxHealthcheckPath        = 1024
)

// check validates the healthcheck of a version of kind k and fills in its default timeout.
func (h *Healthcheck) check(k Kind) error {
	if k == Wasm {
		return fmt.Errorf("healthcheck: only process workers (command, or a program as entrypoint) are health-checked; " +
			"this version is a WebAssembly worker, whose module is checked at upload and runs afresh for each request: remove healthcheck")
	}
	if !k.Runs() {
		return fmt.Errorf("healthcheck: only process workers (command, or a program as entrypoint) are health-checked; " +
			"this version serves files: remove healthcheck")
	}
	if h.Path == "" {
		return fmt.Errorf("healthcheck.path is missing: name the path the worker answers 2xx at once it can serve, e.g. /healthz")
	}
	if err := checkWorkerPath("healthcheck.path", h.Path, "/healthz"); err != nil {
		return err
	}
	if h.Timeout == 0 {
		h.Timeout = Duration(DefaultHealthcheckTimeout)
	}
	if time.Duration(h.Timeout) > MaxHealthcheckTimeout {
		return fmt.Errorf("healthcheck.timeout %s is longer than %s: a deploy waits that long for its answer", time.Duration(h.Timeout), MaxHealthcheckTimeout)
	}
	return nil
}

// checkWorkerPath refuses a manifest key's path that is not a path on the worker (starting
// with "/", a query allowed, at most maxHealthcheckPath characters), naming the key and an
// example: the runtime requests it of the worker itself.
func checkWorkerPath(key, path, example string) error {
	u, err := url.Parse(path)
	if len(path) > maxHealthcheckPath || err != nil || !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") ||
		u.Scheme != "" || u.Host != "" || u.Fragment != "" || strings.ContainsAny(path, " \t\r\n") {
		return fmt.Errorf("%s %q must be a path on the worker starting with /, e.g. %s (a query may follow; at most %d characters)",
			key, path, example, maxHealthcheckPath)
	}
	return nil
}

// UnmarshalYAML reads the healthcheck mapping, refusing other shapes with an example.
func (h *Healthcheck) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("healthcheck must be a mapping such as { path: /healthz, timeout: 30s }")
	}
	type plain Healthcheck
	return n.Decode((*plain)(h))
}
