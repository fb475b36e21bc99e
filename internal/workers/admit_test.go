package workers

import (
	"io/fs"
	"testing"

	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/packages"
)

func TestAdmit(t *testing.T) {
	team := Policy{ProcessWorkers: config.Namespaces{List: []string{"@team"}}, Reserved: packages.ReservedNames("/_/api")}
	all := Policy{ProcessWorkers: config.Namespaces{All: true}, Reserved: team.Reserved}
	bases := map[string]string{"/hello": "hello-plugin"}
	tests := []struct {
		name     string
		policy   Policy
		manifest string
		code     string // "" when admitted
	}{
		{"static worker", team, "name: site\nentrypoint: index.html\n", ""},
		{"files only", team, "name: site\n", ""},
		{"command outside the allowed namespaces", team, "name: '@other/x'\ncommand: [./server]\n", CodeProcessWorkersDisabled},
		{"unscoped command with namespaces allowed", team, "name: x\ncommand: [./server]\n", CodeProcessWorkersDisabled},
		{"program entrypoint", team, "name: '@other/x'\nentrypoint: server.sh\n", CodeProcessWorkersDisabled},
		{"command in an allowed namespace", team, "name: '@team/x'\ncommand: [./server]\n", ""},
		{"command with process workers on", all, "name: x\ncommand: [./server]\n", ""},
		{"command with process workers off", Policy{Reserved: team.Reserved}, "name: '@team/x'\ncommand: [./server]\n", CodeProcessWorkersDisabled},
		{"named api", all, "name: api\n", packages.CodeInvalidName},
		{"named cpanel", all, "name: cpanel\n", packages.CodeInvalidName},
		{"named .well-known", all, "name: .well-known\n", packages.CodeInvalidName},
		{"named like the prefix", all, "name: _\n", packages.CodeInvalidName},
		{"scoped api", all, "name: '@team/api'\n", ""},
		{"hidden by a plugin's base", all, "name: hello\n", CodeConflict},
		{"scoped, beside a plugin's base", all, "name: '@team/hello'\n", ""},
		{"invalid manifest", all, "name: x\nmaxRequests: -1\n", packages.CodeInvalidManifest},
		{"wasm with wasm workers off", all, "name: x\nruntime: wasm\nmodule: app.wasm\n", CodeWasmWorkersDisabled},
		{"wasm in an allowed namespace", Policy{WasmWorkers: config.Namespaces{List: []string{"@team"}}}, "name: '@team/x'\nruntime: wasm\nmodule: app.wasm\n", ""},
		{"wasm outside the allowed namespaces", Policy{WasmWorkers: config.Namespaces{List: []string{"@team"}}}, "name: '@other/x'\nruntime: wasm\nmodule: app.wasm\n", CodeWasmWorkersDisabled},
		{"wasm with process workers off", Policy{WasmWorkers: config.Namespaces{All: true}}, "name: x\nruntime: wasm\nmodule: app.wasm\n", ""},
		{"a process worker with a database", all, "name: x\ncommand: [./server]\ndatabase: true\n", ""},
		{"a JavaScript worker with a database", Policy{ProcessWorkers: all.ProcessWorkers, JSEngines: config.JSEngines{Default: "bun", Paths: map[string]string{"bun": "/usr/bin/bun"}}}, "name: x\nentrypoint: index.ts\ndatabase: true\n", ""},
		{"a static worker with a database", all, "name: x\nentrypoint: index.html\ndatabase: true\n", packages.CodeInvalidManifest},
		{"a wasm worker with a database", Policy{WasmWorkers: config.Namespaces{All: true}}, "name: x\nruntime: wasm\nmodule: app.wasm\ndatabase: true\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Admit(manifestOnly(t, tt.manifest), tt.policy, bases)
			if tt.code == "" && err != nil || tt.code != "" && !packages.IsCode(err, tt.code) {
				t.Fatalf("Admit = %v, want code %q", err, tt.code)
			}
		})
	}
}

// manifestOnly reads the metadata of a package whose one metadata file is manifest.yaml.
func manifestOnly(t *testing.T, manifest string) packages.Metadata {
	t.Helper()
	md, err := packages.ReadMetadataFiles(func(name string) ([]byte, error) {
		if name == packages.ManifestYAML {
			return []byte(manifest), nil
		}
		return nil, fs.ErrNotExist
	})
	if err != nil {
		t.Fatal(err)
	}
	return md
}
