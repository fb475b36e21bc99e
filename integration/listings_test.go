package integration

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// pagedListing is one of the listings that answer pages.
type pagedListing struct {
	path string
	// records returns the records of an answer, each re-encoded, with its name.
	records func(t *testing.T, resp *harness.Response) (names []string, raw []json.RawMessage)
	// next returns the cursor of the page after resp.
	next func(t *testing.T, resp *harness.Response) string
}

var pagedListings = map[string]pagedListing{
	"workers": {
		path: "/workers",
		records: func(t *testing.T, resp *harness.Response) ([]string, []json.RawMessage) {
			var raw []json.RawMessage
			if err := resp.JSON(&raw); err != nil {
				t.Fatalf("workers page: %v: %s", err, resp)
			}
			return recordNames(t, raw), raw
		},
		next: func(t *testing.T, resp *harness.Response) string { return resp.Header.Get("X-Next-Cursor") },
	},
	"keys": {
		path: "/keys",
		records: func(t *testing.T, resp *harness.Response) ([]string, []json.RawMessage) {
			var body struct{ Keys []json.RawMessage }
			if err := resp.JSON(&body); err != nil {
				t.Fatalf("keys page: %v: %s", err, resp)
			}
			return recordNames(t, body.Keys), body.Keys
		},
		next: func(t *testing.T, resp *harness.Response) string {
			var body struct{ NextCursor string }
			if err := resp.JSON(&body); err != nil {
				t.Fatal(err)
			}
			if h := resp.Header.Get("X-Next-Cursor"); h != body.NextCursor {
				t.Errorf("X-Next-Cursor %q, nextCursor %q", h, body.NextCursor)
			}
			return body.NextCursor
		},
	},
}

func recordNames(t *testing.T, raw []json.RawMessage) []string {
	t.Helper()
	names := make([]string, len(raw))
	for i, r := range raw {
		var rec struct{ Name string }
		if err := json.Unmarshal(r, &rec); err != nil {
			t.Fatal(err)
		}
		names[i] = rec.Name
	}
	return names
}

// walkPages reads a listing page by page with limit; between calls it runs between(page
// number) (nil: nothing). It returns every record's name and encoding, in page order.
func walkPages(t *testing.T, s *harness.Server, l pagedListing, key string, limit int, between func(int)) ([]string, []json.RawMessage) {
	t.Helper()
	var names []string
	var records []json.RawMessage
	cursor := ""
	for page := 0; page < 200; page++ {
		target := fmt.Sprintf("%s%s?limit=%d", s.API, l.path, limit)
		if cursor != "" {
			target += "&cursor=" + url.QueryEscape(cursor)
		}
		resp := s.Get(target, harness.WithKey(key))
		if resp.Status != http.StatusOK {
			t.Fatalf("GET %s = %s", target, resp)
		}
		n, r := l.records(t, resp)
		cursor = l.next(t, resp)
		if len(n) > limit || cursor != "" && len(n) != limit {
			t.Fatalf("GET %s: %d records, next %q", target, len(n), cursor)
		}
		names, records = append(names, n...), append(records, r...)
		if cursor == "" {
			return names, records
		}
		if between != nil {
			between(page)
		}
	}
	t.Fatal("no last page after 200")
	return nil, nil
}

