package bench

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// BenchmarkSplit compares a static worker whose unpinned requests a traffic split shares
// between two versions (90/10) with an identical worker without a split, on one runtime
// process, from 100 visitors that each send their visitor cookie; and, measured only, the
// split worker's requests without a cookie, each of which gets a new visitor id and cookie.
func BenchmarkSplit(b *testing.B) {
	s := harness.Start(b, harness.Config{Global: accessLog, Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	page := "<!doctype html><html><head><title>bench</title></head><body>" + strings.Repeat("<p>static content</p>", 100) + "</body></html>"
	for _, name := range []string{"plain", "canary"} {
		for _, v := range []string{"1.0.0", "2.0.0"} {
			dir := filepath.Join(s.DataDir, "apps", name, v)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			for f, content := range map[string]string{"manifest.yaml": "name: " + name + "\nversion: " + v + "\nentrypoint: index.html\n", "index.html": page} {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	split := map[string]any{"split": []map[string]any{{"version": "1.0.0", "percent": 90}, {"version": "2.0.0", "percent": 10}}}
	if resp := s.Do("PUT", s.API+"/workers/_/canary/traffic", harness.WithKey(rootKey), harness.WithJSON(split)); resp.Status != 200 {
		b.Fatalf("PUT traffic = %s", resp)
	}
	client, conns := newClient()
	defer client.CloseIdleConnections()
	sets := map[string][]*http.Request{}
	for i := range 100 {
		cookie := http.Header{"Cookie": {fmt.Sprintf("runtime_visitor=benchvisitor%04d", i)}}
		for set, path := range map[string]string{"no-split": "/plain/", "split": "/canary/"} {
			req, err := newRequest(s.URL+path, cookie)
			if err != nil {
				b.Fatal(err)
			}
			sets[set] = append(sets[set], req)
		}
	}
	req, err := newRequest(s.URL+"/canary/", nil)
	if err != nil {
		b.Fatal(err)
	}
	sets["split-no-cookie"] = []*http.Request{req}
	// Both sides answer the same bytes, and the split does split.
	if a, c := fetch(b, client, sets["split"][0]), fetch(b, client, sets["no-split"][0]); a != c {
		b.Fatalf("the split worker answers %q, the plain one %q", a, c)
	}
	versions := map[string]int{}
	for _, req := range sets["split"] {
		resp, err := client.Do(req.Clone(req.Context()))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		versions[resp.Header.Get("X-Worker-Version")]++
	}
	if versions["1.0.0"] == 0 || versions["2.0.0"] == 0 || versions["1.0.0"]+versions["2.0.0"] != 100 {
		b.Fatalf("100 visitors of the split worker got %v", versions)
	}
	for _, set := range sets {
		if err := loadEach(client, set, conns, warmUp); err != nil {
			b.Fatalf("warming up: %v", err)
		}
	}
	names := []string{"no-split", "split", "split-no-cookie"}
	for i := range *rounds {
		for j := range names {
			name := names[(i+j)%len(names)]
			b.Run(name, func(b *testing.B) { benchGetEach(b, client, sets[name], conns) })
		}
	}
}
