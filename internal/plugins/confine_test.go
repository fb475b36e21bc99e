package plugins

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/packages"
)

// metadata reads a manifest body as package metadata.
func metadata(t *testing.T, manifest string) packages.Metadata {
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

// route is a manifest with one route handling with handler (a YAML flow mapping).
func route(handler string) string {
	return "name: p\nbase: /p\nroutes:\n  - handle: [" + handler + "]\n"
}

func TestConfinement(t *testing.T) {
	extra := Policy{Handlers: append([]string{"subroute", "reverse_proxy", "templates"}, DefaultHandlers...)}
	tests := []struct {
		name     string
		policy   Policy
		manifest string
		want     string // "" when accepted, else a part of the refusal
	}{
		{"plain route", policy, route("{handler: static_response, body: hi}"), ""},
		{"request placeholders", policy, route("{handler: static_response, body: '{http.request.uri.path} {time.now}'}"), ""},
		{"env placeholder", policy, route("{handler: static_response, body: '{env.RUNTIME_ROOT_KEY}'}"), "body uses the placeholder {env.…}"},
		{"env in upper case", policy, route("{handler: static_response, body: '{ENV.X}'}"), "{env.…}"},
		{"escaped env", policy, route(`{handler: static_response, body: '\{env.X\}'}`), "{env.…}"},
		{"env after a space and a backslash", policy, route(`{handler: static_response, body: '{ \env.X}'}`), "{env.…}"},
		{"env built from a request value", policy, route("{handler: static_response, body: '{env.{http.request.header.X}}'}"), "{env.…}"},
		{"file placeholder in a header", policy, route("{handler: headers, response: {set: {X-Key: ['{file./data/state/bootstrap-key}']}}}"), "{file.…}"},
		{"system placeholder", policy, route("{handler: static_response, body: '{system.wd}'}"), "{system.…}"},
		{"placeholder in a key", policy, "name: p\nbase: /p\nroutes:\n  - match: [{vars: {'{env.X}': [secret]}}]\n    handle: [{handler: static_response}]\n", "uses the placeholder {env.…}"},
		{"placeholder in a hook", policy, "name: p\nonRequest: [{handler: headers, response: {set: {X: ['{env.X}']}}}]\n", "onRequest[0].response.set.X[0]"},
		{"handler outside the list", policy, route("{handler: reverse_proxy, upstreams: [{dial: 'localhost:2019'}]}"), `uses handler "reverse_proxy"`},
		{"hook outside the list", policy, "name: p\nonRequest: [{handler: reverse_proxy}]\n", `onRequest[0] uses handler "reverse_proxy"`},
		{"handler nested in a subroute", extra, route("{handler: subroute, routes: [{handle: [{handler: authentication}]}]}"), `routes[0].handle[0].routes[0].handle[0] uses handler "authentication"`},
		{"handler in a subroute's errors", extra, route("{handler: subroute, errors: {routes: [{handle: [{handler: copy_response}]}]}}"), `uses handler "copy_response"`},
		{"expression matcher", policy, "name: p\nbase: /p\nroutes:\n  - match: [{expression: 'true'}]\n    handle: [{handler: static_response}]\n", `uses matcher "expression"`},
		{"expression inside not", policy, "name: p\nbase: /p\nroutes:\n  - match: [{not: [{expression: 'true'}]}]\n    handle: [{handler: static_response}]\n", `match[0].not[0] uses matcher "expression"`},
		{"matcher key in another case", policy, "name: p\nbase: /p\nroutes:\n  - MATCH: [{expression: 'true'}]\n    handle: [{handler: static_response}]\n", `uses matcher "expression"`},
		{"standard matchers", policy, "name: p\nbase: /p\nroutes:\n  - match: [{path: [/a], method: [GET], not: [{header: {X: [y]}}], file: {try_files: ['{path}']}}]\n    handle: [{handler: static_response}]\n", ""},
		{"root slash", policy, route("{handler: file_server, root: /, browse: {}}"), `root "/" is outside the plugin's folder`},
		{"root upwards", policy, route("{handler: file_server, root: ../other}"), `root "../other" leads outside`},
		{"root upwards after a folder", policy, route("{handler: file_server, root: public/../../other}"), "leads outside"},
		{"root from a request header", policy, route("{handler: file_server, root: '{http.request.header.X}'}"), "holds a placeholder"},
		{"root after the root variable", policy, route("{handler: file_server, root: '{http.vars.root}/../..'}"), "leads outside"},
		{"root in another case", policy, route("{handler: file_server, ROOT: /etc}"), `ROOT "/etc" is outside`},
		{"windows root", policy, route(`{handler: file_server, root: 'C:\x'}`), "outside the plugin's folder"},
		{"vars root", policy, route("{handler: vars, root: /}"), `root "/" is outside`},
		{"file matcher root", policy, "name: p\nbase: /p\nroutes:\n  - match: [{file: {root: /etc, try_files: [passwd]}}]\n    handle: [{handler: file_server}]\n", `root "/etc" is outside`},
		{"templates file root", extra, route("{handler: templates, file_root: /}"), `file_root "/" is outside`},
		{"roots inside", policy, route("{handler: file_server, root: public}, {handler: vars, root: '{http.vars.root}/x'}"), ""},
		{"named file system", policy, route("{handler: file_server, fs: other}"), "names a Caddy file system"},
		{"file system variable", policy, route("{handler: vars, fs: other}"), "names a Caddy file system"},
		{"browse template", policy, route("{handler: file_server, browse: {template_file: list.html}}"), "template"},
		{"standard encoders", policy, route("{handler: encode, encodings: {gzip: {}, zstd: {}}}"), ""},
		{"unknown encoder", policy, route("{handler: encode, encodings: {gzip: {}, custom: {}}}"), `uses encoder "custom"`},
		{"fastcgi transport", extra, route("{handler: reverse_proxy, transport: {protocol: fastcgi, root: x}}"), "uses transport fastcgi"},
		{"http transport", extra, route("{handler: reverse_proxy, transport: {protocol: http}}"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadManifest(metadata(t, tt.manifest), tt.policy, "")
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want %q", err, tt.want)
			case tt.want != "" && !packages.IsCode(err, CodeNotAllowed):
				t.Fatalf("err = %#v, want code %s", err, CodeNotAllowed)
			}
		})
	}
}