// TestListingPagination walks the worker and key listings of the real binary page by page:
// the pages hold the whole listing (compared record by record with the unpaginated answer),
// a namespace-restricted key pages through its own records only, records present throughout
// a walk that others are added and removed around are each on exactly one page, and a
// malformed limit or cursor is a 400 in the envelope.
func TestListingPagination(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	files := map[string]string{}
	for i := range 23 {
		name := fmt.Sprintf("app-%02d", i)
		if i%4 == 0 {
			name = fmt.Sprintf("@team/app-%02d", i)
		}
		files["apps/"+name+"/1.0.0/manifest.yaml"] = fmt.Sprintf("name: '%s'\nversion: 1.0.0\n", name)
	}
	writeFiles(t, s.DataDir, files)
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "admin", "namespaces": []string{"@team"}})
	for i := range 20 {
		body := map[string]any{"name": fmt.Sprintf("key-%02d", i), "role": "viewer"}
		if i%3 == 0 {
			body["namespaces"] = []string{"@team"}
		}
		s.CreateKey(rootKey, body)
	}

	for name, l := range pagedListings {
		for _, caller := range []struct{ name, key string }{{"root", rootKey}, {"@team", team.Secret}} {
			t.Run(name+" as "+caller.name, func(t *testing.T) {
				resp := s.Get(s.API+l.path, harness.WithKey(caller.key))
				if resp.Status != http.StatusOK || resp.Header.Get("X-Next-Cursor") != "" {
					t.Fatalf("GET %s = %s, X-Next-Cursor %q", l.path, resp, resp.Header.Get("X-Next-Cursor"))
				}
				wholeNames, wholeRecords := l.records(t, resp)
				byName := map[string]string{}
				for i, n := range wholeNames {
					byName[n] = string(wholeRecords[i])
				}
				want := slices.Clone(wholeNames)
				if name == "workers" {
					slices.Sort(want)
				}
				if caller.name == "@team" {
					for _, n := range want {
						if name == "workers" && !strings.HasPrefix(n, "@team/") || name == "keys" && n != "team" && !slices.Contains([]string{"key-00", "key-03", "key-06", "key-09", "key-12", "key-15", "key-18"}, n) {
							t.Errorf("the @team key lists %q", n)
						}
					}
				}
				for _, limit := range []int{1, 4, len(want), 500} {
					names, records := walkPages(t, s, l, caller.key, limit, nil)
					if !slices.Equal(names, want) {
						t.Fatalf("pages of %d: %v, want %v", limit, names, want)
					}
					for i, n := range names {
						if string(records[i]) != byName[n] && caller.name == "root" { // the @team key's lastUsedAt moves as it walks
							t.Errorf("pages of %d: %s is %s, whole listing %s", limit, n, records[i], byName[n])
						}
					}
				}
			})
		}
	}

	t.Run("workers come and go between pages", func(t *testing.T) {
		before := workers(t, s, rootKey)
		upload := func(name string) {
			uploadOK(t, s, "workers", "a.tgz", harness.TarGz(t, pkg(fmt.Sprintf("name: '%s'\nversion: 1.0.0\n", name))...), rootKey)
		}
		remove := func(name string) {
			if resp := s.Do("DELETE", s.API+"/workers/_/"+name, harness.WithKey(rootKey), harness.WithOrigin("")); resp.Status != http.StatusOK {
				t.Fatalf("DELETE %s = %s", name, resp)
			}
		}
		sorted := slices.Sorted(maps.Keys(before))
		// After two pages of 5 the cursor names sorted[9]: app-01 is behind it, app-22 ahead.
		const seen, unseen = "app-01", "app-22"
		if i := slices.Index(sorted, seen); i < 0 || i >= 10 || slices.Index(sorted, unseen) < 10 || sorted[9] < "app-00a" {
			t.Fatalf("the walk would not pass as planned: %v", sorted)
		}
		names, _ := walkPages(t, s, pagedListings["workers"], rootKey, 5, func(page int) {
			if page != 1 {
				return
			}
			upload("app-00a") // before the cursor
			upload("app-99")  // after it
			remove(seen)
			remove(unseen)
		})
		counts := map[string]int{}
		for _, n := range names {
			counts[n]++
		}
		for n := range before {
			want := 1
			if n == unseen {
				want = 0
			}
			if counts[n] != want {
				t.Errorf("%s on %d pages, want %d (walk %v)", n, counts[n], want, names)
			}
		}
		if counts["app-99"] != 1 || counts["app-00a"] != 0 {
			t.Errorf("added after the cursor on %d pages (want 1), before it on %d (want 0): %v", counts["app-99"], counts["app-00a"], names)
		}
	})

	t.Run("keys come and go between pages", func(t *testing.T) {
		var list struct {
			Keys []struct {
				ID   int64
				Name string
			}
		}
		if resp := s.Get(s.API+"/keys", harness.WithKey(rootKey)); resp.JSON(&list) != nil {
			t.Fatalf("GET keys = %s", resp)
		}
		ids := map[string]int64{}
		for _, k := range list.Keys {
			ids[k.Name] = k.ID
		}
		// After the first page of 4 the cursor names the fourth key.
		atCursor, seen, unseen := list.Keys[3].Name, list.Keys[0].Name, list.Keys[10].Name
		revoke := func(name string) {
			if resp := s.Do("DELETE", fmt.Sprintf("%s/keys/%d", s.API, ids[name]), harness.WithKey(rootKey), harness.WithOrigin("")); resp.Status != http.StatusOK {
				t.Fatalf("revoking %s = %s", name, resp)
			}
		}
		names, _ := walkPages(t, s, pagedListings["keys"], rootKey, 4, func(page int) {
			if page != 0 {
				return
			}
			revoke(atCursor)
			revoke(seen)
			revoke(unseen)
			s.CreateKey(rootKey, map[string]any{"name": "late", "role": "viewer"})
		})
		counts := map[string]int{}
		for _, n := range names {
			counts[n]++
		}
		for n := range ids {
			want := 1
			if n == unseen {
				want = 0
			}
			if counts[n] != want {
				t.Errorf("%s on %d pages, want %d (walk %v)", n, counts[n], want, names)
			}
		}
		if counts["late"] != 1 {
			t.Errorf("the key created during the walk is on %d pages, want 1 (walk %v)", counts["late"], names)
		}
	})

	for _, target := range []string{"/workers?limit=0", "/workers?limit=501", "/workers?limit=x", "/workers?cursor=%25%25",
		"/keys?limit=-2", "/keys?cursor=zz", "/keys?cursor=0&limit=3"} {
		resp := s.Get(s.API+target, harness.WithKey(rootKey))
		if resp.Status != http.StatusBadRequest || resp.ErrorCode() != "BAD_REQUEST" {
			t.Errorf("GET %s = %s, want 400 BAD_REQUEST", target, resp)
		}
	}
}

