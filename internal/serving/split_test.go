package serving

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/internal/hosts"
	"github.com/caddy-runtime/runtime/packages"
)

func TestSplitVersion(t *testing.T) {
	sp := NewSplit([]Share{{"1.2.0", 90}, {"1.3.0", 10}})
	for _, tc := range []struct {
		bucket int
		want   string
	}{{0, "1.3.0"}, {9, "1.3.0"}, {10, "1.2.0"}, {99, "1.2.0"}} {
		if got := sp.Version(tc.bucket); got != tc.want {
			t.Errorf("bucket %d: %s, want %s", tc.bucket, got, tc.want)
		}
	}
	if got := NewSplit([]Share{{"latest", 50}, {"9.0.0", 50}}).Version(0); got != "latest" {
		t.Errorf("latest counts as the newest: bucket 0 = %s", got)
	}
}

// TestBucketSpread checks that the hash spreads visitors evenly and differently per worker.
func TestBucketSpread(t *testing.T) {
	counts := make([]int, Buckets)
	same := 0
	const n = 100000
	for i := range n {
		id := fmt.Sprintf("visitor-%d", i)
		b := Bucket(id, "app")
		counts[b]++
		if b == Bucket(id, "other") {
			same++
		}
	}
	for b, c := range counts {
		if c < n/Buckets*8/10 || c > n/Buckets*12/10 {
			t.Errorf("bucket %d holds %d of %d visitors", b, c, n)
		}
	}
	if same > n/Buckets*2 {
		t.Errorf("%d visitors share their bucket across two workers", same)
	}
	if Bucket("ab", "c") == Bucket("a", "bc") && Bucket("xy", "z") == Bucket("x", "yz") {
		t.Error("the separator does not separate")
	}
}

// TestGrowKeeps checks the promise of a canary that grows: every bucket on the new version at
// one share stays on it at every larger share.
func TestGrowKeeps(t *testing.T) {
	for p := 1; p < 100; p++ {
		small := NewSplit([]Share{{"1.0.0", 100 - p}, {"2.0.0", p}})
		large := NewSplit([]Share{{"1.0.0", 99 - p}, {"2.0.0", p + 1}})
		for b := range Buckets {
			if small.Version(b) == "2.0.0" && large.Version(b) != "2.0.0" {
				t.Fatalf("bucket %d leaves 2.0.0 when its share grows from %d", b, p)
			}
		}
	}
}

func TestVisitorCookie(t *testing.T) {
	for _, tc := range []struct {
		cookie, id string
		ok         bool
	}{
		{"runtime_visitor=abcdefgh12345678", "abcdefgh12345678", true},
		{"a=b; runtime_visitor=abcdefgh12345678; c=d", "abcdefgh12345678", true},
		{"runtime_visitor=short", "", false},
		{"runtime_visitor=bad/chars=here!!", "", false},
		{"xruntime_visitor=abcdefgh12345678", "", false},
		{"", "", false},
	} {
		h := http.Header{}
		if tc.cookie != "" {
			h.Set("Cookie", tc.cookie)
		}
		if id, ok := visitorCookie(h); id != tc.id || ok != tc.ok {
			t.Errorf("%q: %q %v", tc.cookie, id, ok)
		}
	}
}

// splitWorker installs app 1.0.0 and 2.0.0 (static) and returns a Server with splits.
func splitWorker(t *testing.T, header string) (*Server, *Splits, *packages.Catalog) {
	t.Helper()
	dir := t.TempDir()
	for _, v := range []string{"1.0.0", "2.0.0", "3.0.0"} {
		p := filepath.Join(dir, "app", v)
		os.MkdirAll(p, 0o755)
		enabled := ""
		if v == "3.0.0" {
			enabled = "enabled: false\n"
		}
		os.WriteFile(filepath.Join(p, "manifest.yaml"), []byte("name: app\nversion: "+v+"\nentrypoint: index.html\n"+enabled), 0o644)
		os.WriteFile(filepath.Join(p, "index.html"), []byte(v), 0o644)
	}
	c := packages.NewCatalog(packages.WorkerLayout, []string{dir}, packages.DefaultLimits)
	t.Cleanup(c.Close)
	splits := NewSplits()
	return New(Options{Workers: c, Splits: splits, SplitHeader: header}), splits, c
}

func get(t *testing.T, s *Server, path string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	for k, v := range header {
		r.Header[k] = v
	}
	rec := httptest.NewRecorder()
	if answer := s.Serve(rec, r); answer != nil {
		t.Fatalf("GET %s: %v", path, answer)
	}
	return rec
}

