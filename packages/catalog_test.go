package packages

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

func allow(Metadata) error { return nil }

// newCatalog returns a catalog over a built-in folder and two writable ones, all existing.
func newCatalog(t *testing.T, layout Layout) (*Catalog, string) {
	t.Helper()
	base := t.TempDir()
	dirs := []string{filepath.Join(base, ".builtin"), filepath.Join(base, "uploads"), filepath.Join(base, "more")}
	for _, d := range dirs {
		os.MkdirAll(d, 0o755)
	}
	c := NewCatalog(layout, dirs, DefaultLimits)
	c.SetRetireDelay(0) // delete at once, so tests can look for leftovers
	return c, base
}

func manifestTgz(t *testing.T, manifest string, extra ...testkit.File) []byte {
	return testkit.TarGz(t, append([]testkit.File{{Name: "manifest.yaml", Body: manifest}}, extra...)...)
}

func install(t *testing.T, c *Catalog, name string, data []byte) (Installed, error) {
	t.Helper()
	return c.Install(name, bytes.NewReader(data), allow)
}

func TestInstallAndList(t *testing.T) {
	c, base := newCatalog(t, WorkerLayout)
	var changes []Change
	c.OnChange(func(ch Change) { changes = append(changes, ch) })

	got, err := install(t, c, "app.tgz", manifestTgz(t, "name: app\nversion: 1.0.0\n", testkit.File{Name: "index.html", Body: "<p>1"}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "app" || got.Version != "1.0.0" || got.Path != filepath.Join(base, "uploads", "app", "1.0.0") || got.Files != 2 || len(got.SHA256) != 64 {
		t.Fatalf("installed = %+v", got)
	}
	// npm pack layout: everything under package/ is unwrapped.
	if _, err := install(t, c, "app.zip", testkit.Zip(t, testkit.File{Name: "package/package.json", Body: `{"name":"app","version":"1.10.0"}`}, testkit.File{Name: "package/x.js", Body: "x"})); err != nil {
		t.Fatal(err)
	}
	// No version: latest. Scoped name.
	if _, err := install(t, c, "t.tar.gz", manifestTgz(t, "name: '@team/tool'\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := install(t, c, "app.tgz", manifestTgz(t, "name: app\nversion: 1.2.0\nenabled: false\n")); err != nil {
		t.Fatal(err)
	}
	// Files at the root are kept next to a package/ folder.
	if _, err := install(t, c, "mixed.tgz", manifestTgz(t, "name: mixed\n", testkit.File{Name: "package/inner.txt", Body: "i"})); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(base, "uploads", "mixed", "latest", "package", "inner.txt")); err != nil || string(b) != "i" {
		t.Fatalf("package/ next to root files was unwrapped: %v", err)
	}

	units, err := c.List()
	if err != nil {
		t.Fatal(err)
	}
	summary := map[string]string{}
	for _, u := range units {
		var vs []string
		for _, v := range u.Versions {
			vs = append(vs, fmt.Sprintf("%s:%v", v.Version, v.Enabled))
		}
		summary[u.Name] = u.Source() + " " + strings.Join(vs, ",")
	}
	want := map[string]string{
		"app":        "uploaded 1.0.0:true,1.2.0:false,1.10.0:true",
		"@team/tool": "uploaded latest:true",
		"mixed":      "uploaded latest:true",
	}
	if !reflect.DeepEqual(summary, want) {
		t.Fatalf("units = %v, want %v", summary, want)
	}
	if len(changes) != 5 || changes[0] != (Change{Op: "installed", Name: "app", Version: "1.0.0"}) {
		t.Fatalf("changes = %+v", changes)
	}
	if entries, _ := os.ReadDir(filepath.Join(base, "uploads")); len(entries) != 3 {
		t.Fatalf("uploads holds %v; temporary folders were left", entries)
	}
}

func TestInstallRefusals(t *testing.T) {
	c, base := newCatalog(t, WorkerLayout)
	// Only a replaced tree waits for the retire delay: a refused upload's folder goes at once.
	c.SetRetireDelay(time.Hour)
	t.Cleanup(c.Close)
	tests := []struct {
		name, file string
		data       []byte
		code       string
	}{
		{"wrong extension", "app.rar", manifestTgz(t, "name: app\n"), CodeInvalidFileType},
		{"no metadata", "a.tgz", testkit.TarGz(t, testkit.File{Name: "index.html", Body: "x"}), CodeMissingName},
		{"no name", "a.tgz", manifestTgz(t, "version: 1.0.0\n"), CodeMissingName},
		{"bad name", "a.tgz", manifestTgz(t, "name: ../../etc\n"), CodeInvalidName},
		{"crafted version", "a.tgz", manifestTgz(t, "name: app\nversion: ../other/1.0.0\n"), CodeInvalidVersion},
		{"version with slash", "a.tgz", manifestTgz(t, "name: app\nversion: 1.0.0/x\n"), CodeInvalidVersion},
		{"scope traversal", "a.tgz", manifestTgz(t, "name: '@../app'\n"), CodeInvalidName},
		{"corrupt", "a.zip", []byte("PK\x03\x04garbage"), CodeInvalidArchive},
		{"empty", "a.zip", nil, CodeInvalidArchive},
		{"traversal", "a.tgz", testkit.TarGz(t, testkit.File{Name: "manifest.yaml", Body: "name: app\n"}, testkit.File{Name: "../../x", Body: "x"}), CodePathTraversal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := install(t, c, tt.file, tt.data)
			if !IsCode(err, tt.code) {
				t.Fatalf("Install = %v, want %s", err, tt.code)
			}
		})
	}
	if units, _ := c.List(); len(units) != 0 {
		t.Fatalf("refused installs left units: %+v", units)
	}
	for _, d := range []string{"uploads", "more", ".builtin"} {
		if entries, _ := os.ReadDir(filepath.Join(base, d)); len(entries) != 0 {
			t.Errorf("%s holds %v after refused installs", d, entries)
		}
	}
	if entries, _ := os.ReadDir(base); len(entries) != 3 {
		t.Errorf("the base folder holds %v", entries)
	}
	// Authorization runs before anything is installed.
	denied := errors.New("denied")
	if _, err := c.Install("a.tgz", bytes.NewReader(manifestTgz(t, "name: '@other/app'\n")), func(md Metadata) error {
		if md.Name != "@other/app" {
			t.Errorf("authorize saw %q", md.Name)
		}
		return denied
	}); !errors.Is(err, denied) {
		t.Fatalf("Install with a refusing authorize = %v", err)
	}
	if units, _ := c.List(); len(units) != 0 {
		t.Fatal("an unauthorized install went through")
	}
	if entries, _ := os.ReadDir(filepath.Join(base, "uploads")); len(entries) != 0 {
		t.Errorf("uploads holds %v after an unauthorized install", entries)
	}
}

// tree reads every file and folder under dir, with contents and modes.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		body := ""
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			body = string(b)
		}
		out[strings.TrimPrefix(p, dir)] = fmt.Sprintf("%v %q", info.Mode(), body)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStage(t *testing.T) {
	c, base := newCatalog(t, WorkerLayout)
	c.SetRetireDelay(time.Hour)
	t.Cleanup(c.Close)
	uploads := filepath.Join(base, "uploads")
	v1 := manifestTgz(t, "name: app\nversion: 1.0.0\n", testkit.File{Name: "index.html", Body: "<p>1"})
	if _, err := install(t, c, "app.tgz", v1); err != nil {
		t.Fatal(err)
	}
	before := tree(t, base)

	// A dry run: every check, then nothing written.
	for _, tt := range []struct {
		version  string
		replaces bool
	}{{"1.0.0", true}, {"2.0.0", false}} {
		data := manifestTgz(t, "name: app\nversion: "+tt.version+"\n", testkit.File{Name: "index.html", Body: "<p>2"}, testkit.File{Name: "a/b.js", Body: "b"})
		s, err := c.StageWith("app.tgz", bytes.NewReader(data), allow, StageOptions{KeepArchive: true})
		if err != nil {
			t.Fatal(err)
		}
		if s.Name != "app" || s.Version != tt.version || s.Replaces != tt.replaces || s.Files != 3 ||
			s.Path != filepath.Join(uploads, "app", tt.version) || len(s.SHA256) != 64 {
			t.Fatalf("staged %+v", s)
		}
		if b, err := os.ReadFile(filepath.Join(s.Tree, "index.html")); err != nil || string(b) != "<p>2" {
			t.Fatalf("the staged tree: %q, %v", b, err)
		}
		f, err := s.Archive()
		if err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(f); err != nil || !bytes.Equal(b, data) {
			t.Fatalf("the staged archive is not the upload (%d bytes of %d): %v", len(b), len(data), err)
		}
		f.Close()
		s.Discard()
		s.Discard()
		if _, err := s.Archive(); err == nil {
			t.Fatal("a discarded upload's archive opened")
		}
		if after := tree(t, base); !reflect.DeepEqual(before, after) {
			t.Fatalf("a dry run changed the folders:\nbefore %v\nafter  %v", before, after)
		}
	}

	// Without KeepArchive, a .tgz is unpacked as it arrives: the temporary folder holds the
	// tree alone, no copy of the archive, and the digest is still the upload's.
	data := manifestTgz(t, "name: app\nversion: 3.0.0\n", testkit.File{Name: "a/b.js", Body: "b"})
	s, err := c.Stage("app.tgz", bytes.NewReader(data), allow)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(data); s.SHA256 != hex.EncodeToString(sum[:]) || s.Files != 2 {
		t.Fatalf("staged %+v", s)
	}
	if _, err := s.Archive(); err == nil {
		t.Fatal("an archive not kept opened")
	}
	work, _ := filepath.Rel(uploads, s.Tree)
	work, _, _ = strings.Cut(filepath.ToSlash(work), "/")
	if entries, err := os.ReadDir(filepath.Join(uploads, work)); err != nil || len(entries) != 1 || entries[0].Name() != "tree" {
		t.Fatalf("the temporary folder holds %v (%v); want the tree alone", entries, err)
	}
	s.Discard()

	// A refused stage leaves nothing either.
	if _, err := c.Stage("app.tgz", bytes.NewReader(v1), func(Metadata) error { return errors.New("no") }); err == nil {
		t.Fatal("a refused stage succeeded")
	}
	if after := tree(t, base); !reflect.DeepEqual(before, after) {
		t.Fatalf("a refused stage changed the folders: %v", after)
	}

	// A replace keeps the old tree for the retire delay, and nothing else.
	s, err = c.Stage("app.tgz", bytes.NewReader(manifestTgz(t, "name: app\nversion: 1.0.0\n")), allow)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(); err == nil {
		t.Fatal("a second commit succeeded")
	}
	s.Discard()
	entries, _ := os.ReadDir(uploads)
	if len(entries) != 2 || !strings.HasPrefix(entries[0].Name(), tempPrefix) {
		t.Fatalf("after a replace, uploads holds %v; want the retired tree and app", entries)
	}
	c.Close()
	if entries, _ := os.ReadDir(uploads); len(entries) != 1 {
		t.Fatalf("after Close, uploads holds %v", entries)
	}
}