// TestListingIdentityAnswers checks that a client that does not ask for gzip gets the listings,
// whole and paged, as the very bytes the gzip answer unpacks to, and the same next cursor.
func TestListingIdentityAnswers(t *testing.T) {
	t.Parallel()
	s := startWithRoot(t)
	files := map[string]string{}
	for i := range 40 {
		name := fmt.Sprintf("worker-%02d", i)
		files["apps/"+name+"/1.0.0/manifest.yaml"] = fmt.Sprintf("name: %s\nversion: 1.0.0\n", name)
	}
	writeFiles(t, s.DataDir, files)
	for i := range 30 {
		s.CreateKey(rootKey, map[string]any{"name": fmt.Sprintf("key-%02d", i), "role": "viewer"})
	}
	// A client of its own: Go's default transport asks for gzip by itself and unpacks it.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	get := func(target string, gz bool) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest("GET", s.URL+s.API+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-API-Key", rootKey)
		if gz {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %s (%v)", target, resp.StatusCode, body, err)
		}
		return resp, body
	}
	for _, target := range []string{"/workers", "/keys", "/workers?limit=20", "/keys?limit=20"} {
		// Twice each: the first answer is built and kept, the second comes from what was kept.
		for range 2 {
			plain, raw := get(target, false)
			if ce := plain.Header.Get("Content-Encoding"); ce != "" || !json.Valid(raw) || plain.ContentLength != int64(len(raw)) {
				t.Fatalf("GET %s without gzip: Content-Encoding %q, Content-Length %d for %d bytes", target, ce, plain.ContentLength, len(raw))
			}
			zipped, compressed := get(target, true)
			if zipped.Header.Get("Content-Encoding") != "gzip" || len(compressed) >= len(raw) {
				t.Fatalf("GET %s with gzip: Content-Encoding %q, %d bytes for %d", target, zipped.Header.Get("Content-Encoding"), len(compressed), len(raw))
			}
			zr, err := gzip.NewReader(strings.NewReader(string(compressed)))
			if err != nil {
				t.Fatal(err)
			}
			if unzipped, err := io.ReadAll(zr); err != nil || string(unzipped) != string(raw) {
				t.Errorf("GET %s: the gzip answer does not unpack to the identity one (%v)", target, err)
			}
			if a, b := plain.Header.Get("X-Next-Cursor"), zipped.Header.Get("X-Next-Cursor"); a != b || strings.Contains(target, "limit") != (a != "") {
				t.Errorf("GET %s: next cursor %q without gzip, %q with", target, a, b)
			}
		}
	}
}
