package handlers

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-runtime/runtime/api"
	"github.com/caddy-runtime/runtime/internal/envelope"
	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// listingTestAPI serves an API over two worker folders (the first shadowing the second, so
// the whole listing is not in name order) and a key store holding keys keys, some restricted
// to @team.
func listingTestAPI(t *testing.T, keys int) (do func(target, key string, header ...string) *http.Response, store *keystore.Store) {
	t.Helper()
	dir := t.TempDir()
	tree := map[string]string{}
	for _, name := range []string{"zeta", "alpha", "@team/web", "@team/api", "@other/x", "mid", "b-2", "b"} {
		tree["apps/"+name+"/1.0.0/manifest.yaml"] = fmt.Sprintf("name: '%s'\nversion: 1.0.0\n", name)
	}
	tree[".apps/core/1.0.0/manifest.yaml"] = "name: core\nversion: 1.0.0\n"
	tree[".apps/@team/tools/1.0.0/manifest.yaml"] = "name: '@team/tools'\nversion: 1.0.0\n"
	writeTree(t, dir, tree)
	store = openStore(t, dir)
	for i := range keys {
		nk := keystore.NewKey{Name: fmt.Sprintf("key-%02d", i), Role: "viewer"}
		if i%3 == 0 {
			nk.Namespaces = []string{"@team"}
		}
		if _, err := store.Create(context.Background(), nk); err != nil {
			t.Fatal(err)
		}
	}
	workers := packages.NewCatalog(packages.WorkerLayout, []string{filepath.Join(dir, ".apps"), filepath.Join(dir, "apps")}, packages.DefaultLimits)
	a, v := testAPI(t, Options{RootKey: fileTestRoot, Workers: workers, Keys: func() (*keystore.Store, error) { return store, nil }})
	return func(target, key string, header ...string) *http.Response {
		t.Helper()
		req := httptest.NewRequest("GET", target, nil)
		req.Header.Set(APIKeyHeader, key)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		if req.Header.Get("Accept-Encoding") != "" { // the document's validator reads identity bodies
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, req)
			return rec.Result()
		}
		return serve(t, a, v, req)
	}, store
}

// listingCase is one paged listing under test.
type listingCase struct {
	path  string
	names func(t *testing.T, body []byte) []string // the records' names, in answer order
	next  func(t *testing.T, resp *http.Response, body []byte) string
}

var listingCases = map[string]listingCase{
	"workers": {
		path: "/api/workers",
		names: func(t *testing.T, body []byte) []string {
			var list []api.WorkerRecord
			if err := json.Unmarshal(body, &list); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			var names []string
			for _, w := range list {
				names = append(names, w.Name)
			}
			return names
		},
		next: func(t *testing.T, resp *http.Response, _ []byte) string { return resp.Header.Get(NextCursorHeader) },
	},
	"keys": {
		path: "/api/keys",
		names: func(t *testing.T, body []byte) []string {
			var list api.KeyList
			if err := json.Unmarshal(body, &list); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			var names []string
			for _, k := range list.Keys {
				names = append(names, k.Name)
			}
			return names
		},
		next: func(t *testing.T, resp *http.Response, body []byte) string {
			var list api.KeyList
			if err := json.Unmarshal(body, &list); err != nil {
				t.Fatal(err)
			}
			if h := resp.Header.Get(NextCursorHeader); h != list.NextCursor {
				t.Errorf("%s = %q but nextCursor = %q", NextCursorHeader, h, list.NextCursor)
			}
			return list.NextCursor
		},
	},
}

// walk reads every page of a listing with limit, checking each page's size, and returns the
// names in page order.
func walk(t *testing.T, do func(string, string, ...string) *http.Response, lc listingCase, key string, limit int) []string {
	t.Helper()
	var names []string
	cursor := ""
	for range 100 {
		target := fmt.Sprintf("%s?limit=%d", lc.path, limit)
		if cursor != "" {
			target += "&cursor=" + url.QueryEscape(cursor)
		}
		resp := do(target, key)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %s", target, resp.StatusCode, body)
		}
		page := lc.names(t, body)
		cursor = lc.next(t, resp, body)
		if len(page) > limit || cursor != "" && len(page) != limit {
			t.Fatalf("GET %s: %d records, next %q", target, len(page), cursor)
		}
		names = append(names, page...)
		if cursor == "" {
			return names
		}
	}
	t.Fatal("no last page after 100 pages")
	return nil
}

