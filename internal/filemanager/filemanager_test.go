package filemanager

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/keystore"
	"github.com/caddy-runtime/runtime/packages"
)

// fixture is a data folder with worker and plugin roots, units in several namespaces and a
// folder outside every root that must never change.
type fixture struct {
	dir              string
	workers, plugins *Surface
	changes          []packages.Change
}

var errDenied = errors.New("denied by the guard")

// all lets every unit through; team only @team units, like a key restricted to @team.
var (
	all  Guard = func(string) error { return nil }
	team Guard = func(unit string) error {
		p := keystore.Principal{Namespaces: []string{"@team"}}
		if p.CanAccess(unit) {
			return nil
		}
		return errDenied
	}
)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir()}
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(f.dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []struct{ dir, name, version string }{
		{"apps/app/1.0.0", "app", "1.0.0"},
		{"apps/app/2.0.0", "app", "2.0.0"},
		{"apps/@team/web/1.0.0", "@team/web", "1.0.0"},
		{"apps/@other/x/1.0.0", "@other/x", "1.0.0"},
		{".apps/core/1.0.0", "core", "1.0.0"},
		{"plugins/hello", "hello", "1.0.0"},
		{"plugins/@team/p", "@team/p", "1.0.0"},
		{"plugins/@other/q", "@other/q", "1.0.0"},
		{".plugins/base", "base", "1.0.0"},
	} {
		write(u.dir+"/manifest.yaml", fmt.Sprintf("name: %s\nversion: %s\n", u.name, u.version))
		write(u.dir+"/index.html", "<h1>"+u.name+"</h1>")
		write(u.dir+"/assets/app.js", "console.log(1)")
	}
	write("outside/secret.txt", "secret")
	// The reconciler's records of what it installed from the package store: the runtime's own,
	// never shown or reachable.
	write("apps/"+packages.UnitsFolder+"/app/1.0.0.json", `{"sha256":""}`)
	write("plugins/"+packages.UnitsFolder+"/hello.json", `{"sha256":""}`)
	notify := func(c packages.Change) { f.changes = append(f.changes, c) }
	f.workers = New(packages.WorkerLayout, []packages.Dir{
		{Path: filepath.Join(f.dir, ".apps"), BuiltIn: true}, {Path: filepath.Join(f.dir, "apps")}}, notify)
	f.plugins = New(packages.PluginLayout, []packages.Dir{
		{Path: filepath.Join(f.dir, ".plugins"), BuiltIn: true}, {Path: filepath.Join(f.dir, "plugins")}}, notify)
	return f
}

func (f *fixture) path(rel string) string { return filepath.Join(f.dir, filepath.FromSlash(rel)) }

func (f *fixture) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(f.path(rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (f *fixture) exists(rel string) bool {
	_, err := os.Lstat(f.path(rel))
	return err == nil
}

func (f *fixture) link(t *testing.T, target, rel string) {
	t.Helper()
	if err := os.Symlink(target, f.path(rel)); err != nil {
		t.Fatal(err)
	}
}

// snapshot describes every entry under rel: type, size and content.
func (f *fixture) snapshot(t *testing.T, rel string) map[string]string {
	t.Helper()
	out := map[string]string{}
	base := f.path(rel)
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		desc := info.Mode().String()
		if info.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			desc += " " + string(b)
		} else if info.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			desc += " -> " + target
		}
		r, _ := filepath.Rel(base, p)
		out[r] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// codeOf returns the packages error code of err, "guard" for the guard's refusal, "" for nil.
func codeOf(err error) string {
	var pe *packages.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, errDenied):
		return "guard"
	case errors.As(err, &pe):
		return pe.Code
	}
	return "other: " + err.Error()
}

func TestResolve(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		surface *Surface
		path    string
		level   Level
		unit    string
		version string
		inner   string
		code    string
	}{
		{f.workers, "", LevelRoots, "", "", "", ""},
		{f.workers, "apps", LevelRoot, "", "", "", ""},
		{f.workers, "apps/", LevelRoot, "", "", "", ""},
		{f.workers, ".apps", LevelRoot, "", "", "", ""},
		{f.workers, "apps/@team", LevelScope, "", "", "", ""},
		{f.workers, "apps/@team/web", LevelUnit, "@team/web", "", "", ""},
		{f.workers, "apps/@team/web/1.0.0", LevelVersion, "@team/web", "1.0.0", "", ""},
		{f.workers, "apps/@team/web/1.0.0/a/b.txt", LevelInside, "@team/web", "1.0.0", "a/b.txt", ""},
		{f.workers, "apps/app", LevelUnit, "app", "", "", ""},
		{f.workers, "apps/app/1.0.0", LevelVersion, "app", "1.0.0", "", ""},
		{f.workers, "apps/app/1.0.0/index.html", LevelInside, "app", "1.0.0", "index.html", ""},
		{f.plugins, "plugins/hello", LevelUnit, "hello", "", "", ""},
		{f.plugins, "plugins/hello/assets", LevelInside, "hello", "", "assets", ""},
		{f.plugins, "plugins/@team/p/x/y", LevelInside, "@team/p", "", "x/y", ""},
		{f.workers, "nope/app", 0, "", "", "", CodeNotFound},
		{f.workers, "apps/.runtime-tmp-1234", 0, "", "", "", CodeNotFound},
		{f.workers, "apps/.runtime-units", 0, "", "", "", CodeNotFound},
		{f.workers, "apps/.runtime-units/app/1.0.0.json", 0, "", "", "", CodeNotFound},
		{f.plugins, "plugins/.runtime-units/hello.json", 0, "", "", "", CodeNotFound},
		{f.workers, "apps/../outside", 0, "", "", "", packages.CodePathTraversal},
		{f.workers, "apps/app/1.0.0/../../x", 0, "", "", "", packages.CodePathTraversal},
		{f.workers, "..", 0, "", "", "", packages.CodePathTraversal},
		{f.workers, "/etc/passwd", 0, "", "", "", packages.CodePathTraversal},
		{f.workers, `apps\app`, 0, "", "", "", packages.CodePathTraversal},
		{f.workers, "apps/app\x00", 0, "", "", "", packages.CodePathTraversal},
		{f.workers, "C:/x", 0, "", "", "", packages.CodePathTraversal},
		{f.workers, "apps//app", 0, "", "", "", CodeBadRequest},
		{f.workers, "apps/./app", 0, "", "", "", CodeBadRequest},
		{f.workers, strings.Repeat("a/", 3000), 0, "", "", "", CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			loc, err := tt.surface.Resolve(tt.path)
			if code := codeOf(err); code != tt.code {
				t.Fatalf("Resolve(%q) error %v, want code %q", tt.path, err, tt.code)
			}
			if err != nil {
				return
			}
			if loc.Level != tt.level || loc.Unit != tt.unit || loc.Version != tt.version || loc.Inner != tt.inner {
				t.Fatalf("Resolve(%q) = level %d unit %q version %q inner %q", tt.path, loc.Level, loc.Unit, loc.Version, loc.Inner)
			}
		})
	}
}