func TestRootsResolveInTheFolder(t *testing.T) {
	m, err := ReadManifest(metadata(t, `name: p
base: /p
routes:
  - match: [{file: {try_files: [index.html]}}]
    handle:
      - {handler: file_server}
      - {handler: file_server, root: ./public/}
      - {handler: vars, root: '{http.vars.root}'}
onRequest:
  - {handler: file_server}
`), policy, "/srv/plugins/p")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"handle":[{"handler":"file_server","root":"/srv/plugins/p"},{"handler":"file_server","root":"/srv/plugins/p/public"},` +
		`{"handler":"vars","root":"/srv/plugins/p"}],"match":[{"file":{"root":"/srv/plugins/p","try_files":["index.html"]}}]}`
	if string(m.Routes[0]) != want {
		t.Errorf("route = %s\nwant    %s", m.Routes[0], want)
	}
	if string(m.OnRequest[0]) != `{"handler":"file_server","root":"/srv/plugins/p"}` {
		t.Errorf("hook = %s", m.OnRequest[0])
	}
}

func TestFold(t *testing.T) {
	for in, want := range map[string]string{"root": "ROOT", "Root": "ROOT", "\u017ftatus": "STATUS", "file_root": "FILE_ROOT"} {
		if got := fold(in); got != want {
			t.Errorf("fold(%q) = %q, want %q", in, got, want)
		}
	}
}
