package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/keystore"
)

// TestClusterRoute reads GET cluster with keys of each kind: workers:read is what it takes,
// whatever the key's namespaces, and the body is what Instances answers, in the document's shape.
func TestClusterRoute(t *testing.T) {
	a, do, _, _ := fileTestAPI(t)
	want := api.Cluster{Change: 7, Instances: []api.ClusterInstance{
		{ID: "a1", Address: "10.0.0.1:443", Version: "v1.2.3", AppliedChange: 7, LastSeen: "2026-11-27T05:00:00Z", Health: "ok", Self: true},
		{ID: "b2", Address: "10.0.0.2:443", Version: "v1.2.3", AppliedChange: 5, LastSeen: "2026-11-27T04:00:00Z", Health: "gone"},
	}}
	a.cluster.instances = func(context.Context) (api.Cluster, error) { return want, nil }
	store, _ := a.keys()
	key := func(k keystore.NewKey) string {
		created, err := store.Create(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		return created.Secret
	}
	for _, tt := range []struct {
		name   string
		key    string
		status int
		code   string
	}{
		{"root", fileTestRoot, 200, ""},
		{"viewer", key(keystore.NewKey{Name: "viewer", Role: keystore.RoleViewer}), 200, ""},
		{"namespaced", key(keystore.NewKey{Name: "team", Role: keystore.RoleEditor, Namespaces: []string{"@team"}}), 200, ""},
		{"without workers:read", key(keystore.NewKey{Name: "keys-only", Role: keystore.RoleCustom, Permissions: []string{keystore.KeysRead, keystore.PluginsRead}}), 403, CodePermissionDenied},
		{"unknown key", "rtk_" + strings.Repeat("a", 43), 401, CodeAuthRequired},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/api/cluster", nil)
			req.Header.Set(APIKeyHeader, tt.key)
			resp := do(req)
			if resp.StatusCode != tt.status {
				t.Fatalf("GET cluster = %d, want %d: %s", resp.StatusCode, tt.status, bodyOf(t, resp))
			}
			if tt.code != "" {
				if code := errorCode(t, resp); code != tt.code {
					t.Errorf("code = %s, want %s", code, tt.code)
				}
				return
			}
			var got api.Cluster
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("body = %+v (%v), want %+v", got, err, want)
			}
		})
	}
}

// TestClusterRouteWhileStarting answers 503 NOT_READY without Instances, passes the error of
// Instances on as it does for other routes, unless it comes with this instance's own view,
// answered degraded; no instance is an empty array.
func TestClusterRouteWhileStarting(t *testing.T) {
	for _, tt := range []struct {
		name      string
		instances Instances
		status    int
		body      string
	}{
		{"no instances yet", nil, 503, envelope.CodeNotReady},
		{"primary unavailable", func(context.Context) (api.Cluster, error) {
			return api.Cluster{}, keystore.ErrPrimaryUnavailable
		}, 503, CodeKeyStoreUnavailable},
		{"refused", func(context.Context) (api.Cluster, error) {
			return api.Cluster{}, envelope.Errorf(503, envelope.CodeNotReady, "the runtime is starting")
		}, 503, envelope.CodeNotReady},
		{"primary unreadable, own view given", func(context.Context) (api.Cluster, error) {
			return api.Cluster{Instances: []api.ClusterInstance{{ID: "a1", Address: "10.0.0.1:443", Version: "v1.2.3",
				AppliedChange: 4, LastSeen: "2026-11-27T05:00:00Z", Health: "ok", Self: true}}}, keystore.ErrPrimaryUnavailable
		}, 200, `{"instances":[{"id":"a1","address":"10.0.0.1:443","version":"v1.2.3","appliedChange":4,"lastSeen":"2026-11-27T05:00:00Z","health":"degraded","self":true}],"change":0}`},
		{"starting, own view given", func(context.Context) (api.Cluster, error) {
			return api.Cluster{Instances: []api.ClusterInstance{{ID: "a1", Health: "ok", Self: true}}},
				envelope.Errorf(503, envelope.CodeNotReady, "the runtime is starting")
		}, 503, envelope.CodeNotReady},
		{"none listed", func(context.Context) (api.Cluster, error) { return api.Cluster{}, nil }, 200, `{"instances":[],"change":0}`},
		{"broken", func(context.Context) (api.Cluster, error) { return api.Cluster{}, errors.New("disk on fire") }, 500, envelope.CodeInternal},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, v := testAPI(t, Options{RootKey: fileTestRoot, Instances: tt.instances})
			req := httptest.NewRequest("GET", "/api/cluster", nil)
			req.Header.Set(APIKeyHeader, fileTestRoot)
			resp := serve(t, a, v, req)
			body := bodyOf(t, resp)
			if resp.StatusCode != tt.status || !json.Valid([]byte(body)) || !strings.Contains(body, tt.body) {
				t.Errorf("GET cluster = %d %s, want %d with %s", resp.StatusCode, body, tt.status, tt.body)
			}
			if resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control = %q", resp.Header.Get("Cache-Control"))
			}
		})
	}
}