// TestWritePolicy runs every write operation against each kind of path and checks the policy
// of each surface: what is refused, and with which code.
func TestWritePolicy(t *testing.T) {
	type op func(f *fixture, s *Surface, g Guard, p string) error
	ops := map[string]op{
		"mkdir": func(f *fixture, s *Surface, g Guard, p string) error {
			_, err := s.Mkdir(g, p+"/newdir")
			return err
		},
		"mkdir-at": func(f *fixture, s *Surface, g Guard, p string) error {
			_, err := s.Mkdir(g, p)
			return err
		},
		"delete": func(f *fixture, s *Surface, g Guard, p string) error {
			_, err := s.Delete(g, p)
			return err
		},
		"rename": func(f *fixture, s *Surface, g Guard, p string) error {
			_, err := s.Rename(g, p, "renamed")
			return err
		},
		"upload-into": func(f *fixture, s *Surface, g Guard, p string) error {
			_, err := s.Upload(g, p, []UploadFile{{Name: "up.txt", Data: strings.NewReader("x"), Size: 1}}, packages.DefaultLimits)
			return err
		},
	}
	const (
		ok      = ""
		refused = CodePathForbidden
		ro      = CodeReadOnly
	)
	tests := []struct {
		plugins bool
		op      string
		path    string
		guard   Guard
		code    string
	}{
		// Workers: only strictly inside a version folder.
		{false, "mkdir-at", "apps/app/1.0.0/newdir", all, ok},
		{false, "mkdir-at", "apps/app/9.9.9", all, refused},
		{false, "mkdir-at", "apps/newapp", all, refused},
		{false, "mkdir-at", "apps/@new", all, refused},
		{false, "mkdir-at", "apps", all, refused},
		{false, "mkdir-at", "", all, refused},
		{false, "mkdir", "apps/app/1.0.0/assets", all, ok},
		{false, "mkdir", "apps/app/9.9.9", all, CodeNotFound}, // the version folder must exist
		{false, "mkdir", "apps/app/not-a-version", all, refused},
		{false, "mkdir", "apps/Bad_Name/1.0.0", all, refused},
		{false, "delete", "apps/app/1.0.0/index.html", all, ok},
		{false, "delete", "apps/app/1.0.0", all, refused},
		{false, "delete", "apps/app", all, refused},
		{false, "delete", "apps/@team", all, refused},
		{false, "delete", "apps", all, refused},
		{false, "delete", "apps/app/1.0.0/missing", all, CodeNotFound},
		{false, "rename", "apps/app/1.0.0/index.html", all, ok},
		{false, "rename", "apps/app/1.0.0", all, refused},
		{false, "rename", "apps/app", all, refused},
		{false, "rename", "apps/@team", all, refused},
		{false, "upload-into", "apps/app/1.0.0", all, ok},
		{false, "upload-into", "apps/app/1.0.0/assets", all, ok},
		{false, "upload-into", "apps/app/1.0.0/new/folder", all, ok},
		{false, "upload-into", "apps/app", all, refused},
		{false, "upload-into", "apps", all, refused},
		// Built-in roots are read-only.
		{false, "mkdir-at", ".apps/core/1.0.0/newdir", all, ro},
		{false, "delete", ".apps/core/1.0.0/index.html", all, ro},
		{false, "rename", ".apps/core/1.0.0/index.html", all, ro},
		{false, "upload-into", ".apps/core/1.0.0", all, ro},
		// Namespaces come first.
		{false, "delete", "apps/@other/x/1.0.0/index.html", team, "guard"},
		{false, "delete", "apps/app/1.0.0/index.html", team, "guard"},
		{false, "delete", "apps/@team/web/1.0.0/index.html", team, ok},
		{false, "upload-into", "apps/@other/x/1.0.0", team, "guard"},
		{false, "mkdir-at", "apps/@other", team, "guard"},
		// Plugins: anything strictly inside the unit folder.
		{true, "mkdir-at", "plugins/hello/newdir", all, ok},
		{true, "mkdir-at", "plugins/newplugin", all, refused},
		{true, "mkdir-at", "plugins/@team/newplugin", all, refused},
		{true, "delete", "plugins/hello/index.html", all, ok},
		{true, "delete", "plugins/hello/assets", all, ok},
		{true, "delete", "plugins/hello", all, refused},
		{true, "delete", "plugins/@team/p", all, refused},
		{true, "delete", "plugins/@team", all, refused},
		{true, "delete", "plugins", all, refused},
		{true, "rename", "plugins/hello", all, refused},
		{true, "rename", "plugins/hello/index.html", all, ok},
		{true, "upload-into", "plugins/hello", all, ok},
		{true, "upload-into", "plugins/@team/p/deep/er", all, ok},
		{true, "upload-into", "plugins", all, refused},
		{true, "upload-into", "plugins/@team", all, refused},
		{true, "upload-into", "plugins/missing", all, CodeNotFound},
		{true, "delete", ".plugins/base/index.html", all, ro},
		{true, "delete", "plugins/@other/q/index.html", team, "guard"},
		{true, "rename", "plugins/hello/index.html", team, "guard"},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s %s", tt.op, tt.path)
		if tt.plugins {
			name = "plugins " + name
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			s := f.workers
			if tt.plugins {
				s = f.plugins
			}
			before := f.snapshot(t, "")
			err := ops[tt.op](f, s, tt.guard, tt.path)
			if code := codeOf(err); code != tt.code {
				t.Fatalf("error %v, want code %q", err, tt.code)
			}
			if err != nil && !maps(before, f.snapshot(t, "")) {
				t.Fatalf("a refused %s changed the disk", tt.op)
			}
		})
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func names(entries []Entry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name)
	}
	return out
}