// TestListingPages walks the worker and key listings page by page, with several page sizes, as
// a key that sees everything and as one restricted to @team, and checks that the pages hold
// the whole listing, each record once, in name (keys: id) order, and that without limit and
// cursor the answer is the whole listing, unpaginated as the spec has it.
func TestListingPages(t *testing.T) {
	do, store := listingTestAPI(t, 11)
	team, err := store.Create(context.Background(), keystore.NewKey{Name: "team-reader", Role: "viewer", Namespaces: []string{"@team"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, lc := range listingCases {
		for _, caller := range []struct{ name, key string }{{"root", fileTestRoot}, {"@team", team.Secret}} {
			t.Run(name+" as "+caller.name, func(t *testing.T) {
				resp := do(lc.path, caller.key)
				whole, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK || resp.Header.Get(NextCursorHeader) != "" {
					t.Fatalf("whole listing = %d, %s %q: %s", resp.StatusCode, NextCursorHeader, resp.Header.Get(NextCursorHeader), whole)
				}
				all := lc.names(t, whole)
				if len(all) < 3 {
					t.Fatalf("only %d records: %s", len(all), whole)
				}
				if caller.name == "@team" {
					for _, n := range all {
						if name == "workers" && !strings.HasPrefix(n, "@team/") || name == "keys" && n != "team-reader" && n != "key-00" && n != "key-03" && n != "key-06" && n != "key-09" {
							t.Errorf("a key restricted to @team sees %q", n)
						}
					}
				}
				// Empty parameters ask for nothing more than none. The caller's own lastUsedAt
				// may appear meanwhile (its first use is recorded as it happens).
				if again := bodyOf(t, do(lc.path+"?limit=&cursor=", caller.key)); withoutLastUsed(again) != withoutLastUsed(string(whole)) {
					t.Errorf("with empty limit and cursor: %s, want the whole listing %s", again, whole)
				}
				want := slices.Clone(all)
				if name == "workers" {
					slices.Sort(want) // keys come by id, which is their order already
				}
				for _, limit := range []int{1, 2, 3, len(all) - 1, len(all), len(all) + 1, 500} {
					if got := walk(t, do, lc, caller.key, limit); !slices.Equal(got, want) {
						t.Errorf("pages of %d: %v, want %v", limit, got, want)
					}
				}
				// A cursor alone asks for the default page size.
				first := do(lc.path+"?limit=1", caller.key)
				firstBody, _ := io.ReadAll(first.Body)
				cursor := lc.next(t, first, firstBody)
				rest := lc.names(t, []byte(bodyOf(t, do(lc.path+"?cursor="+url.QueryEscape(cursor), caller.key))))
				if !slices.Equal(rest, want[1:]) {
					t.Errorf("after the first, without limit: %v, want %v", rest, want[1:])
				}
			})
		}
	}
}

// TestListingWholeBodyUnchanged checks that the unpaginated answers are the JSON encodings of
// the spec's shapes, byte for byte: the records encoded one by one and joined make the same
// bytes as encoding the whole value.
func TestListingWholeBodyUnchanged(t *testing.T) {
	do, _ := listingTestAPI(t, 5)
	body := []byte(bodyOf(t, do("/api/workers", fileTestRoot)))
	var workers []api.WorkerRecord
	if err := json.Unmarshal(body, &workers); err != nil {
		t.Fatal(err)
	}
	if want := envelope.EncodeJSON(workers); !bytes.Equal(body, want) {
		t.Errorf("workers:\n%s\nwant\n%s", body, want)
	}
	body = []byte(bodyOf(t, do("/api/keys", fileTestRoot)))
	var keys api.KeyList
	if err := json.Unmarshal(body, &keys); err != nil {
		t.Fatal(err)
	}
	if want := envelope.EncodeJSON(keys); keys.NextCursor != "" || !bytes.Equal(body, want) {
		t.Errorf("keys:\n%s\nwant\n%s", body, want)
	}
	// A page that is not the last is the same encoding, nextCursor included.
	body = []byte(bodyOf(t, do("/api/keys?limit=2", fileTestRoot)))
	if err := json.Unmarshal(body, &keys); err != nil {
		t.Fatal(err)
	}
	if want := envelope.EncodeJSON(keys); keys.NextCursor == "" || !bytes.Equal(body, want) {
		t.Errorf("a page of keys:\n%s\nwant\n%s", body, want)
	}
}

// TestListingCursorSurvivesChanges adds and revokes keys between pages: every key present
// throughout the walk is on exactly one page, whether the changes fall before or after the
// cursor, and whether the key the cursor names is itself revoked.
func TestListingCursorSurvivesChanges(t *testing.T) {
	do, store := listingTestAPI(t, 10)
	ctx := context.Background()
	lc := listingCases["keys"]
	ids := func() map[string]int64 {
		list, err := store.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, k := range list {
			out[k.Name] = k.ID
		}
		return out
	}
	before := ids()
	resp := do(lc.path+"?limit=4", fileTestRoot)
	body, _ := io.ReadAll(resp.Body)
	seen := lc.names(t, body)
	cursor := lc.next(t, resp, body)
	// Revoke the key the cursor names, one already seen and one not yet seen; add keys (which
	// get higher ids: after the cursor).
	for _, name := range []string{"key-03", "key-01", "key-07"} {
		if err := store.Revoke(ctx, before[name]); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"added-a", "added-b"} {
		if _, err := store.Create(ctx, keystore.NewKey{Name: name, Role: "viewer"}); err != nil {
			t.Fatal(err)
		}
	}
	for cursor != "" {
		resp := do(lc.path+"?limit=4&cursor="+cursor, fileTestRoot)
		body, _ := io.ReadAll(resp.Body)
		seen = append(seen, lc.names(t, body)...)
		cursor = lc.next(t, resp, body)
	}
	counts := map[string]int{}
	for _, n := range seen {
		counts[n]++
	}
	for name := range before {
		want := 1
		if name == "key-07" { // revoked before its page was read
			want = 0
		}
		if counts[name] != want {
			t.Errorf("%s on %d pages, want %d (walk %v)", name, counts[name], want, seen)
		}
	}
	if counts["added-a"] != 1 || counts["added-b"] != 1 {
		t.Errorf("keys added after the cursor on %d and %d pages, want 1 (walk %v)", counts["added-a"], counts["added-b"], seen)
	}
}

// TestListingPageErrors checks that a malformed limit or cursor is refused with the envelope.
func TestListingPageErrors(t *testing.T) {
	do, _ := listingTestAPI(t, 2)
	for _, target := range []string{
		"/api/workers?limit=0", "/api/workers?limit=-1", "/api/workers?limit=501", "/api/workers?limit=ten",
		"/api/workers?limit=1.5", "/api/workers?cursor=***",
		"/api/workers?cursor=" + base64.RawURLEncoding.EncodeToString([]byte("Not A Name")),
		"/api/workers?cursor=" + base64.RawURLEncoding.EncodeToString([]byte("../x")),
		"/api/keys?limit=0", "/api/keys?limit=99999999999999999999", "/api/keys?cursor=abc", "/api/keys?cursor=0",
		"/api/keys?cursor=-4", "/api/keys?limit=2&cursor=1e3",
	} {
		resp := do(target, fileTestRoot)
		body := bodyOf(t, resp)
		var env api.Envelope
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(body), &env) != nil || env.Error.Code != envelope.CodeBadRequest || env.Error.Message == "" {
			t.Errorf("GET %s = %d %s, want 400 %s", target, resp.StatusCode, body, envelope.CodeBadRequest)
		}
	}
	// A well-formed cursor after every record is an empty last page, not an error.
	if resp := do("/api/workers?limit=3&cursor="+base64.RawURLEncoding.EncodeToString([]byte("zzz")), fileTestRoot); resp.StatusCode != http.StatusOK {
		t.Errorf("a cursor after every worker = %d, want 200 and an empty page", resp.StatusCode)
	} else if body := bodyOf(t, resp); body != "[]\n" || resp.Header.Get(NextCursorHeader) != "" {
		t.Errorf("a cursor after every worker: %q, %s %q", body, NextCursorHeader, resp.Header.Get(NextCursorHeader))
	}
}

// TestListingEncodings checks that each listing, whole and paged, answers a client that does
// not ask for gzip with the very bytes the gzip answer unpacks to, and that both are kept: a
// second request gets the same bytes.
func TestListingEncodings(t *testing.T) {
	do, _ := listingTestAPI(t, 40)
	for _, target := range []string{"/api/workers", "/api/keys", "/api/keys?limit=30", "/api/workers?limit=3"} {
		plain := do(target, fileTestRoot)
		raw := bodyOf(t, plain)
		if plain.Header.Get("Content-Encoding") != "" || !strings.Contains(plain.Header.Get("Vary"), "Accept-Encoding") {
			t.Errorf("%s without gzip: Content-Encoding %q, Vary %q", target, plain.Header.Get("Content-Encoding"), plain.Header.Get("Vary"))
		}
		if again := bodyOf(t, do(target, fileTestRoot)); again != raw {
			t.Errorf("%s answered differently the second time", target)
		}
		gz := do(target, fileTestRoot, "Accept-Encoding", "gzip")
		compressed := bodyOf(t, gz)
		if len(raw) < 1400 { // too small to be worth compressing
			if gz.Header.Get("Content-Encoding") != "" || compressed != raw {
				t.Errorf("%s (%d bytes) with gzip: Content-Encoding %q", target, len(raw), gz.Header.Get("Content-Encoding"))
			}
			continue
		}
		if gz.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("%s (%d bytes) with gzip: Content-Encoding %q", target, len(raw), gz.Header.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(strings.NewReader(compressed))
		if err != nil {
			t.Fatal(err)
		}
		if unzipped, err := io.ReadAll(zr); err != nil || string(unzipped) != raw {
			t.Errorf("%s: the gzip answer does not unpack to the identity one (%v)", target, err)
		}
		if plain.Header.Get(NextCursorHeader) != gz.Header.Get(NextCursorHeader) {
			t.Errorf("%s: next cursor %q without gzip, %q with", target, plain.Header.Get(NextCursorHeader), gz.Header.Get(NextCursorHeader))
		}
	}
}

// TestListingPageBudget asks one kept listing for many different pages: the pages it keeps
// never hold more than its budget, a page asked again is the kept one, and every answer is
// still the right page.
func TestListingPageBudget(t *testing.T) {
	shape := listShape{wrap: arrayShape.wrap, after: func(c string) (string, bool) { return c, true }, cursor: func(o string) string { return o }}
	var records []listRecord
	for i := range 300 {
		name := fmt.Sprintf("r%03d", i)
		records = append(records, listRecord{order: name, value: map[string]string{"name": name, "pad": strings.Repeat("x", 100)}})
	}
	var c bodyCache
	builds := 0
	build := func() ([]listRecord, error) { builds++; return records, nil }
	root := keystore.Principal{IsRoot: true}
	get := func(target string) []string {
		t.Helper()
		rec := httptest.NewRecorder()
		if err := c.serve(rec, httptest.NewRequest("GET", target, nil), root, cacheGen{list: 7}, true, shape, build); err != nil {
			t.Fatal(err)
		}
		var page []struct{ Name string }
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range page {
			names = append(names, r.Name)
		}
		return names
	}
	get("/?limit=10")
	l := c.lists["*"]
	first := l.pages[pageQuery{limit: 10}]
	if get("/?limit=10"); l.pages[pageQuery{limit: 10}] != first || first == nil {
		t.Fatal("a page asked twice was built twice")
	}
	for limit := 1; limit <= 300; limit += 7 {
		for start := 0; start < 300; start += 37 {
			after := fmt.Sprintf("r%03d", start)
			names := get(fmt.Sprintf("/?limit=%d&cursor=%s", limit, after))
			want := min(limit, 299-start)
			if len(names) != want || want > 0 && names[0] != fmt.Sprintf("r%03d", start+1) {
				t.Fatalf("limit %d after %s: %v", limit, after, names)
			}
			if l.pageBytes > l.budget {
				t.Fatalf("the kept pages hold %d bytes, over the budget of %d", l.pageBytes, l.budget)
			}
		}
	}
	if builds != 1 {
		t.Errorf("the listing was built %d times for one generation", builds)
	}
}

// TestListingConcurrentWalks walks the key listing from several goroutines while keys are
// created: the kept listings and pages are shared between requests and generations, and every
// walk holds each key that existed before it began, once.
func TestListingConcurrentWalks(t *testing.T) {
	do, store := listingTestAPI(t, 30)
	lc := listingCases["keys"]
	before := lc.names(t, []byte(bodyOf(t, do(lc.path, fileTestRoot))))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20 {
			if _, err := store.Create(context.Background(), keystore.NewKey{Name: fmt.Sprintf("during-%02d", i), Role: "viewer"}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				// Not walk, whose failures end the test: only the test's goroutine may.
				var names []string
				for cursor := ""; ; {
					resp := do(fmt.Sprintf("%s?limit=%d&cursor=%s", lc.path, 3+g, cursor), fileTestRoot)
					var page api.KeyList
					if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK {
						t.Errorf("a page after %q: %d (%v)", cursor, resp.StatusCode, err)
						return
					}
					for _, k := range page.Keys {
						names = append(names, k.Name)
					}
					if cursor = page.NextCursor; cursor == "" {
						break
					}
				}
				counts := map[string]int{}
				for _, n := range names {
					counts[n]++
				}
				for _, n := range before {
					if counts[n] != 1 {
						t.Errorf("a walk by %d has %s %d times", 3+g, n, counts[n])
					}
				}
			}
		}()
	}
	wg.Wait()
	<-done
}

// lastUsedField is the lastUsedAt of a key record.
var lastUsedField = regexp.MustCompile(`,"lastUsedAt":\d+`)

// withoutLastUsed is a listing without its keys' lastUsedAt.
func withoutLastUsed(body string) string { return lastUsedField.ReplaceAllString(body, "") }