func TestInstallLimits(t *testing.T) {
	c, _ := newCatalog(t, WorkerLayout)
	c.limits = Limits{Upload: 1000, Unpacked: 1 << 20, Entries: 100}
	big := manifestTgz(t, "name: app\n", testkit.File{Name: "noise", Body: randomText(4000)})
	if _, err := install(t, c, "a.tgz", big); !IsCode(err, CodeTooLarge) || !strings.Contains(err.Error(), UploadSetting) {
		t.Fatalf("over the upload limit: %v", err)
	}
}

func randomText(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%x", i*2654435761)
	}
	return b.String()
}

func TestNoWritableDir(t *testing.T) {
	base := t.TempDir()
	os.MkdirAll(filepath.Join(base, ".builtin"), 0o755)
	c := NewCatalog(WorkerLayout, []string{filepath.Join(base, ".builtin"), filepath.Join(base, "missing")}, DefaultLimits)
	if _, err := install(t, c, "a.tgz", manifestTgz(t, "name: app\n")); !IsCode(err, "NO_WORKER_DIRS") {
		t.Fatalf("Install = %v", err)
	}
	p := NewCatalog(PluginLayout, nil, DefaultLimits)
	if _, err := install(t, p, "a.tgz", manifestTgz(t, "name: app\n")); !IsCode(err, "NO_PLUGIN_DIRS") {
		t.Fatalf("Install = %v", err)
	}
}