func TestList(t *testing.T) {
	f := newFixture(t)
	f.link(t, "index.html", "apps/app/1.0.0/home.html")
	f.link(t, "assets", "apps/app/1.0.0/static")
	if err := os.WriteFile(f.path("apps/app/1.0.0/b.txt"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}

	roots, err := f.workers.List(all, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(roots.Entries); !slices.Equal(got, []string{".apps", "apps"}) || !roots.Entries[0].BuiltIn || roots.Entries[1].BuiltIn {
		t.Fatalf("roots = %+v", roots.Entries)
	}

	l, err := f.workers.List(all, "apps/app/1.0.0/")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"assets", "static", "b.txt", "home.html", "index.html", "manifest.yaml"}; !slices.Equal(names(l.Entries), want) {
		t.Fatalf("entries = %v, want %v", names(l.Entries), want)
	}
	if l.Path != "apps/app/1.0.0" || !l.Writable {
		t.Errorf("listing path %q writable %v", l.Path, l.Writable)
	}
	byName := map[string]Entry{}
	for _, e := range l.Entries {
		byName[e.Name] = e
	}
	if e := byName["b.txt"]; e.Size != 5 || e.IsDir || e.IsLink || e.Path != "apps/app/1.0.0/b.txt" || e.ModTime.IsZero() {
		t.Errorf("b.txt = %+v", e)
	}
	if e := byName["static"]; !e.IsLink || !e.IsDir {
		t.Errorf("link to a folder = %+v", e)
	}
	if e := byName["home.html"]; !e.IsLink || e.IsDir || e.Size != int64(len("<h1>app</h1>")) {
		t.Errorf("link to a file = %+v", e)
	}

	for _, tt := range []struct {
		guard    Guard
		path     string
		want     []string
		writable bool
	}{
		{all, "apps", []string{"@other", "@team", "app"}, false},
		{team, "apps", []string{"@team"}, false},
		{team, "apps/@team", []string{"web"}, false},
		{all, "apps/app", []string{"1.0.0", "2.0.0"}, false},
		{all, ".apps/core/1.0.0", []string{"assets", "index.html", "manifest.yaml"}, false},
		{all, "plugins", nil, false}, // not a worker root
	} {
		l, err := f.workers.List(tt.guard, tt.path)
		if tt.want == nil {
			if codeOf(err) != CodeNotFound {
				t.Errorf("List(%q) error %v, want FILE_NOT_FOUND", tt.path, err)
			}
			continue
		}
		if err != nil || !slices.Equal(names(l.Entries), tt.want) || l.Writable != tt.writable {
			t.Errorf("List(%q) = %v writable %v, %v; want %v", tt.path, names(l.Entries), l.Writable, err, tt.want)
		}
	}
	for _, p := range []string{"apps/@other", "apps/@other/x/1.0.0", "apps/app", "apps/app/1.0.0"} {
		if _, err := f.workers.List(team, p); codeOf(err) != "guard" {
			t.Errorf("List(%q) as @team = %v, want the guard's refusal", p, err)
		}
	}
	if _, err := f.workers.List(all, "apps/app/1.0.0/index.html"); codeOf(err) != CodeNotADirectory {
		t.Errorf("listing a file = %v", err)
	}
	if pr, err := f.plugins.List(all, "plugins"); err != nil || !slices.Equal(names(pr.Entries), []string{"@other", "@team", "hello"}) {
		t.Errorf("List(plugins) = %v, %v", names(pr.Entries), err)
	}
	pl, err := f.plugins.List(all, "plugins/hello")
	if err != nil || !pl.Writable {
		t.Errorf("plugin folder listing writable %v, %v", pl.Writable, err)
	}
}

func TestMkdirDeleteRename(t *testing.T) {
	f := newFixture(t)
	loc, err := f.workers.Mkdir(all, "apps/app/1.0.0/a/b/c")
	if err != nil || !f.exists("apps/app/1.0.0/a/b/c") || loc.Unit != "app" || loc.Version != "1.0.0" {
		t.Fatalf("Mkdir = %+v, %v", loc, err)
	}
	if _, err := f.workers.Mkdir(all, "apps/app/1.0.0/a/b"); codeOf(err) != CodeExists {
		t.Errorf("Mkdir of an existing folder = %v", err)
	}
	if _, err := f.workers.Mkdir(all, "apps/app/1.0.0/index.html/x"); codeOf(err) != CodeNotADirectory {
		t.Errorf("Mkdir below a file = %v", err)
	}

	to, err := f.workers.Rename(all, "apps/app/1.0.0/a", "z")
	if err != nil || to.Path != "apps/app/1.0.0/z" || !f.exists("apps/app/1.0.0/z/b/c") || f.exists("apps/app/1.0.0/a") {
		t.Fatalf("Rename = %+v, %v", to, err)
	}
	if _, err := f.workers.Rename(all, "apps/app/1.0.0/z", "index.html"); codeOf(err) != CodeExists {
		t.Errorf("Rename onto an existing name = %v", err)
	}
	if to, err := f.workers.Rename(all, "apps/app/1.0.0/z", "z"); err != nil || to.Path != "apps/app/1.0.0/z" {
		t.Errorf("Rename to the same name = %+v, %v", to, err)
	}
	for _, bad := range []string{"", ".", "..", "a/b", `a\b`, "a\x00", "../../x", ".runtime-tmp-x"} {
		if _, err := f.workers.Rename(all, "apps/app/1.0.0/z", bad); codeOf(err) != CodeBadRequest && codeOf(err) != packages.CodePathTraversal {
			t.Errorf("Rename to %q = %v", bad, err)
		}
	}
	if _, err := f.workers.Rename(all, "apps/app/1.0.0/missing", "x"); codeOf(err) != CodeNotFound {
		t.Errorf("Rename of a missing file = %v", err)
	}

	if _, err := f.workers.Delete(all, "apps/app/1.0.0/z"); err != nil || f.exists("apps/app/1.0.0/z") {
		t.Fatalf("Delete folder = %v", err)
	}
	if _, err := f.workers.Delete(all, "apps/app/1.0.0/index.html"); err != nil || f.exists("apps/app/1.0.0/index.html") {
		t.Fatalf("Delete file = %v", err)
	}
	want := []packages.Change{
		{Op: "files", Name: "app", Version: "1.0.0"}, // mkdir
		{Op: "files", Name: "app", Version: "1.0.0"}, // rename
		{Op: "files", Name: "app", Version: "1.0.0"}, // delete folder
		{Op: "files", Name: "app", Version: "1.0.0"}, // delete file
	}
	if !slices.Equal(f.changes, want) {
		t.Errorf("changes = %+v", f.changes)
	}
	if _, err := f.plugins.Mkdir(all, "plugins/@team/p/x"); err != nil {
		t.Fatal(err)
	}
	if last := f.changes[len(f.changes)-1]; last != (packages.Change{Op: "files", Name: "@team/p"}) {
		t.Errorf("plugin change = %+v", last)
	}
}

func TestMove(t *testing.T) {
	tests := []struct {
		name    string
		plugins bool
		src     string
		dest    string
		guard   Guard
		want    string // the moved entry's new location, or
		code    string // the refusal
	}{
		{"into a subfolder", false, "apps/app/1.0.0/index.html", "apps/app/1.0.0/assets", all, "apps/app/1.0.0/assets/index.html", ""},
		{"to the version folder", false, "apps/app/1.0.0/assets/app.js", "apps/app/1.0.0", all, "apps/app/1.0.0/app.js", ""},
		{"to another version", false, "apps/app/1.0.0/assets", "apps/app/2.0.0/assets", all, "apps/app/2.0.0/assets/assets", ""},
		{"to another unit", false, "apps/app/1.0.0/index.html", "apps/@team/web/1.0.0", all, "apps/@team/web/1.0.0/index.html", CodeExists},
		{"to another unit, new name", false, "apps/app/1.0.0/assets", "apps/@team/web/1.0.0/index.html", all, "", CodeNotADirectory},
		{"folder into itself", false, "apps/app/1.0.0/assets", "apps/app/1.0.0/assets", all, "", CodeBadRequest},
		{"folder into its child", false, "apps/app/1.0.0/assets", "apps/app/1.0.0/assets/sub", all, "", CodeBadRequest},
		{"onto the version level", false, "apps/app/1.0.0/index.html", "apps/app", all, "", CodePathForbidden},
		{"a version folder", false, "apps/app/1.0.0", "apps/app/2.0.0", all, "", CodePathForbidden},
		{"to a built-in root", false, "apps/app/1.0.0/index.html", ".apps/core/1.0.0", all, "", CodeReadOnly},
		{"from a built-in root", false, ".apps/core/1.0.0/index.html", "apps/app/1.0.0/assets", all, "", CodeReadOnly},
		{"to a missing folder", false, "apps/app/1.0.0/index.html", "apps/app/1.0.0/nope", all, "", CodeNotFound},
		{"missing source", false, "apps/app/1.0.0/nope", "apps/app/1.0.0/assets", all, "", CodeNotFound},
		{"restricted, to another namespace", false, "apps/@team/web/1.0.0/index.html", "apps/@other/x/1.0.0/assets", team, "", "guard"},
		{"restricted, from another namespace", false, "apps/@other/x/1.0.0/index.html", "apps/@team/web/1.0.0/assets", team, "", "guard"},
		{"restricted, inside its namespace", false, "apps/@team/web/1.0.0/index.html", "apps/@team/web/1.0.0/assets", team, "apps/@team/web/1.0.0/assets/index.html", ""},
		{"plugin, inside", true, "plugins/hello/index.html", "plugins/hello/assets", all, "plugins/hello/assets/index.html", ""},
		{"plugin, to another plugin", true, "plugins/hello/assets", "plugins/@team/p", all, "", CodeExists},
		{"plugin, the unit folder", true, "plugins/hello", "plugins/@team/p", all, "", CodePathForbidden},
		{"plugin, to the root", true, "plugins/hello/index.html", "plugins", all, "", CodePathForbidden},
		{"plugin, to a scope folder", true, "plugins/hello/index.html", "plugins/@team", all, "", CodePathForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			s := f.workers
			if tt.plugins {
				s = f.plugins
			}
			before := f.snapshot(t, "")
			srcBefore := ""
			if f.exists(tt.src) {
				srcBefore = fmt.Sprint(f.snapshot(t, tt.src))
			}
			loc, err := s.Move(tt.guard, tt.src, tt.dest)
			if code := codeOf(err); code != tt.code {
				t.Fatalf("Move error %v, want code %q", err, tt.code)
			}
			if err != nil {
				if !maps(before, f.snapshot(t, "")) {
					t.Fatal("a refused move changed the disk")
				}
				return
			}
			if loc.Path != tt.want || f.exists(tt.src) || fmt.Sprint(f.snapshot(t, tt.want)) != srcBefore {
				t.Fatalf("Move = %q, source still there: %v", loc.Path, f.exists(tt.src))
			}
		})
	}
	t.Run("across roots", func(t *testing.T) {
		f := newFixture(t)
		s := New(packages.WorkerLayout, []packages.Dir{{Path: f.path("apps")}, {Path: f.path("more")}}, nil)
		if err := os.MkdirAll(f.path("more/app/1.0.0"), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Move(all, "apps/app/1.0.0/index.html", "more/app/1.0.0"); codeOf(err) != CodeBadRequest {
			t.Fatalf("move across roots = %v", err)
		}
	})
	t.Run("changes name both units", func(t *testing.T) {
		f := newFixture(t)
		if _, err := f.workers.Move(all, "apps/app/1.0.0/assets", "apps/@team/web/1.0.0/assets"); err != nil {
			t.Fatal(err)
		}
		want := []packages.Change{{Op: "files", Name: "app", Version: "1.0.0"}, {Op: "files", Name: "@team/web", Version: "1.0.0"}}
		if !slices.Equal(f.changes, want) {
			t.Fatalf("changes = %+v", f.changes)
		}
	})
}

// zipOf builds a zip archive from name → content; a name ending in "/" is a folder, content
// starting with "->" a link.
func zipOf(t *testing.T, entries ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		hdr := &zip.FileHeader{Name: e[0], Method: zip.Deflate}
		switch {
		case strings.HasSuffix(e[0], "/"):
			hdr.SetMode(fs.ModeDir | 0o755)
		case strings.HasPrefix(e[1], "->"):
			hdr.SetMode(fs.ModeSymlink | 0o777)
			e[1] = strings.TrimPrefix(e[1], "->")
		default:
			hdr.SetMode(0o644)
		}
		w, err := zw.CreateHeader(hdr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(e[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func upload(name string, data []byte) UploadFile {
	return UploadFile{Name: name, Data: bytes.NewReader(data), Size: int64(len(data))}
}

func TestUpload(t *testing.T) {
	f := newFixture(t)
	res, err := f.workers.Upload(all, "apps/app/1.0.0/new/dir", []UploadFile{
		upload("a.txt", []byte("A")),
		upload("sub/b.txt", []byte("BB")),
		upload("site.zip", zipOf(t, [2]string{"z/", ""}, [2]string{"z/c.txt", "CCC"}, [2]string{"z/link", "->c.txt"})),
	}, packages.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if res.Path != "apps/app/1.0.0/new/dir" || res.Files != 3 || res.Bytes != 6 {
		t.Errorf("result = %+v", res)
	}
	base := "apps/app/1.0.0/new/dir/"
	if f.read(t, base+"a.txt") != "A" || f.read(t, base+"sub/b.txt") != "BB" || f.read(t, base+"z/c.txt") != "CCC" || f.read(t, base+"z/link") != "CCC" {
		t.Error("uploaded files differ")
	}
	if f.exists(base + "site.zip") {
		t.Error("the zip itself was kept")
	}
	if entries, _ := os.ReadDir(f.path("apps")); slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return strings.HasPrefix(e.Name(), tempPrefix) }) {
		t.Error("the staging folder was left behind")
	}

	// A second upload replaces files and merges folders.
	if _, err := f.workers.Upload(all, "apps/app/1.0.0/new", []UploadFile{upload("dir/a.txt", []byte("A2")), upload("dir/sub/c.txt", []byte("C"))}, packages.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	if f.read(t, base+"a.txt") != "A2" || f.read(t, base+"sub/b.txt") != "BB" || f.read(t, base+"sub/c.txt") != "C" {
		t.Error("replace and merge failed")
	}

	refused := []struct {
		name   string
		files  []UploadFile
		limits packages.Limits
		code   string
	}{
		{"file onto a folder", []UploadFile{upload("ok.txt", []byte("x")), upload("sub", []byte("x"))}, packages.DefaultLimits, CodeExists},
		{"folder onto a file", []UploadFile{upload("a.txt/x", []byte("x"))}, packages.DefaultLimits, CodeExists},
		{"traversal in a name", []UploadFile{upload("../../../escape.txt", []byte("x"))}, packages.DefaultLimits, packages.CodePathTraversal},
		{"absolute name", []UploadFile{upload("/tmp/escape.txt", []byte("x"))}, packages.DefaultLimits, packages.CodePathTraversal},
		{"no files", nil, packages.DefaultLimits, CodeBadRequest},
		{"clash inside the upload", []UploadFile{upload("q", []byte("x")), upload("q/r", []byte("x"))}, packages.DefaultLimits, CodeBadRequest},
		{"zip with traversal", []UploadFile{upload("evil.zip", zipOf(t, [2]string{"../../evil.txt", "x"}))}, packages.DefaultLimits, packages.CodePathTraversal},
		{"zip with a link out", []UploadFile{upload("evil.zip", zipOf(t, [2]string{"l", "->../../../../outside"}))}, packages.DefaultLimits, packages.CodePathTraversal},
		{"corrupt zip", []UploadFile{upload("bad.zip", []byte("not a zip"))}, packages.DefaultLimits, packages.CodeInvalidArchive},
		{"zip over the unpacked limit", []UploadFile{upload("ok.txt", []byte("x")), upload("big.zip", zipOf(t, [2]string{"big", strings.Repeat("0", 2000)}))},
			packages.Limits{Unpacked: 1000, Entries: 100}, packages.CodeTooLarge},
		{"zip over the entry limit", []UploadFile{upload("many.zip", zipOf(t, [2]string{"1", ""}, [2]string{"2", ""}, [2]string{"3", ""}))},
			packages.Limits{Unpacked: 1000, Entries: 2}, packages.CodeTooLarge},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			before := f.snapshot(t, "")
			_, err := f.workers.Upload(all, "apps/app/1.0.0/new/dir", tt.files, tt.limits)
			if codeOf(err) != tt.code {
				t.Fatalf("error %v, want %s", err, tt.code)
			}
			if !maps(before, f.snapshot(t, "")) {
				t.Fatal("a refused upload changed the disk")
			}
		})
	}
	var pe *packages.Error
	_, err = f.workers.Upload(all, "apps/app/1.0.0", []UploadFile{upload("big.zip", zipOf(t, [2]string{"big", strings.Repeat("0", 2000)}))}, packages.Limits{Unpacked: 1000, Entries: 100})
	if !errors.As(err, &pe) || pe.Kind != packages.TooLarge || !strings.Contains(pe.Message, packages.UnpackedSetting) {
		t.Errorf("unpacked limit error = %v", err)
	}
	if _, err := f.workers.Upload(all, "apps/app/1.0.0/index.html", []UploadFile{upload("x", []byte("x"))}, packages.DefaultLimits); codeOf(err) != CodeNotADirectory {
		t.Errorf("upload into a file = %v", err)
	}
}

// readZip returns name → content (links as "-> target") of a zip.
func readZip(t *testing.T, data []byte) map[string]string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, zf := range zr.File {
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(rc)
		rc.Close()
		v := b.String()
		if zf.Mode()&fs.ModeSymlink != 0 {
			v = "-> " + v
		}
		out[zf.Name] = v
	}
	return out
}

func download(t *testing.T, d *Download) []byte {
	t.Helper()
	defer d.Close()
	var buf bytes.Buffer
	if _, err := d.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDownload(t *testing.T) {
	f := newFixture(t)
	f.link(t, "../index.html", "apps/app/1.0.0/assets/home")
	f.link(t, f.path("outside"), "apps/app/1.0.0/assets/abs")
	f.link(t, "../../../../outside/secret.txt", "apps/app/1.0.0/assets/rel")

	d, err := f.workers.Open(all, "apps/app/1.0.0/index.html", packages.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if d.IsZip || d.Name != "index.html" || d.Size != 12 || string(download(t, d)) != "<h1>app</h1>" {
		t.Errorf("file download = %+v", d)
	}

	d, err = f.workers.Open(all, "apps/app/1.0.0", packages.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if !d.IsZip || d.Name != "1.0.0.zip" {
		t.Errorf("folder download = %+v", d)
	}
	got := readZip(t, download(t, d))
	want := map[string]string{
		"1.0.0/": "", "1.0.0/assets/": "", "1.0.0/assets/app.js": "console.log(1)", "1.0.0/assets/home": "-> ../index.html",
		"1.0.0/index.html": "<h1>app</h1>", "1.0.0/manifest.yaml": "name: app\nversion: 1.0.0\n",
	}
	if !maps(got, want) {
		t.Errorf("zip = %v\nwant  %v", got, want)
	}

	// Above the unit level the guard filters, and each unit is walked on its own.
	d, err = f.workers.Open(team, "apps", packages.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	for name := range readZip(t, download(t, d)) {
		if !strings.HasPrefix(name, "apps/@team/") && name != "apps/" && name != "apps/@team/" {
			t.Errorf("restricted root download holds %s", name)
		}
	}

	for _, p := range []string{"apps/app/1.0.0/assets/abs/secret.txt", "apps/app/1.0.0/assets/rel", "apps/app/1.0.0/assets/abs"} {
		if _, err := f.workers.Open(all, p, packages.DefaultLimits); codeOf(err) != packages.CodePathTraversal {
			t.Errorf("Open(%q) = %v, want PATH_TRAVERSAL", p, err)
		}
	}
	if _, err := f.workers.Open(team, "apps/app/1.0.0/index.html", packages.DefaultLimits); codeOf(err) != "guard" {
		t.Errorf("restricted Open of an unscoped worker = %v", err)
	}
	if _, err := f.workers.Open(all, "", packages.DefaultLimits); codeOf(err) != CodeBadRequest {
		t.Errorf("Open of the roots = %v", err)
	}

	d, failed, err := f.workers.OpenBatch(team, []string{"apps/@team/web/1.0.0/index.html", "apps/@team/web/1.0.0/assets", "apps/app/1.0.0/index.html", "apps/@team/web/1.0.0/nope", "../x"}, packages.DefaultLimits)
	if d == nil || len(failed) != 3 || err != nil {
		t.Fatalf("batch = %v, failed %v", d, failed)
	}
	got = readZip(t, download(t, d))
	want = map[string]string{"index.html": "<h1>@team/web</h1>", "assets/": "", "assets/app.js": "console.log(1)"}
	if !maps(got, want) {
		t.Errorf("batch zip = %v", got)
	}
	d, _, _ = f.workers.OpenBatch(all, []string{"apps/app/1.0.0/index.html", "apps/app/2.0.0/index.html"}, packages.DefaultLimits)
	if got := readZip(t, download(t, d)); got["index.html"] != "<h1>app</h1>" || got["index.html (2)"] != "<h1>app</h1>" {
		t.Errorf("same base names = %v", got)
	}
	if d, failed, _ := f.workers.OpenBatch(all, []string{"apps/nope/1.0.0/x"}, packages.DefaultLimits); d != nil || len(failed) != 1 {
		t.Errorf("batch of nothing valid = %v, %v", d, failed)
	}
}

// TestDownloadBatchDeduplicates is the attack of a viewer asking for one folder many times
// over: a path named again, as written or with a trailing slash, or inside a folder the batch
// names too, is stored once, whatever the order.
func TestDownloadBatchDeduplicates(t *testing.T) {
	f := newFixture(t)
	const folder = "apps/app/1.0.0"
	once := readZip(t, download(t, mustOpen(t)(f.workers.Open(all, folder, packages.DefaultLimits))))
	for _, tt := range []struct {
		name  string
		paths []string
		want  map[string]string // nil: the zip of the folder alone, under its name
	}{
		{"300 copies", slices.Repeat([]string{folder}, 300), nil},
		{"a trailing slash", []string{folder, folder + "/"}, nil},
		{"the folder and what it holds", []string{folder + "/index.html", folder, folder + "/assets", folder + "/assets/app.js"}, nil},
		{"the folder after what it holds", []string{folder + "/assets/app.js", folder + "/assets/", folder}, nil},
		{"a file twice", []string{folder + "/index.html", folder + "/index.html"}, map[string]string{"index.html": "<h1>app</h1>"}},
		{"a name that only starts like the folder", []string{"apps/app/1.0.0/assets/app.js", "apps/app/1.0.0/assets/app.j"}, map[string]string{"app.js": "console.log(1)"}},
	} {
		d, failed, err := f.workers.OpenBatch(all, tt.paths, packages.DefaultLimits)
		if err != nil || d == nil {
			t.Fatalf("%s: %v, %v", tt.name, err, failed)
		}
		want := tt.want
		if want == nil {
			want = once
		}
		if got := readZip(t, download(t, d)); !maps(got, want) {
			t.Errorf("%s: zip = %v\nwant %v", tt.name, got, want)
		}
	}
}

// TestDownloadLimits: a zip over max_archive_entries or max_unpacked_size is refused before
// it starts (PAYLOAD_TOO_LARGE naming the setting), a batch as a folder; one within them is
// whole.
func TestDownloadLimits(t *testing.T) {
	f := newFixture(t)
	const folder = "apps/app/1.0.0" // 5 entries, 51 bytes of files
	for _, tt := range []struct {
		name    string
		limits  packages.Limits
		setting string // "": within the limits
	}{
		{"entries", packages.Limits{Entries: 4}, packages.EntriesSetting},
		{"bytes", packages.Limits{Unpacked: 50}, packages.UnpackedSetting},
		{"both at their least", packages.Limits{Entries: 5, Unpacked: 51}, ""},
		{"none", packages.Limits{}, ""},
	} {
		for _, batch := range []bool{false, true} {
			var (
				d   *Download
				err error
			)
			if batch {
				d, _, err = f.workers.OpenBatch(all, []string{folder + "/index.html", "apps/app/1.0.0/assets", "apps/app/1.0.0/manifest.yaml", folder}, tt.limits)
			} else {
				d, err = f.workers.Open(all, folder, tt.limits)
			}
			var pe *packages.Error
			switch {
			case tt.setting == "" && (err != nil || len(readZip(t, download(t, d))) != 5):
				t.Errorf("%s (batch %v): %v", tt.name, batch, err)
			case tt.setting != "" && (!errors.As(err, &pe) || pe.Kind != packages.TooLarge || pe.Code != packages.CodeTooLarge || !strings.Contains(pe.Message, tt.setting) || d != nil):
				t.Errorf("%s (batch %v): %v, want PAYLOAD_TOO_LARGE naming %s", tt.name, batch, err, tt.setting)
			}
		}
	}
}

// mustOpen fails the test on Open's error.
func mustOpen(t *testing.T) func(*Download, error) *Download {
	return func(d *Download, err error) *Download {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
}

// TestContainment plants links that lead outside the roots and into another unit, and checks
// that no operation reads or writes through them, and that nothing outside changed.
func TestContainment(t *testing.T) {
	f := newFixture(t)
	f.link(t, f.path("outside"), "apps/@team/web/1.0.0/abs")
	f.link(t, "../../../../../outside", "apps/@team/web/1.0.0/rel")
	f.link(t, "../../../@other/x/1.0.0", "apps/@team/web/1.0.0/other")
	f.link(t, "..", "apps/@team/web/1.0.0/up")
	f.link(t, f.path("outside"), "plugins/@team/p/abs")
	f.link(t, "../../@other/q", "plugins/@team/p/other")
	f.link(t, "../../outside", "apps/linked") // a unit folder that is a link
	outside := f.snapshot(t, "outside")
	other := f.snapshot(t, "apps/@other")
	otherPlugin := f.snapshot(t, "plugins/@other")
	app := f.snapshot(t, "apps/@team/web/1.0.0")

	zipUp := zipOf(t, [2]string{"z.txt", "z"})
	ops := []struct {
		name string
		run  func() error
	}{}
	add := func(name string, run func() error) {
		ops = append(ops, struct {
			name string
			run  func() error
		}{name, run})
	}
	for _, s := range []struct {
		surface *Surface
		base    string
	}{{f.workers, "apps/@team/web/1.0.0"}, {f.plugins, "plugins/@team/p"}} {
		links := []string{"abs", "other"}
		if s.surface == f.workers {
			links = append(links, "rel", "up")
		}
		for _, l := range links {
			p := s.base + "/" + l
			sf := s.surface
			if l != "up" { // up leads to the unit folder: readable, but never writable
				add("list "+p, func() error { _, err := sf.List(all, p); return err })
			}
			add("list "+p+"/sub", func() error { _, err := sf.List(all, p+"/sub"); return err })
			add("download "+p+"/secret.txt", func() error { _, err := sf.Open(all, p+"/secret.txt", packages.DefaultLimits); return err })
			add("download "+p+"/index.html", func() error { _, err := sf.Open(all, p+"/index.html", packages.DefaultLimits); return err })
			add("mkdir "+p+"/new", func() error { _, err := sf.Mkdir(all, p+"/new"); return err })
			add("mkdir "+p+"/9.9.9", func() error { _, err := sf.Mkdir(all, p+"/9.9.9"); return err })
			add("delete "+p+"/secret.txt", func() error { _, err := sf.Delete(all, p+"/secret.txt"); return err })
			add("delete "+p+"/index.html", func() error { _, err := sf.Delete(all, p+"/index.html"); return err })
			add("rename "+p+"/secret.txt", func() error { _, err := sf.Rename(all, p+"/secret.txt", "x"); return err })
			add("rename "+p+"/index.html", func() error { _, err := sf.Rename(all, p+"/index.html", "x"); return err })
			add("move into "+p, func() error { _, err := sf.Move(all, s.base+"/index.html", p); return err })
			add("move out of "+p, func() error { _, err := sf.Move(all, p+"/index.html", s.base+"/assets"); return err })
			add("upload into "+p, func() error {
				_, err := sf.Upload(all, p, []UploadFile{upload("u.txt", []byte("u"))}, packages.DefaultLimits)
				return err
			})
			add("upload zip into "+p, func() error {
				_, err := sf.Upload(all, p, []UploadFile{upload("u.zip", zipUp)}, packages.DefaultLimits)
				return err
			})
			add("upload through "+p, func() error {
				_, err := sf.Upload(all, s.base, []UploadFile{upload(l+"/u.txt", []byte("u"))}, packages.DefaultLimits)
				return err
			})
		}
	}
	add("list a linked unit", func() error { _, err := f.workers.List(all, "apps/linked"); return err })
	add("download a linked unit", func() error {
		_, err := f.workers.Open(all, "apps/linked/secret.txt", packages.DefaultLimits)
		return err
	})
	for _, op := range ops {
		if err := op.run(); err == nil {
			t.Errorf("%s succeeded", op.name)
		} else if c := codeOf(err); !slices.Contains([]string{packages.CodePathTraversal, CodePathForbidden, CodeNotFound, CodeNotADirectory, CodeExists}, c) {
			t.Errorf("%s: %v", op.name, err)
		}
	}
	if !maps(outside, f.snapshot(t, "outside")) || !maps(other, f.snapshot(t, "apps/@other")) ||
		!maps(otherPlugin, f.snapshot(t, "plugins/@other")) || !maps(app, f.snapshot(t, "apps/@team/web/1.0.0")) {
		t.Fatal("something outside the unit changed")
	}

	// Operations on a link itself act on the link, never its target.
	if _, err := f.workers.Rename(all, "apps/@team/web/1.0.0/abs", "abs2"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.workers.Move(all, "apps/@team/web/1.0.0/abs2", "apps/@team/web/1.0.0/assets"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.workers.Delete(all, "apps/@team/web/1.0.0/assets/abs2"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.workers.Upload(all, "apps/@team/web/1.0.0", []UploadFile{upload("rel", []byte("replaced"))}, packages.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Lstat(f.path("apps/@team/web/1.0.0/rel")); err != nil || !info.Mode().IsRegular() {
		t.Errorf("upload over a link did not replace the link: %v", err)
	}
	if !maps(outside, f.snapshot(t, "outside")) || !maps(other, f.snapshot(t, "apps/@other")) {
		t.Fatal("acting on links changed their targets")
	}
	l, err := f.workers.List(all, "apps/@team/web/1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		if e.Name == "other" && (!e.IsLink || e.IsDir) {
			t.Errorf("a link into another unit is described by its target: %+v", e)
		}
	}
}