// TestServeSplit: a split sends its share of visitors to each side, sticky by the cookie, by
// the named header without one, at random (with a new cookie) without either; a pin is never
// split; a split version that is not enabled leaves its visitors to the newest enabled one;
// every answer names its version.
func TestServeSplit(t *testing.T) {
	s, splits, _ := splitWorker(t, "X-User")
	if rec := get(t, s, "/app/", nil); rec.Body.String() != "2.0.0" || rec.Header().Get(VersionHeader) != "2.0.0" || rec.Header().Get("Set-Cookie") != "" ||
		len(rec.Header().Values("Vary")) != 0 {
		t.Fatalf("no split: %q, version %q, cookie %q, Vary %q", rec.Body, rec.Header().Get(VersionHeader), rec.Header().Get("Set-Cookie"), rec.Header().Values("Vary"))
	}
	splits.Replace(map[string][]Share{"app": {{"1.0.0", 90}, {"2.0.0", 10}}})
	onNew := 0
	for i := range 1000 {
		id := fmt.Sprintf("visitor%08d", i)
		cookie := http.Header{"Cookie": {VisitorCookie + "=" + id}}
		rec := get(t, s, "/app/", cookie)
		want := map[bool]string{true: "2.0.0", false: "1.0.0"}[Bucket(id, "app") < 10]
		if rec.Body.String() != want || rec.Header().Get(VersionHeader) != want {
			t.Fatalf("visitor %s: %q (header %q), want %s", id, rec.Body, rec.Header().Get(VersionHeader), want)
		}
		if rec.Header().Get("Set-Cookie") != "" {
			t.Fatalf("a visitor with a cookie got another: %q", rec.Header().Get("Set-Cookie"))
		}
		if vary := strings.Join(rec.Header().Values("Vary"), ", "); vary != "Cookie, X-User" {
			t.Fatalf("a split answer varies by %q", vary)
		}
		if want == "2.0.0" {
			onNew++
		}
		if rec := get(t, s, "/app@1.0.0/", cookie); rec.Body.String() != "1.0.0" {
			t.Fatalf("a pin was split: %q", rec.Body)
		}
		user := http.Header{"X-User": {id}}
		if rec := get(t, s, "/app/", user); rec.Body.String() != want || rec.Header().Get("Set-Cookie") != "" {
			t.Fatalf("by header %s: %q, cookie %q; want %s and none", id, rec.Body, rec.Header().Get("Set-Cookie"), want)
		}
	}
	if onNew < 70 || onNew > 130 {
		t.Errorf("%d of 1000 visitors on the 10%% side", onNew)
	}
	rec := get(t, s, "/app/", nil)
	setCookie := rec.Header().Get("Set-Cookie")
	id, ok := strings.CutPrefix(strings.Split(setCookie, ";")[0], VisitorCookie+"=")
	if !ok || !validVisitorID(id) || !strings.Contains(setCookie, "HttpOnly") {
		t.Fatalf("a new visitor's cookie: %q", setCookie)
	}
	if want := map[bool]string{true: "2.0.0", false: "1.0.0"}[Bucket(id, "app") < 10]; rec.Body.String() != want {
		t.Errorf("a new visitor got %q, not the side of the id it was given (%s)", rec.Body, want)
	}
	// A disabled version in the split: its visitors get the newest enabled version.
	splits.Replace(map[string][]Share{"app": {{"3.0.0", 100}}})
	if rec := get(t, s, "/app/", http.Header{"Cookie": {VisitorCookie + "=abcdefgh12345678"}}); rec.Body.String() != "2.0.0" {
		t.Errorf("a split to a disabled version served %q", rec.Body)
	}
	splits.Replace(map[string][]Share{"app": {{"1.0.0", 100}}})
	if rec := get(t, s, "/app/", nil); rec.Body.String() != "1.0.0" {
		t.Errorf("a 100%% split to 1.0.0 served %q", rec.Body)
	}
	splits.Replace(nil)
	if rec := get(t, s, "/app/", nil); rec.Body.String() != "2.0.0" {
		t.Errorf("after the split ended: %q", rec.Body)
	}
}

// TestSplitAllocations: choosing a side of a split for a visitor with a cookie, or by the
// named header, allocates nothing; a worker without a split costs a map lookup.
func TestSplitAllocations(t *testing.T) {
	s, splits, c := splitWorker(t, "X-User")
	splits.Replace(map[string][]Share{"app": {{"1.0.0", 90}, {"2.0.0", 10}}})
	u, ok := c.Find("app")
	if !ok {
		t.Fatal("no app")
	}
	for name, h := range map[string]http.Header{
		"cookie": {"Cookie": {"other=1; " + VisitorCookie + "=abcdefgh12345678"}},
		"header": {"X-User": {"user-42"}},
	} {
		r := httptest.NewRequest("GET", "/app/", nil)
		r.Header = h
		if n := testing.AllocsPerRun(100, func() {
			var vi visit
			if _, ok := s.splitChoice(u, r, &vi); !ok {
				t.Fatal("no choice")
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per choice", name, n)
		}
	}
}

// TestServeSplitByHost: a request on the worker's own host is split as its path is, the same
// visitor getting the same version on both.
func TestServeSplitByHost(t *testing.T) {
	_, splits, c := splitWorker(t, "")
	var router hosts.Router
	router.SetDomain(hosts.Domain{Name: "apps.example.com", Scheme: "https"})
	s := New(Options{Workers: c, Splits: splits, Hosts: &router})
	splits.Replace(map[string][]Share{"app": {{"1.0.0", 50}, {"2.0.0", 50}}})
	sides := map[string]int{}
	for i := range 40 {
		id := fmt.Sprintf("visitor%08d", i)
		want := map[bool]string{true: "2.0.0", false: "1.0.0"}[Bucket(id, "app") < 50]
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = "app.apps.example.com"
		r.Header.Set("Cookie", VisitorCookie+"="+id)
		rec := httptest.NewRecorder()
		if answer := s.Serve(rec, r); answer != nil || rec.Body.String() != want || rec.Header().Get(VersionHeader) != want {
			t.Fatalf("visitor %s on the host: %v %q, want %s", id, answer, rec.Body, want)
		}
		if path := get(t, s, "/app/", http.Header{"Cookie": {VisitorCookie + "=" + id}}); path.Body.String() != want {
			t.Fatalf("visitor %s: %q at the path, %s on the host", id, path.Body, want)
		}
		sides[want]++
	}
	if len(sides) != 2 {
		t.Errorf("40 visitors on one side only: %v", sides)
	}
}
