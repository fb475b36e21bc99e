package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// TestClient talks to a stand-in runtime under a .localhost name: discovery, the key and the
// Origin header on changes, and refusals as *Error with the envelope's code.
func TestClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req-1")
		switch {
		case r.URL.Path == "/.well-known/runtime":
			_, _ = w.Write([]byte(`{"api":"/_/api","version":"v1"}`))
		case r.URL.Path == "/_/api/things" && r.Method == "POST":
			if r.Header.Get("X-API-Key") != "k" || r.Header.Get("Origin") != "http://"+r.Host {
				http.Error(w, `{"error":{"code":"CSRF_REJECTED","message":"no origin"}}`, http.StatusForbidden)
				return
			}
			_, _ = w.Write([]byte(`{"ok":true}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"NOT_FOUND","message":"no such thing"}}`))
		}
	}))
	defer srv.Close()
	port := mustURL(t, srv.URL).Port()
	c, err := New("http://apps.localhost:"+port+"/", "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := c.Discover(ctx); err != nil || d.API != "/_/api" {
		t.Fatalf("discover = %+v, %v", d, err)
	}
	var out struct{ OK bool }
	if err := c.JSON(ctx, "POST", "/things", map[string]int{"n": 1}, &out); err != nil || !out.OK {
		t.Fatalf("POST things = %+v, %v", out, err)
	}
	err = c.JSON(ctx, "GET", "/missing", nil, nil)
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.Code != "NOT_FOUND" || apiErr.RequestID != "req-1" {
		t.Errorf("GET missing = %v, want NOT_FOUND with the request id", err)
	}

	down, _ := New("http://127.0.0.1:1", "")
	var unreachable *UnreachableError
	if _, err := down.Discover(ctx); !errors.As(err, &unreachable) {
		t.Errorf("an unreachable runtime gave %v", err)
	}
	for _, bad := range []string{"ftp://x", "localhost:8080", "http://", "http://h/?q=1", "http://u:p@h"} {
		if _, err := New(bad, ""); err == nil {
			t.Errorf("New(%q) accepted it", bad)
		}
	}
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
