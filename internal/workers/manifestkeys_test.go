package workers

import (
	"io/fs"
	"slices"
	"testing"

	"github.com/caddy-runtime/runtime/packages"
)

// TestUnknownManifestKeys: the keys a worker's manifest may hold come from Manifest's yaml
// tags (nested ones too) and the package's own; any other is reported with what was meant.
func TestUnknownManifestKeys(t *testing.T) {
	for _, tt := range []struct {
		manifest string
		want     []string
	}{
		{"command: [/bin/true]\nenv: { ANY_NAME: x }\nlimits: { memory: 64MiB, cpu: 0.5 }\nhealthcheck: { path: /h, timeout: 2s }\n" +
			"deploy: { include: [node_modules] }\nenabled: true\n", nil},
		{"limits: { timeout: 2s }\n", []string{"limits.timeout is not a manifest key (did you mean timeout?); the runtime ignores it"}},
		{"entrypiont: index.html\n", []string{"entrypiont is not a manifest key (did you mean entrypoint?); the runtime ignores it"}},
		{"limits: { memroy: 1GiB }\n", []string{"limits.memroy is not a manifest key (did you mean limits.memory?); the runtime ignores it"}},
		{"healthcheck: { path: /h, interval: 1s }\n", []string{"healthcheck.interval is not a manifest key; the runtime ignores it"}},
		{"zzzzzz: 1\nhealthcheck: /h\n", []string{"zzzzzz is not a manifest key; the runtime ignores it"}},
	} {
		md, err := packages.ReadMetadataFiles(func(name string) ([]byte, error) {
			if name == packages.ManifestYAML {
				return []byte("name: app\nversion: 1.0.0\n" + tt.manifest), nil
			}
			return nil, fs.ErrNotExist
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := packages.UnknownKeys(md, Manifest{}); !slices.Equal(got, tt.want) {
			t.Errorf("%q: %q, want %q", tt.manifest, got, tt.want)
		}
	}
}
