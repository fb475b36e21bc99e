package plugins

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/packages"
)

// units writes plugins (name → manifest body after the name) and reads them as a catalog does.
func units(t *testing.T, plugins map[string]string) []packages.Unit {
	t.Helper()
	dir := t.TempDir()
	for name, body := range plugins {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(p, 0o755)
		if err := os.WriteFile(filepath.Join(p, "manifest.yaml"), []byte(fmt.Sprintf("name: '%s'\n%s", name, body)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	us, err := packages.NewCatalog(packages.PluginLayout, []string{dir}, packages.DefaultLimits).List()
	if err != nil {
		t.Fatal(err)
	}
	return us
}

// policy is the default policy under the API path /api.
var policy = Policy{Handlers: DefaultHandlers, Reserved: packages.ReservedNames("/api")}

func names(plan Plan) (loaded []string, failed map[string]string) {
	failed = map[string]string{}
	for _, p := range plan.Load {
		loaded = append(loaded, p.Name)
	}
	for _, f := range plan.Failed {
		failed[f.Name] = f.Error
	}
	return
}

func TestPlanOrder(t *testing.T) {
	plan := MakePlan(units(t, map[string]string{
		"app":      "dependencies: [auth, db]\noptionalDependencies: [metrics]\n",
		"auth":     "dependencies: [db]\n",
		"db":       "",
		"metrics":  "optionalDependencies: [nope]\n", // absent optional dependencies are fine
		"zeta":     "",
		"@t/extra": "optionalDependencies: [app]\n",
	}), policy, nil)
	loaded, failed := names(plan)
	if want := []string{"db", "auth", "metrics", "app", "@t/extra", "zeta"}; !reflect.DeepEqual(loaded, want) || len(failed) != 0 {
		t.Fatalf("load order %v (failed %v), want %v", loaded, failed, want)
	}
}

func TestPlanExclusions(t *testing.T) {
	plan := MakePlan(units(t, map[string]string{
		"needs-missing":  "dependencies: [ghost]\n",
		"needs-disabled": "dependencies: [off]\n",
		"off":            "enabled: false\n",
		"chain":          "dependencies: [needs-missing]\n", // transitively
		"bad":            "base: /Not Valid\n",
		"needs-bad":      "dependencies: [bad]\n",
		"a":              "dependencies: [b]\n",
		"b":              "dependencies: [c]\n",
		"c":              "dependencies: [a]\n",
		"on-cycle":       "dependencies: [a]\n",
		"fine":           "optionalDependencies: [a, ghost]\n", // optional on a failed plugin: still loads
		"x1":             "base: /shared\nroutes: [{handle: [{handler: static_response}]}]\n",
		"x2":             "base: /shared\n",
		"after-x2":       "dependencies: [x2]\n",
		"api-base":       "base: /api\n",
		"routes-no-base": "routes: [{handle: [{handler: static_response}]}]\n",
		"bad-routes":     "base: /br\nroutes: [just a string]\n",
		"self":           "dependencies: [self]\n",
		"over-worker":    "base: /site\n",
		"proxy":          "base: /proxy\nroutes: [{handle: [{handler: reverse_proxy}]}]\n",
		"env":            "base: /env\nroutes: [{handle: [{handler: static_response, body: '{env.HOME}'}]}]\n",
	}), policy, []string{"site", "@t/site"})
	loaded, failed := names(plan)
	if !reflect.DeepEqual(loaded, []string{"fine", "x1"}) {
		t.Errorf("loaded %v, want [fine x1]", loaded)
	}
	for name, want := range map[string]string{
		"needs-missing":  "requires ghost, which is missing",
		"needs-disabled": "requires off, which is disabled",
		"chain":          "requires needs-missing",
		"bad":            "invalid manifest: base",
		"needs-bad":      "requires bad, which is not loaded",
		"a":              "dependency cycle: a → b → c → a",
		"b":              "dependency cycle",
		"c":              "dependency cycle",
		"on-cycle":       "requires a, which is in a dependency cycle",
		"x2":             "base /shared is already served by plugin x1",
		"after-x2":       "requires x2, which is not loaded",
		"api-base":       "reserved",
		"routes-no-base": "routes need a base",
		"bad-routes":     "routes[0] must be a mapping",
		"self":           "dependency cycle: self → self",
		"over-worker":    "base /site would hide worker site",
		"proxy":          `not allowed: routes[0].handle[0] uses handler "reverse_proxy"`,
		"env":            "not allowed: routes[0].handle[0].body uses the placeholder {env.…}",
	} {
		if !strings.Contains(failed[name], want) {
			t.Errorf("%s: %q, want it to contain %q", name, failed[name], want)
		}
	}
	if _, ok := failed["off"]; ok {
		t.Error("a disabled plugin is reported as failed")
	}
	reasons := map[string]Reason{}
	for _, f := range plan.Failed {
		reasons[f.Name] = f.Reason
	}
	for name, want := range map[string]Reason{
		"needs-missing": Unmet, "on-cycle": Unmet, "a": Cycle, "self": Cycle, "x2": BaseTaken,
		"bad": Invalid, "over-worker": Invalid, "proxy": Invalid,
	} {
		if reasons[name] != want {
			t.Errorf("%s: reason %d, want %d", name, reasons[name], want)
		}
	}
}

func TestManifestRoutesToJSON(t *testing.T) {
	us := units(t, map[string]string{"hello": `base: /hello
menus:
  - {title: Hello, icon: wave, path: /hello/}
routes:
  - match: [{path: ["/"]}]
    handle:
      - handler: static_response
        body: hi
        status_code: 200
onRequest:
  - handler: headers
    response: {set: {X-Hello: ["1"]}}
onRequestFailOpen: true
`})
	m, err := ReadManifest(us[0].Versions[0].Metadata, policy, "")
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Routes[0]) != `{"handle":[{"body":"hi","handler":"static_response","status_code":200}],"match":[{"path":["/"]}]}` {
		t.Errorf("route JSON = %s", m.Routes[0])
	}
	if string(m.OnRequest[0]) != `{"handler":"headers","response":{"set":{"X-Hello":["1"]}}}` || !m.OnRequestFailOpen {
		t.Errorf("onRequest = %s, fail open %v", m.OnRequest[0], m.OnRequestFailOpen)
	}
	if !reflect.DeepEqual(m.Menus, []Menu{{Title: "Hello", Icon: "wave", Path: "/hello/"}}) || m.Base != "/hello" {
		t.Errorf("menus %v base %q", m.Menus, m.Base)
	}
}