// TestReplaceIsAtomic reads the install folder continuously while it is replaced: every read
// sees one complete tree, never a partial or missing one.
func TestReplaceIsAtomic(t *testing.T) {
	c, base := newCatalog(t, WorkerLayout)
	c.SetRetireDelay(time.Second)
	const files = 50
	archive := func(gen int) []byte {
		fs := []testkit.File{{Name: "manifest.yaml", Body: "name: app\nversion: 1.0.0\n"}}
		for i := range files {
			fs = append(fs, testkit.File{Name: fmt.Sprintf("f%02d", i), Body: fmt.Sprint(gen)})
		}
		return testkit.TarGz(t, fs...)
	}
	if _, err := install(t, c, "a.tgz", archive(0)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "uploads", "app", "1.0.0")
	stop := make(chan struct{})
	var bad []string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Hold the folder open, as a server would, and read it whole.
			d, err := os.Open(dir)
			if err != nil {
				bad = append(bad, "missing: "+err.Error())
				continue
			}
			names, _ := d.Readdirnames(-1)
			d.Close()
			if len(names) != files+1 {
				bad = append(bad, fmt.Sprintf("%d entries", len(names)))
			}
		}
	}()
	for gen := 1; gen <= 30; gen++ {
		if _, err := install(t, c, "a.tgz", archive(gen)); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("readers saw %d incomplete trees, e.g. %s", len(bad), bad[0])
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f07")); string(b) != "30" {
		t.Fatalf("final content %q", b)
	}
	c.Close()
	if entries, _ := os.ReadDir(filepath.Join(base, "uploads")); len(entries) != 1 {
		t.Fatalf("retired trees left after Close: %v", entries)
	}
}

