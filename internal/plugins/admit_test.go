package plugins

import (
	"testing"

	"github.com/caddy-runtime/runtime/packages"
)

func TestAdmit(t *testing.T) {
	operator := Policy{Handlers: append([]string{"reverse_proxy"}, DefaultHandlers...), Reserved: packages.ReservedNames("/_/api")}
	world := World{Workers: []string{"site", "@team/app"}, Bases: map[string]string{"/taken": "other", "/team-mine": "@team/mine"}}
	plain := "routes: [{handle: [{handler: static_response, body: hi}]}]\n"
	hooks := "onRequest: [{handler: headers, response: {set: {X: ['1']}}}]\n"
	tests := []struct {
		name         string
		manifest     string
		unrestricted bool
		code         string // "" when admitted
	}{
		{"tenant's plain route", "name: '@team/p'\nbase: /team-x\n" + plain, false, ""},
		{"tenant's base is its scope", "name: '@team/p'\nbase: /team\n" + plain, false, ""},
		{"tenant's base outside its scope", "name: '@team/p'\nbase: /pub\n" + plain, false, packages.CodeNamespaceDenied},
		{"tenant's base only starting like its scope", "name: '@team/p'\nbase: /teamx\n" + plain, false, packages.CodeNamespaceDenied},
		{"tenant's hooks", "name: '@team/p'\n" + hooks, false, packages.CodeNamespaceDenied},
		{"tenant's handler beyond the defaults", "name: '@team/p'\nbase: /team-x\nroutes: [{handle: [{handler: reverse_proxy}]}]\n", false, packages.CodeNamespaceDenied},
		{"tenant's forbidden handler", "name: '@team/p'\nbase: /team-x\nroutes: [{handle: [{handler: templates}]}]\n", false, CodeNotAllowed},
		{"root's hooks", "name: '@team/p'\n" + hooks, true, ""},
		{"root's handler beyond the defaults", "name: p\nbase: /p\nroutes: [{handle: [{handler: reverse_proxy}]}]\n", true, ""},
		{"root's base anywhere", "name: '@team/p'\nbase: /pub\n" + plain, true, ""},
		{"root's placeholder", "name: p\nbase: /p\nroutes: [{handle: [{handler: static_response, body: '{env.X}'}]}]\n", true, CodeNotAllowed},
		{"base of a worker", "name: p\nbase: /site\n" + plain, true, CodeConflict},
		{"base of another plugin", "name: p\nbase: /taken\n" + plain, true, CodeConflict},
		{"own base", "name: '@team/mine'\nbase: /team-mine\n" + plain, false, ""},
		{"reserved base", "name: p\nbase: /cpanel\n" + plain, true, packages.CodeInvalidManifest},
		{"base under the prefix's segment", "name: p\nbase: /_x\n" + plain, true, packages.CodeInvalidManifest},
		{"plugin named api", "name: api\n", true, packages.CodeInvalidName},
		{"plugin named cpanel", "name: cpanel\n", true, packages.CodeInvalidName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Admit(metadata(t, tt.manifest), operator, tt.unrestricted, world)
			if tt.code == "" && err != nil || tt.code != "" && !packages.IsCode(err, tt.code) {
				t.Fatalf("Admit = %v, want code %q", err, tt.code)
			}
		})
	}
}
