package packages

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// describe is a listing as one line per version: name@version and whether it is enabled.
func describe(units []Unit) string {
	var out []string
	for _, u := range units {
		for _, v := range u.Versions {
			out = append(out, u.Name+"@"+v.Version+map[bool]string{true: "", false: " (off)"}[v.Enabled])
		}
	}
	return strings.Join(out, ", ")
}

// TestListingFollowsTheDisk edits the folders by hand, as an operator would, and checks that
// listings see each edit, with and without notifications; with them, unchanged folders are
// answered from memory under one generation.
func TestListingFollowsTheDisk(t *testing.T) {
	for _, notify := range []bool{true, false} {
		t.Run(map[bool]string{true: "notifications", false: "stat fallback"}[notify], func(t *testing.T) {
			c, base := newCatalog(t, WorkerLayout)
			defer c.Close()
			if !notify {
				c.watchOnce.Do(func() {}) // as where the platform has no notifications
			}
			uploads := filepath.Join(base, "uploads")
			write := func(rel, body string) {
				t.Helper()
				p := filepath.Join(uploads, filepath.FromSlash(rel))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			expect := func(what, want string) {
				t.Helper()
				testkit.Eventually(t, what, 5*time.Second, func() bool {
					units, err := c.List()
					return err == nil && describe(units) == want
				})
			}
			write("app/1.0.0/manifest.yaml", "name: app\nversion: 1.0.0\n")
			expect("the first listing", "app@1.0.0")

			units, gen, cached, err := c.Listing()
			if err != nil || cached != notify {
				t.Fatalf("cached = %v, %v; want %v", cached, err, notify)
			}
			if notify {
				_, again, cached, _ := c.Listing()
				if !cached || again != gen {
					t.Fatalf("an unchanged listing: generation %d then %d, cached %v", gen, again, cached)
				}
			}
			_ = units

			write("app/2.0.0/manifest.yaml", "name: app\nversion: 2.0.0\n")
			expect("a new version", "app@1.0.0, app@2.0.0")
			write("app/2.0.0/manifest.yaml", "name: app\nversion: 2.0.0\nenabled: false\n")
			expect("an edited manifest", "app@1.0.0, app@2.0.0 (off)")
			// A scope folder with nothing in it yet, then a unit in it.
			if err := os.MkdirAll(filepath.Join(uploads, "@team", "web", "1.0.0"), 0o755); err != nil {
				t.Fatal(err)
			}
			expect("an empty unit folder", "app@1.0.0, app@2.0.0 (off)")
			write("@team/web/1.0.0/manifest.yaml", "name: '@team/web'\nversion: 1.0.0\n")
			expect("a manifest in a new scoped folder", "@team/web@1.0.0, app@1.0.0, app@2.0.0 (off)")
			if err := os.RemoveAll(filepath.Join(uploads, "app")); err != nil {
				t.Fatal(err)
			}
			expect("a removed unit", "@team/web@1.0.0")
			// A catalog folder that did not exist at the first listing.
			write("../more/late/1.0.0/manifest.yaml", "name: late\nversion: 1.0.0\n")
			expect("a unit in another folder", "@team/web@1.0.0, late@1.0.0")
		})
	}
}

// TestListingOfMissingFolder checks that a catalog folder created after the first listing is
// noticed through its parent.
func TestListingOfMissingFolder(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "data", "apps")
	c := NewCatalog(WorkerLayout, []string{dir}, DefaultLimits)
	defer c.Close()
	if units, err := c.List(); err != nil || len(units) != 0 {
		t.Fatalf("list = %v, %v", units, err)
	}
	if _, _, cached, _ := c.Listing(); !cached {
		t.Fatal("the listing of a missing folder is not kept")
	}
	p := filepath.Join(dir, "app", "1.0.0", "manifest.yaml")
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte("name: app\nversion: 1.0.0\n"), 0o644)
	testkit.Eventually(t, "the new folder's unit", 5*time.Second, func() bool {
		units, err := c.List()
		return err == nil && slices.ContainsFunc(units, func(u Unit) bool { return u.Name == "app" })
	})
}

// TestLookupBeforeTheWatcher: a unit written by hand is found by Lookup (the management API's
// way to a unit) at once, while the kept listing is still the one from before it, as in the
// moment before the watcher reports the write.
func TestLookupBeforeTheWatcher(t *testing.T) {
	c, base := newCatalog(t, WorkerLayout)
	defer c.Close()
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(base, "uploads", filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("@team/web/1.0.0/manifest.yaml", "name: '@team/web'\nversion: 1.0.0\n")
	var before []Unit
	testkit.Eventually(t, "a kept listing of @team/web", 5*time.Second, func() bool {
		units, _, cached, err := c.Listing()
		before = units
		return err == nil && cached && describe(units) == "@team/web@1.0.0"
	})
	write("@team/off/1.0.0/manifest.yaml", "name: '@team/off'\nversion: 1.0.0\n")
	// The watcher has reported the write by now, or will: put the listing from before it back
	// under the current generation, as it is until the report comes.
	time.Sleep(100 * time.Millisecond)
	c.listed.Store(&unitListing{gen: c.listGen.Load(), units: before})
	if units, _, cached, _ := c.Listing(); !cached || describe(units) != "@team/web@1.0.0" {
		t.Fatalf("the kept listing is %q (cached %v), want the one from before the write", describe(units), cached)
	}
	u, err := c.Lookup("@team/off")
	if err != nil || len(u.Versions) != 1 || u.Versions[0].Version != "1.0.0" {
		t.Fatalf("Lookup of a unit written a moment ago = %+v, %v", u, err)
	}
	if _, err := c.Lookup("@team/none"); err == nil {
		t.Error("Lookup of a unit on no disk found one")
	}
}