func TestConcurrentInstallsOfOneUnit(t *testing.T) {
	c, base := newCatalog(t, WorkerLayout)
	const n = 20
	archives := make([][]byte, n)
	for i := range n {
		fs := []testkit.File{{Name: "manifest.yaml", Body: "name: app\nversion: 2.0.0\n"}}
		for j := 0; j <= i; j++ { // each archive has a different set of files
			fs = append(fs, testkit.File{Name: fmt.Sprintf("d%d/f%d", j%3, j), Body: fmt.Sprintf("%d-%d", i, j)})
		}
		archives[i] = testkit.TarGz(t, fs...)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := install(t, c, "a.tgz", archives[i]); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	final := testkit.Tree(t, filepath.Join(base, "uploads", "app", "2.0.0"))
	matched := -1
	for i, a := range archives {
		dest, _, err := extractInto(t, a, TarGz, DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		if reflect.DeepEqual(testkit.Tree(t, dest), final) {
			matched = i
		}
	}
	if matched < 0 {
		t.Fatalf("the final tree matches none of the uploaded archives: %v", final)
	}
	if entries, _ := os.ReadDir(filepath.Join(base, "uploads")); len(entries) != 1 {
		t.Fatalf("leftovers: %v", entries)
	}
}

func TestDiscovery(t *testing.T) {
	c, base := newCatalog(t, WorkerLayout)
	writeTree(t, base, map[string]string{
		".builtin/core/1.0.0/manifest.yaml":         "name: core\nversion: 1.0.0\n",
		".builtin/@sys/mon/2.0.0/package.json":      `{"name":"@sys/mon","version":"2.0.0"}`,
		"uploads/core/9.0.0/manifest.yaml":          "name: core\n", // shadowed by the built-in core
		"uploads/app/1.0.0/manifest.yaml":           "name: app\n",
		"uploads/app/notes/manifest.yaml":           "name: app\n",      // not a version folder
		"uploads/app/2.0.0/manifest.yaml":           "name: other\n",    // another package's name
		"uploads/app/3.0.0/index.html":              "<p>",              // no metadata
		"uploads/app/4.0.0/manifest.yaml":           "name: [broken\n",  // invalid manifest
		"uploads/Bad_Name/1.0.0/manifest.yaml":      "name: Bad_Name\n", // invalid name
		"uploads/.hidden/1.0.0/manifest.yaml":       "name: hidden\n",   // hidden
		"uploads/empty/README":                      "no versions",      // no versions
		"more/extra/0.1.0/manifest.yaml":            "name: extra\nenabled: false\n",
		"uploads/" + tempPrefix + "x/manifest.yaml": "name: tmp\n",
	})
	units, err := c.List()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, u := range units {
		var vs []string
		for _, v := range u.Versions {
			vs = append(vs, v.Version)
		}
		got[u.Name] = u.Source() + " " + strings.Join(vs, ",")
	}
	want := map[string]string{"core": "built-in 1.0.0", "@sys/mon": "built-in 2.0.0", "app": "uploaded 1.0.0", "extra": "uploaded 0.1.0"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("discovered %v, want %v", got, want)
	}

	// Hand edits are seen: a manifest rewritten in place, a version added, a unit removed.
	p := filepath.Join(base, "uploads", "app", "1.0.0", "manifest.yaml")
	os.WriteFile(p, []byte("name: app\nenabled: false\n"), 0o644)
	future := time.Now().Add(time.Hour)
	os.Chtimes(p, future, future)
	writeTree(t, base, map[string]string{"uploads/app/1.5.0/package.json": `{"name":"app"}`})
	os.RemoveAll(filepath.Join(base, "more", "extra"))
	u, err := c.Lookup("app")
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Versions) != 2 || u.Versions[0].Enabled || u.Versions[1].Version != "1.5.0" {
		t.Fatalf("after hand edits: %+v", u.Versions)
	}
	if _, err := c.Lookup("extra"); !IsCode(err, "WORKER_NOT_FOUND") {
		t.Fatalf("a removed unit is still found: %v", err)
	}
}

func TestRemoveAndEnable(t *testing.T) {
	c, base := newCatalog(t, WorkerLayout)
	writeTree(t, base, map[string]string{".builtin/core/1.0.0/manifest.yaml": "name: core\n"})
	for _, v := range []string{"1.0.0", "2.0.0"} {
		if _, err := install(t, c, "a.tgz", testkit.TarGz(t, testkit.File{Name: "package.json", Body: `{"name":"@t/app","version":"` + v + `"}`})); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetEnabled("@t/app", "2.0.0", false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(base, "uploads", "@t", "app", "2.0.0", "manifest.yaml")); !strings.Contains(string(b), "enabled: false") {
		t.Fatalf("manifest.yaml was not created: %q", b)
	}
	u, _ := c.Lookup("@t/app")
	if u.Versions[1].Enabled || !u.Versions[0].Enabled {
		t.Fatalf("versions after disable: %+v", u.Versions)
	}
	for _, tt := range []struct {
		err  error
		code string
	}{
		{c.SetEnabled("@t/app", "3.0.0", true), "WORKER_VERSION_NOT_FOUND"},
		{c.SetEnabled("nope", "1.0.0", true), "WORKER_NOT_FOUND"},
		{c.Remove("core"), "BUILT_IN_WORKER_REMOVE_FORBIDDEN"},
		{c.RemoveVersion("core", "1.0.0"), "BUILT_IN_WORKER_VERSION_REMOVE_FORBIDDEN"},
		{c.RemoveVersion("@t/app", "9.9.9"), "WORKER_VERSION_NOT_FOUND"},
		{c.Remove("@t/nope"), "WORKER_NOT_FOUND"},
		{c.Remove("../x"), "WORKER_NOT_FOUND"},
	} {
		if !IsCode(tt.err, tt.code) {
			t.Errorf("got %v, want %s", tt.err, tt.code)
		}
	}
	if err := c.RemoveVersion("@t/app", "1.0.0"); err != nil {
		t.Fatal(err)
	}
	if u, _ := c.Lookup("@t/app"); len(u.Versions) != 1 || u.Versions[0].Version != "2.0.0" {
		t.Fatalf("after removing 1.0.0: %+v", u.Versions)
	}
	if err := c.RemoveVersion("@t/app", "2.0.0"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(base, "uploads", "@t")); !os.IsNotExist(err) {
		t.Fatal("the emptied unit and scope folders were kept")
	}
	install(t, c, "a.tgz", manifestTgz(t, "name: gone\n"))
	if err := c.Remove("gone"); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Join(base, "uploads")); len(entries) != 0 {
		t.Fatalf("after removals uploads holds %v", entries)
	}
}

func TestPluginLayout(t *testing.T) {
	c, base := newCatalog(t, PluginLayout)
	got, err := install(t, c, "p.tgz", manifestTgz(t, "name: '@team/hello'\nversion: 0.3.0\n"))
	if err != nil || got.Path != filepath.Join(base, "uploads", "@team", "hello") || got.Version != "0.3.0" {
		t.Fatalf("plugin install = %+v, %v", got, err)
	}
	// Reinstalling replaces the folder.
	if _, err := install(t, c, "p.tgz", manifestTgz(t, "name: '@team/hello'\nversion: 0.4.0\n")); err != nil {
		t.Fatal(err)
	}
	u, err := c.Lookup("@team/hello")
	if err != nil || len(u.Versions) != 1 || u.Versions[0].Version != "0.4.0" {
		t.Fatalf("plugin = %+v %v", u, err)
	}
	if err := c.SetEnabled("@team/hello", "", false); err != nil {
		t.Fatal(err)
	}
	if u, _ := c.Lookup("@team/hello"); u.Versions[0].Enabled {
		t.Fatal("plugin still enabled")
	}
	install(t, c, "j.tgz", testkit.TarGz(t, testkit.File{Name: "package.json", Body: `{"name":"jsonly"}`}))
	if err := c.SetEnabled("jsonly", "", false); !IsCode(err, "PLUGIN_MANIFEST_NOT_FOUND") {
		t.Fatalf("SetEnabled on a package.json plugin = %v", err)
	}
	writeTree(t, base, map[string]string{".builtin/core/manifest.yaml": "name: core\n"})
	if err := c.Remove("core"); !IsCode(err, "BUILT_IN_PLUGIN_REMOVE_FORBIDDEN") {
		t.Fatalf("Remove built-in = %v", err)
	}
	if _, err := install(t, c, "c.tgz", manifestTgz(t, "name: core\n")); !IsCode(err, "PLUGIN_CONFLICT") {
		t.Fatalf("installing over a built-in = %v", err)
	}
}

func TestCleanTemp(t *testing.T) {
	c, base := newCatalog(t, WorkerLayout)
	writeTree(t, base, map[string]string{
		"uploads/" + tempPrefix + "abc/upload": "x",
		"uploads/keep/1.0.0/manifest.yaml":     "name: keep\n",
		".builtin/" + tempPrefix + "ro/x":      "built-in folders are never touched",
	})
	if err := c.CleanTemp(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(base, "uploads"))
	if len(entries) != 1 || entries[0].Name() != "keep" {
		t.Fatalf("after CleanTemp: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(base, ".builtin", tempPrefix+"ro")); err != nil {
		t.Fatal("CleanTemp touched a built-in folder")
	}
}

// backdate sets the times of the catalog and scope folders a second back.
func backdate(t *testing.T, base string) {
	t.Helper()
	old := time.Now().Add(-time.Second)
	for _, d := range []string{".builtin", "uploads", "more", "more/@t"} {
		if err := os.Chtimes(filepath.Join(base, d), old, old); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// TestFindSameTick: a unit written right after a scan can carry the folder time the scan saw
// (file times move in coarse ticks); it is found at once all the same.
func TestFindSameTick(t *testing.T) {
	c, base := newCatalog(t, WorkerLayout)
	// The folder changed just before the scan, whatever time passes until the scan on a
	// loaded machine: its time is not yet settled when the scan reads it.
	fresh := time.Now().Add(10 * time.Second)
	if err := os.Chtimes(filepath.Join(base, "uploads"), fresh, fresh); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Find("late"); ok {
		t.Fatal("found a unit before it was written")
	}
	uploads := filepath.Join(base, "uploads")
	seen := c.snap.Load().mtimes[uploads]
	writeTree(t, base, map[string]string{"uploads/late/1.0.0/manifest.yaml": "name: late\n"})
	if err := os.Chtimes(uploads, seen, seen); err != nil { // the same tick as the scan
		t.Fatal(err)
	}
	if _, ok := c.Find("late"); !ok {
		t.Fatal("a unit written in the scan's timestamp tick is not found")
	}
}

func TestFind(t *testing.T) {
	c, base := newCatalog(t, WorkerLayout)
	writeTree(t, base, map[string]string{"uploads/app/1.0.0/manifest.yaml": "name: app\nversion: 1.0.0\n"})
	u, ok := c.Find("app")
	if !ok || len(u.Versions) != 1 {
		t.Fatalf("Find(app) = %+v, %v", u, ok)
	}
	serial := u.Versions[0].Metadata.Serial()

	// A unit written by hand is found at once, scoped ones too.
	writeTree(t, base, map[string]string{
		"uploads/fresh/1.0.0/manifest.yaml": "name: fresh\n",
		"more/@t/tool/1.0.0/manifest.yaml":  "name: '@t/tool'\n",
	})
	if _, ok := c.Find("fresh"); !ok {
		t.Fatal("a unit written by hand is not found")
	}
	if _, ok := c.Find("@t/tool"); !ok {
		t.Fatal("a scoped unit written by hand is not found")
	}
	writeTree(t, base, map[string]string{"more/@t/other/1.0.0/manifest.yaml": "name: '@t/other'\n"})
	if _, ok := c.Find("@t/other"); !ok {
		t.Fatal("a unit added to an existing scope is not found")
	}
	// Unknown names cost no rescan while nothing changed (once the folders' times are old
	// enough to tell a later change).
	backdate(t, base)
	c.Find("ghost")
	before := c.snap.Load()
	for range 50 {
		if _, ok := c.Find("ghost"); ok {
			t.Fatal("found a ghost")
		}
	}
	if c.snap.Load() != before {
		t.Fatal("unknown names rebuilt the snapshot")
	}
	// A change the runtime makes shows at once.
	if err := c.SetEnabled("app", "1.0.0", false); err != nil {
		t.Fatal(err)
	}
	if u, _ := c.Find("app"); u.Versions[0].Enabled || u.Versions[0].Metadata.Serial() == serial {
		t.Fatalf("after disable: %+v", u.Versions[0])
	}
	// A hand edit of a known unit shows within SnapshotTTL.
	p := filepath.Join(base, "uploads", "app", "1.0.0", "manifest.yaml")
	os.WriteFile(p, []byte("name: app\nversion: 1.0.0\nenabled: true\n"), 0o644)
	future := time.Now().Add(time.Hour)
	os.Chtimes(p, future, future)
	if u, _ := c.Find("app"); u.Versions[0].Enabled {
		t.Log("the hand edit showed before SnapshotTTL (allowed)")
	}
	testkit.Eventually(t, "the hand edit to show", SnapshotTTL+time.Second, func() bool {
		u, _ := c.Find("app")
		return u.Versions[0].Enabled
	})
}

// TestListWhileInvalidated lists while the cache is dropped over and over, as an upload does
// during another request's listing: no listing may fail or see a torn cache.
func TestListWhileInvalidated(t *testing.T) {
	dir := t.TempDir()
	for i := range 40 {
		name := fmt.Sprintf("w%02d", i)
		if err := os.MkdirAll(filepath.Join(dir, name, "1.0.0"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "1.0.0", ManifestYAML), []byte("name: "+name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var c scanCache
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2000 {
			c.invalidate()
		}
	}()
	for {
		units, _, err := c.list(WorkerLayout, []Dir{{Path: dir}})
		if err != nil || len(units) != 40 {
			t.Fatalf("list = %d units, %v", len(units), err)
		}
		select {
		case <-done:
			return
		default:
		}
	}
}

// TestVersionSize checks a version's size: the bytes of its regular files, links left
// uncounted, so that a link an upload (or a hand edit) points at a large file or folder
// outside cannot make the listing read or count it.
func TestVersionSize(t *testing.T) {
	c, base := newCatalog(t, WorkerLayout)
	manifest := "name: app\nversion: 1.0.0\n"
	writeTree(t, base, map[string]string{
		"uploads/app/1.0.0/manifest.yaml":    manifest,
		"uploads/app/1.0.0/assets/app.js":    "12345",
		filepath.Join("outside", "big.bin"):  strings.Repeat("x", 1<<20),
		filepath.Join("outside", "more.bin"): strings.Repeat("y", 1<<20),
	})
	version := filepath.Join(base, "uploads", "app", "1.0.0")
	for link, target := range map[string]string{"big.bin": "../../../outside/big.bin", "all": "../../../outside"} {
		if err := os.Symlink(target, filepath.Join(version, link)); err != nil {
			t.Fatal(err)
		}
	}
	u, err := c.Lookup("app")
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(manifest) + 5); len(u.Versions) != 1 || u.Versions[0].Size != want {
		t.Fatalf("versions %+v, want one of %d bytes", u.Versions, want)
	}
}

// TestChangeKeepsOtherScans checks that a change the catalog makes to one unit drops that
// unit's cached scan alone: the others keep theirs (their sizes are not walked again), until
// a change names them.
func TestChangeKeepsOtherScans(t *testing.T) {
	c, base := newCatalog(t, WorkerLayout)
	if _, err := install(t, c, "a.tgz", manifestTgz(t, "name: a\nversion: 1.0.0\n", testkit.File{Name: "sub/x.txt", Body: "x"})); err != nil {
		t.Fatal(err)
	}
	// Old enough to be kept: a scan of a folder changed a moment ago is not.
	old := time.Now().Add(-time.Hour)
	version := filepath.Join(base, "uploads", "a", "1.0.0")
	for _, p := range []string{filepath.Join(version, "manifest.yaml"), filepath.Join(version, "sub"), version} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	size := func() int64 {
		t.Helper()
		u, err := c.Lookup("a")
		if err != nil {
			t.Fatal(err)
		}
		return u.Versions[0].Size
	}
	before := size()
	// A file grows below the version folder, which neither its folder's time nor the
	// manifest shows: only a change naming the unit makes the size read again.
	if err := os.WriteFile(filepath.Join(version, "sub", "x.txt"), []byte("xxxxxxxxxx"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(version, "sub"), old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := install(t, c, "b.tgz", manifestTgz(t, "name: b\nversion: 1.0.0\n")); err != nil {
		t.Fatal(err)
	}
	if got := size(); got != before {
		t.Errorf("installing b scanned a again: size %d, was %d", got, before)
	}
	c.Changed(Change{Op: OpFiles, Name: "a", Version: "1.0.0"})
	if got := size(); got != before+9 {
		t.Errorf("after a change to a its size is %d, want %d", got, before+9)
	}
}

// TestInstallKnowsItsSize: a listing after an install takes the new tree's size from its
// unpacking, without walking its files, and keeps the unit's other versions; a later change
// to the version has it walked again.
func TestInstallKnowsItsSize(t *testing.T) {
	c, _ := newCatalog(t, WorkerLayout)
	files := []testkit.File{{Name: "a/b.js", Body: "bb"}, {Name: "c/d/e.txt", Body: "eee"}}
	sizes := func() map[string]int64 {
		t.Helper()
		u, err := c.Lookup("app")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, v := range u.Versions {
			out[v.Version] = v.Size
		}
		return out
	}
	walks := folderWalks.Load()
	var want = map[string]int64{}
	for _, v := range []string{"1.0.0", "2.0.0"} {
		in, err := install(t, c, "app.tgz", manifestTgz(t, "name: app\nversion: "+v+"\n", files...))
		if err != nil {
			t.Fatal(err)
		}
		want[v] = in.Bytes
		if got := sizes(); !reflect.DeepEqual(got, want) {
			t.Fatalf("after installing %s: sizes %v, want %v", v, got, want)
		}
	}
	if n := folderWalks.Load() - walks; n != 0 {
		t.Fatalf("the listings walked %d folders", n)
	}
	if err := c.SetEnabled("app", "1.0.0", false); err != nil {
		t.Fatal(err)
	}
	got := sizes()
	if n := folderWalks.Load() - walks; n != 1 || got["1.0.0"] <= want["1.0.0"] || got["2.0.0"] != want["2.0.0"] {
		t.Fatalf("after disabling 1.0.0: %d walks, sizes %v (were %v)", n, got, want)
	}
}

// verifyingReader reads data and then, instead of the end, fails as a store download that
// does not match its digest does, recording what check says of the disk at that moment.
type verifyingReader struct {
	r     io.Reader
	check func() error
	seen  error
}

func (v *verifyingReader) Read(b []byte) (int, error) {
	n, err := v.r.Read(b)
	if err == io.EOF {
		v.seen = v.check()
		return n, errors.New("the download does not match its digest")
	}
	return n, err
}

// TestSpoolFirst: with SpoolFirst nothing is unpacked before the archive's last byte has been
// read (and vouched for); streamed, the files are on disk by then. Either way the failure at
// the end refuses the install and leaves nothing.
func TestSpoolFirst(t *testing.T) {
	c, base := newCatalog(t, WorkerLayout)
	uploads := filepath.Join(base, "uploads")
	// Streamed, the first file (larger than the writers take whole) is written as it is read,
	// long before the end of the second, which no read-ahead reaches.
	data := manifestTgz(t, "name: app\nversion: 1.0.0\n", testkit.File{Name: "a/big.bin", Body: randomBytes(maxBuffered + 1)},
		testkit.File{Name: "a/rest.bin", Body: randomBytes(256 << 10)})
	unpacked := func() error {
		var files []string
		filepath.WalkDir(uploads, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() && filepath.Base(p) != "upload" {
				files = append(files, p)
			}
			return nil
		})
		if len(files) > 0 {
			return fmt.Errorf("unpacked already: %v", files)
		}
		return nil
	}
	for _, spool := range []bool{true, false} {
		body := &verifyingReader{r: bytes.NewReader(data), check: unpacked}
		_, err := c.StageWith("app.tgz", body, allow, StageOptions{SpoolFirst: spool})
		if err == nil || !strings.Contains(err.Error(), "does not match its digest") {
			t.Fatalf("spool first %v: %v", spool, err)
		}
		if (body.seen == nil) != spool {
			t.Fatalf("spool first %v: at the end of the download, %v", spool, body.seen)
		}
		if entries, _ := os.ReadDir(uploads); len(entries) != 0 {
			t.Fatalf("spool first %v: the refused download left %v", spool, entries)
		}
	}
}

// randomBytes returns n incompressible bytes, as a string.
func randomBytes(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return string(b)
}
