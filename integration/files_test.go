package integration

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// fmEntry is a file manager listing entry.
type fmEntry struct {
	Name        string `json:"name"`
	Path        string `json:"path"`
	IsDirectory bool   `json:"isDirectory"`
	IsSymlink   bool   `json:"isSymlink"`
	Size        int64  `json:"size"`
	UpdatedAt   int64  `json:"updatedAt"`
	Visibility  string `json:"visibility"`
}

type fmListing struct {
	Success bool `json:"success"`
	Data    struct {
		Path     string    `json:"path"`
		Writable bool      `json:"writable"`
		Entries  []fmEntry `json:"entries"`
	} `json:"data"`
}

// fmServer is a runtime with worker and plugin trees planted on disk: units in @team, @other
// and no namespace, a built-in root for each surface, and a folder outside every root.
type fmServer struct {
	*harness.Server
	t *testing.T
}

func startFiles(t *testing.T, env map[string]string) *fmServer {
	t.Helper()
	all := map[string]string{"RUNTIME_ROOT_KEY": rootKey}
	for k, v := range env {
		all[k] = v
	}
	s := &fmServer{Server: harness.Start(t, harness.Config{Env: all}), t: t}
	files := map[string]string{}
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
		files[u.dir+"/manifest.yaml"] = fmt.Sprintf("name: '%s'\nversion: %s\n", u.name, u.version)
		files[u.dir+"/index.html"] = "<h1>" + u.name + "</h1>"
		files[u.dir+"/assets/app.js"] = "console.log('" + u.name + "')"
	}
	writeFiles(t, s.DataDir, files)
	writeFiles(t, s.Dir, map[string]string{"outside/secret.txt": "secret"})
	return s
}

// call sends a file manager request of a surface ("workers" or "plugins") as key; mutating
// methods carry the server's Origin.
func (s *fmServer) call(method, surface, route, key string, opts ...harness.Option) *harness.Response {
	s.t.Helper()
	all := []harness.Option{harness.WithKey(key)}
	if method != "GET" {
		all = append(all, harness.WithOrigin(""))
	}
	return s.Do(method, s.API+"/"+surface+"/files/"+route, append(all, opts...)...)
}

func (s *fmServer) list(surface, p, key string) fmListing {
	s.t.Helper()
	resp := s.call("GET", surface, "list?path="+url.QueryEscape(p), key)
	var l fmListing
	if resp.Status != 200 || resp.JSON(&l) != nil || !l.Success {
		s.t.Fatalf("list %q = %s", p, resp)
	}
	return l
}

func (s *fmServer) read(rel string) string {
	b, err := os.ReadFile(filepath.Join(s.DataDir, filepath.FromSlash(rel)))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func (s *fmServer) exists(rel string) bool {
	_, err := os.Lstat(filepath.Join(s.DataDir, filepath.FromSlash(rel)))
	return err == nil
}

// tree is every path under the server's folder with its mode and content, to prove what
// changed and what did not.
func (s *fmServer) tree(rel string) map[string]string {
	s.t.Helper()
	out := map[string]string{}
	base := filepath.Join(s.Dir, filepath.FromSlash(rel))
	_ = filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if strings.HasPrefix(p, filepath.Join(s.DataDir, "state")) || strings.HasPrefix(p, filepath.Join(s.Dir, "caddy")) {
			return nil // the key store and Caddy's storage change on their own
		}
		info, err := d.Info()
		if err != nil { // removed while walking, as a retired folder is
			return nil
		}
		desc := info.Mode().String()
		switch {
		case info.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			desc += " " + string(b)
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		}
		out[p] = desc
		return nil
	})
	return out
}

func (s *fmServer) plant(target, rel string) {
	s.t.Helper()
	if err := os.Symlink(target, filepath.Join(s.DataDir, filepath.FromSlash(rel))); err != nil {
		s.t.Fatal(err)
	}
}

func entryNames(l fmListing) []string {
	var out []string
	for _, e := range l.Data.Entries {
		out = append(out, e.Name)
	}
	return out
}

// uploadForm builds the multipart body of a file manager upload: path, then each file with
// its paths[] entry (when any entry is non-empty) sent after the files.
func uploadForm(t *testing.T, dest string, files ...[3]string) harness.Option {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if err := mw.WriteField("path", dest); err != nil {
		t.Fatal(err)
	}
	withPaths := false
	for _, f := range files { // name, relative path, content
		w, err := mw.CreateFormFile("files[]", f[0])
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(f[2]))
		withPaths = withPaths || f[1] != ""
	}
	if withPaths {
		for _, f := range files {
			_ = mw.WriteField("paths[]", f[1])
		}
	}
	mw.Close()
	return harness.WithBody(mw.FormDataContentType(), buf.Bytes())
}

func zipEntries(t *testing.T, body []byte) map[string]string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	out := map[string]string{}
	for _, zf := range zr.File {
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if zf.Mode()&fs.ModeSymlink != 0 {
			out[zf.Name] = "-> " + string(b)
		} else {
			out[zf.Name] = string(b)
		}
	}
	return out
}

func wantStatus(t *testing.T, what string, resp *harness.Response, status int, code string) {
	t.Helper()
	if resp.Status != status || code != "" && resp.ErrorCode() != code {
		t.Errorf("%s = %s, want %d %s", what, resp, status, code)
	}
}

// TestFilesList lists roots, roots' contents and folders on both surfaces.
func TestFilesList(t *testing.T) {
	t.Parallel()
	s := startFiles(t, nil)

	roots := s.list("workers", "", rootKey)
	if got := entryNames(roots); !slices.Equal(got, []string{".apps", "apps"}) ||
		roots.Data.Entries[0].Visibility != "built-in" || roots.Data.Entries[1].Visibility != "uploaded" || roots.Data.Writable {
		t.Fatalf("worker roots = %+v", roots.Data)
	}
	if got := entryNames(s.list("plugins", "", rootKey)); !slices.Equal(got, []string{".plugins", "plugins"}) {
		t.Fatalf("plugin roots = %v", got)
	}
	writeFiles(t, s.DataDir, map[string]string{"apps/app/1.0.0/b.txt": "12345", "apps/app/1.0.0/a/x": "x"})

	l := s.list("workers", "apps/app/1.0.0", rootKey)
	if want := []string{"a", "assets", "b.txt", "index.html", "manifest.yaml"}; !slices.Equal(entryNames(l), want) || !l.Data.Writable || l.Data.Path != "apps/app/1.0.0" {
		t.Fatalf("version folder = %v writable %v", entryNames(l), l.Data.Writable)
	}
	info, _ := os.Stat(filepath.Join(s.DataDir, "apps/app/1.0.0/b.txt"))
	if e := l.Data.Entries[2]; e.Path != "apps/app/1.0.0/b.txt" || e.Size != 5 || e.IsDirectory || e.UpdatedAt != info.ModTime().Unix() || e.Visibility != "uploaded" {
		t.Errorf("file entry = %+v", e)
	}
	if e := l.Data.Entries[0]; !e.IsDirectory || e.Size != 0 {
		t.Errorf("folder entry = %+v", e)
	}
	for _, tt := range []struct {
		surface, path string
		want          []string
		writable      bool
	}{
		{"workers", "apps", []string{"@other", "@team", "app"}, false},
		{"workers", "apps/", []string{"@other", "@team", "app"}, false},
		{"workers", "apps/app", []string{"1.0.0", "2.0.0"}, false},
		{"workers", "apps/@team/web/1.0.0/assets", []string{"app.js"}, true},
		{"workers", ".apps/core/1.0.0", []string{"assets", "index.html", "manifest.yaml"}, false},
		{"plugins", "plugins", []string{"@other", "@team", "hello"}, false},
		{"plugins", "plugins/hello", []string{"assets", "index.html", "manifest.yaml"}, true},
		{"plugins", ".plugins/base", []string{"assets", "index.html", "manifest.yaml"}, false},
	} {
		l := s.list(tt.surface, tt.path, rootKey)
		if !slices.Equal(entryNames(l), tt.want) || l.Data.Writable != tt.writable {
			t.Errorf("%s %q = %v writable %v, want %v %v", tt.surface, tt.path, entryNames(l), l.Data.Writable, tt.want, tt.writable)
		}
		if strings.HasPrefix(tt.path, ".") && l.Data.Entries[0].Visibility != "built-in" {
			t.Errorf("%s entries are not marked built-in", tt.path)
		}
	}
	wantStatus(t, "list of a file", s.call("GET", "workers", "list?path=apps/app/1.0.0/b.txt", rootKey), 400, "NOT_A_DIRECTORY")
	wantStatus(t, "list of a missing folder", s.call("GET", "workers", "list?path=apps/app/9.9.9", rootKey), 404, "FILE_NOT_FOUND")
	wantStatus(t, "list of an unknown root", s.call("GET", "workers", "list?path=plugins", rootKey), 404, "FILE_NOT_FOUND")
	wantStatus(t, "list with a trailing slash on the route", s.Do("GET", s.API+"/workers/files/list/?path=apps", harness.WithKey(rootKey)), 200, "")
}

// TestFilesOperations runs every sub-route's happy path on both surfaces and checks the disk.
func TestFilesOperations(t *testing.T) {
	t.Parallel()
	s := startFiles(t, nil)
	for _, sf := range []struct{ surface, unit, other string }{
		{"workers", "apps/app/1.0.0", "apps/app/2.0.0"},
		{"plugins", "plugins/hello", "plugins/@team/p"},
	} {
		t.Run(sf.surface, func(t *testing.T) {
			u := sf.unit
			resp := s.call("POST", sf.surface, "mkdir", rootKey, harness.WithJSON(map[string]string{"path": u + "/docs/deep"}))
			var changed struct {
				Success bool
				Data    struct{ Path string }
			}
			if resp.Status != 200 || resp.JSON(&changed) != nil || changed.Data.Path != u+"/docs/deep" || !s.exists(u+"/docs/deep") {
				t.Fatalf("mkdir = %s", resp)
			}

			resp = s.call("POST", sf.surface, "upload", rootKey, uploadForm(t, u+"/docs",
				[3]string{"a.txt", "", "A"},
				[3]string{"b.txt", "", "BB"},
				[3]string{"site.zip", "", string(harness.Zip(t,
					harness.File{Name: "site/", Type: tar.TypeDir},
					harness.File{Name: "site/page.html", Body: "page"},
					harness.File{Name: "site/home.html", Type: tar.TypeSymlink, Linkname: "page.html"}))}))
			var up struct {
				Success bool
				Data    struct {
					Path  string
					Files int
					Bytes int64
				}
			}
			if resp.Status != 200 || resp.JSON(&up) != nil || up.Data.Path != u+"/docs" || up.Data.Files != 3 || up.Data.Bytes != 7 {
				t.Fatalf("upload = %s", resp)
			}
			if s.read(u+"/docs/a.txt") != "A" || s.read(u+"/docs/site/page.html") != "page" || s.read(u+"/docs/site/home.html") != "page" || s.exists(u+"/docs/site.zip") {
				t.Fatal("upload did not write the files or extract the zip")
			}
			// A folder upload: relative paths per file, into a folder created on the way.
			resp = s.call("POST", sf.surface, "upload", rootKey, uploadForm(t, u+"/tree",
				[3]string{"x.js", "src/x.js", "x"}, [3]string{"y.css", "css/y.css", "y"}))
			wantStatus(t, "folder upload", resp, 200, "")
			if s.read(u+"/tree/src/x.js") != "x" || s.read(u+"/tree/css/y.css") != "y" {
				t.Fatal("folder upload did not keep the relative paths")
			}

			resp = s.call("POST", sf.surface, "rename", rootKey, harness.WithJSON(map[string]string{"path": u + "/docs/a.txt", "newName": "renamed.txt"}))
			if resp.Status != 200 || resp.JSON(&changed) != nil || changed.Data.Path != u+"/docs/renamed.txt" || s.read(u+"/docs/renamed.txt") != "A" || s.exists(u+"/docs/a.txt") {
				t.Fatalf("rename = %s", resp)
			}
			resp = s.call("POST", sf.surface, "move", rootKey, harness.WithJSON(map[string]string{"path": u + "/docs/renamed.txt", "destPath": u + "/docs/deep"}))
			if resp.Status != 200 || resp.JSON(&changed) != nil || changed.Data.Path != u+"/docs/deep/renamed.txt" || s.read(u+"/docs/deep/renamed.txt") != "A" {
				t.Fatalf("move = %s", resp)
			}
			// Between two units (or versions) of one root.
			resp = s.call("POST", sf.surface, "move", rootKey, harness.WithJSON(map[string]string{"path": u + "/tree", "destPath": sf.other}))
			if resp.Status != 200 || s.read(sf.other+"/tree/src/x.js") != "x" || s.exists(u+"/tree") {
				t.Fatalf("move to %s = %s", sf.other, resp)
			}

			resp = s.call("GET", sf.surface, "download?path="+url.QueryEscape(u+"/index.html"), rootKey)
			if resp.Status != 200 || string(resp.Body) != s.read(u+"/index.html") || resp.Header.Get("Content-Type") != "application/octet-stream" ||
				resp.Header.Get("Content-Disposition") != "attachment; filename=index.html" {
				t.Fatalf("download of a file = %d %v", resp.Status, resp.Header)
			}
			resp = s.call("GET", sf.surface, "download?path="+url.QueryEscape(u+"/docs"), rootKey)
			if resp.Status != 200 || resp.Header.Get("Content-Type") != "application/zip" || resp.Header.Get("Content-Disposition") != "attachment; filename=docs.zip" {
				t.Fatalf("download of a folder = %d %v", resp.Status, resp.Header)
			}
			got := zipEntries(t, resp.Body)
			want := map[string]string{"docs/": "", "docs/b.txt": "BB", "docs/deep/": "", "docs/deep/renamed.txt": "A",
				"docs/site/": "", "docs/site/page.html": "page", "docs/site/home.html": "-> page.html"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("folder zip = %v\nwant %v", got, want)
			}
			resp = s.call("GET", sf.surface, "download-batch?paths="+url.QueryEscape(u+"/index.html,"+u+"/docs/b.txt,"+u+"/nope"), rootKey)
			if got := zipEntries(t, resp.Body); resp.Status != 200 || fmt.Sprint(got) != fmt.Sprint(map[string]string{"index.html": s.read(u + "/index.html"), "b.txt": "BB"}) {
				t.Errorf("download-batch = %d %v", resp.Status, got)
			}

			wantStatus(t, "GET refresh", s.call("GET", sf.surface, "refresh?path="+url.QueryEscape(u), rootKey), 200, "")
			wantStatus(t, "POST refresh", s.call("POST", sf.surface, "refresh", rootKey, harness.WithJSON(map[string]string{"path": u})), 200, "")
			wantStatus(t, "POST refresh without a body", s.call("POST", sf.surface, "refresh", rootKey), 200, "")

			resp = s.call("POST", sf.surface, "move-batch", rootKey, harness.WithJSON(map[string]any{
				"paths": []string{u + "/docs/b.txt", u + "/docs/site", u + "/docs/missing"}, "destPath": u + "/docs/deep"}))
			var batch struct {
				Success bool
				Errors  []string
			}
			if resp.Status != 200 || resp.JSON(&batch) != nil || !batch.Success || len(batch.Errors) != 1 ||
				!strings.HasPrefix(batch.Errors[0], u+"/docs/missing: ") || s.read(u+"/docs/deep/site/page.html") != "page" {
				t.Fatalf("move-batch = %s", resp)
			}
			resp = s.call("POST", sf.surface, "delete-batch", rootKey, harness.WithJSON(map[string]any{
				"paths": []string{u + "/docs/deep/b.txt", u + "/docs/deep/site"}}))
			batch.Errors = nil
			if resp.Status != 200 || resp.JSON(&batch) != nil || len(batch.Errors) != 0 || s.exists(u+"/docs/deep/site") || s.exists(u+"/docs/deep/b.txt") {
				t.Fatalf("delete-batch = %s", resp)
			}
			if strings.Contains(string(resp.Body), "errors") {
				t.Errorf("a clean batch lists errors: %s", resp.Body)
			}
			wantStatus(t, "delete", s.call("DELETE", sf.surface, "delete", rootKey, harness.WithJSON(map[string]string{"path": u + "/docs"})), 200, "")
			if s.exists(u + "/docs") {
				t.Fatal("delete left the folder")
			}
			wantStatus(t, "delete again", s.call("DELETE", sf.surface, "delete", rootKey, harness.WithJSON(map[string]string{"path": u + "/docs"})), 404, "FILE_NOT_FOUND")
			wantStatus(t, "mkdir onto a file", s.call("POST", sf.surface, "mkdir", rootKey, harness.WithJSON(map[string]string{"path": u + "/index.html"})), 409, "FILE_EXISTS")
			wantStatus(t, "rename onto a file", s.call("POST", sf.surface, "rename", rootKey, harness.WithJSON(map[string]string{"path": u + "/index.html", "newName": "manifest.yaml"})), 409, "FILE_EXISTS")
			wantStatus(t, "move onto a file", s.call("POST", sf.surface, "move", rootKey, harness.WithJSON(map[string]string{"path": u + "/index.html", "destPath": u + "/index.html"})), 400, "BAD_REQUEST")
			wantStatus(t, "move into a file", s.call("POST", sf.surface, "move", rootKey, harness.WithJSON(map[string]string{"path": u + "/assets", "destPath": u + "/index.html"})), 400, "NOT_A_DIRECTORY")
			wantStatus(t, "unknown JSON field", s.call("POST", sf.surface, "mkdir", rootKey, harness.WithJSON(map[string]string{"path": u + "/q", "mode": "777"})), 400, "BAD_REQUEST")
			wantStatus(t, "empty batch", s.call("POST", sf.surface, "delete-batch", rootKey, harness.WithJSON(map[string]any{"paths": []string{}})), 400, "BAD_REQUEST")
			wantStatus(t, "download-batch of nothing valid", s.call("GET", sf.surface, "download-batch?paths="+url.QueryEscape(u+"/nope"), rootKey), 404, "FILE_NOT_FOUND")
		})
	}

	// Changes reach the catalog: a version whose manifest is deleted is no longer listed.
	wantStatus(t, "delete a manifest", s.call("DELETE", "workers", "delete", rootKey, harness.WithJSON(map[string]string{"path": "apps/app/2.0.0/manifest.yaml"})), 200, "")
	if got := workers(t, s.Server, rootKey)["app"].Versions; !slices.Equal(got, []string{"1.0.0"}) {
		t.Errorf("versions after deleting 2.0.0's manifest = %v", got)
	}

	// One audit line per write, naming the action, the path and the outcome; a batch with a
	// failed path is audited as failed, with the count.
	seen := map[string]bool{}
	for _, e := range s.LogEntries("audit") {
		if a, _ := e["action"].(string); strings.HasPrefix(a, "files.") && e["surface"] != nil {
			seen[fmt.Sprintf("%s %v %v", a, e["outcome"], e["failed"])] = true
		}
	}
	for _, a := range []string{"files.mkdir success <nil>", "files.upload success <nil>", "files.rename success <nil>", "files.move success <nil>",
		"files.move-batch failed 1", "files.delete-batch success 0", "files.delete success <nil>", "files.delete failed <nil>"} {
		if !seen[a] {
			t.Errorf("no audit line %q in %v", a, seen)
		}
	}
}

// TestFilesPolicies checks the path policy of each surface and the read-only built-in roots:
// every refused write answers its code and changes nothing.
func TestFilesPolicies(t *testing.T) {
	t.Parallel()
	s := startFiles(t, nil)
	type req struct {
		method, surface, route string
		body                   any
	}
	mkdir := func(surface, p string) req { return req{"POST", surface, "mkdir", map[string]string{"path": p}} }
	del := func(surface, p string) req { return req{"DELETE", surface, "delete", map[string]string{"path": p}} }
	rename := func(surface, p string) req {
		return req{"POST", surface, "rename", map[string]string{"path": p, "newName": "renamed"}}
	}
	move := func(surface, p, dest string) req {
		return req{"POST", surface, "move", map[string]string{"path": p, "destPath": dest}}
	}
	upload := func(surface, dest string) req { return req{"POST", surface, "upload", dest} }
	tests := []struct {
		name string
		req  req
		code string
	}{
		{"worker: new name folder", mkdir("workers", "apps/newapp"), "PATH_FORBIDDEN"},
		{"worker: new version folder", mkdir("workers", "apps/app/3.0.0"), "PATH_FORBIDDEN"},
		{"worker: new scope folder", mkdir("workers", "apps/@new"), "PATH_FORBIDDEN"},
		{"worker: new root", mkdir("workers", "apps2"), "FILE_NOT_FOUND"},
		{"worker: a root", del("workers", "apps"), "PATH_FORBIDDEN"},
		{"worker: delete a version folder", del("workers", "apps/app/1.0.0"), "PATH_FORBIDDEN"},
		{"worker: delete a name folder", del("workers", "apps/app"), "PATH_FORBIDDEN"},
		{"worker: delete a scope folder", del("workers", "apps/@team"), "PATH_FORBIDDEN"},
		{"worker: rename a version folder", rename("workers", "apps/app/1.0.0"), "PATH_FORBIDDEN"},
		{"worker: rename a name folder", rename("workers", "apps/app"), "PATH_FORBIDDEN"},
		{"worker: rename a scope folder", rename("workers", "apps/@team"), "PATH_FORBIDDEN"},
		{"worker: move a version folder", move("workers", "apps/app/1.0.0", "apps/app/2.0.0"), "PATH_FORBIDDEN"},
		{"worker: move a file to the name level", move("workers", "apps/app/1.0.0/index.html", "apps/app"), "PATH_FORBIDDEN"},
		{"worker: move a file to the root", move("workers", "apps/app/1.0.0/index.html", "apps"), "PATH_FORBIDDEN"},
		{"worker: upload to the name level", upload("workers", "apps/app"), "PATH_FORBIDDEN"},
		{"worker: upload to a missing version", upload("workers", "apps/app/9.9.9"), "FILE_NOT_FOUND"},
		{"worker: upload to a root", upload("workers", "apps"), "PATH_FORBIDDEN"},
		{"built-in worker: mkdir", mkdir("workers", ".apps/core/1.0.0/x"), "READ_ONLY"},
		{"built-in worker: delete", del("workers", ".apps/core/1.0.0/index.html"), "READ_ONLY"},
		{"built-in worker: rename", rename("workers", ".apps/core/1.0.0/index.html"), "READ_ONLY"},
		{"built-in worker: move out", move("workers", ".apps/core/1.0.0/index.html", ".apps/core/1.0.0/assets"), "READ_ONLY"},
		{"built-in worker: move in", move("workers", "apps/app/1.0.0/index.html", ".apps/core/1.0.0"), "READ_ONLY"},
		{"built-in worker: upload", upload("workers", ".apps/core/1.0.0"), "READ_ONLY"},
		{"plugin: new plugin folder", mkdir("plugins", "plugins/newplugin"), "PATH_FORBIDDEN"},
		{"plugin: new scoped plugin folder", mkdir("plugins", "plugins/@team/newplugin"), "PATH_FORBIDDEN"},
		{"plugin: delete the unit folder", del("plugins", "plugins/hello"), "PATH_FORBIDDEN"},
		{"plugin: delete a scoped unit folder", del("plugins", "plugins/@team/p"), "PATH_FORBIDDEN"},
		{"plugin: rename the unit folder", rename("plugins", "plugins/hello"), "PATH_FORBIDDEN"},
		{"plugin: move the unit folder", move("plugins", "plugins/hello", "plugins/@team/p"), "PATH_FORBIDDEN"},
		{"plugin: move a file to the root", move("plugins", "plugins/hello/index.html", "plugins"), "PATH_FORBIDDEN"},
		{"plugin: upload to the root", upload("plugins", "plugins"), "PATH_FORBIDDEN"},
		{"plugin: upload to a scope folder", upload("plugins", "plugins/@team"), "PATH_FORBIDDEN"},
		{"built-in plugin: delete", del("plugins", ".plugins/base/index.html"), "READ_ONLY"},
		{"built-in plugin: upload", upload("plugins", ".plugins/base"), "READ_ONLY"},
		{"move across roots", move("workers", "apps/app/1.0.0/index.html", ".apps/core/1.0.0/assets"), "READ_ONLY"},
	}
	status := map[string]int{"PATH_FORBIDDEN": 403, "READ_ONLY": 403, "FILE_NOT_FOUND": 404}
	before := s.tree("")
	for _, tt := range tests {
		var opt harness.Option
		if tt.req.route == "upload" {
			opt = uploadForm(t, tt.req.body.(string), [3]string{"f.txt", "", "f"})
		} else {
			opt = harness.WithJSON(tt.req.body)
		}
		wantStatus(t, tt.name, s.call(tt.req.method, tt.req.surface, tt.req.route, rootKey, opt), status[tt.code], tt.code)
	}
	if after := s.tree(""); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("a refused write changed the disk")
	}
	// Batches report each refusal and carry on.
	resp := s.call("POST", "workers", "delete-batch", rootKey, harness.WithJSON(map[string]any{"paths": []string{"apps/app/1.0.0", "apps/app/1.0.0/index.html"}}))
	var batch struct{ Errors []string }
	if resp.Status != 200 || resp.JSON(&batch) != nil || len(batch.Errors) != 1 || !strings.HasPrefix(batch.Errors[0], "apps/app/1.0.0: ") || s.exists("apps/app/1.0.0/index.html") {
		t.Fatalf("delete-batch with a version folder = %s", resp)
	}
	wantStatus(t, "move-batch to the name level", s.call("POST", "workers", "move-batch", rootKey,
		harness.WithJSON(map[string]any{"paths": []string{"apps/app/1.0.0/assets"}, "destPath": "apps/app"})), 403, "PATH_FORBIDDEN")
	refusals := 0
	for _, e := range s.LogEntries("audit") {
		if a, _ := e["action"].(string); strings.HasPrefix(a, "files.") && e["outcome"] == "denied" {
			refusals++
		}
	}
	if refusals < 30 {
		t.Errorf("%d denied audit lines for the refused writes", refusals)
	}
}

// TestFilesNamespaces runs a key restricted to @team against every route, as source and as
// destination.
func TestFilesNamespaces(t *testing.T) {
	t.Parallel()
	s := startFiles(t, nil)
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "admin", "namespaces": []string{"@team"}}).Secret

	if got := entryNames(s.list("workers", "apps", team)); !slices.Equal(got, []string{"@team"}) {
		t.Errorf("restricted worker root = %v", got)
	}
	if got := entryNames(s.list("plugins", "plugins", team)); !slices.Equal(got, []string{"@team"}) {
		t.Errorf("restricted plugin root = %v", got)
	}
	if got := entryNames(s.list("workers", "", team)); !slices.Equal(got, []string{".apps", "apps"}) {
		t.Errorf("restricted roots = %v", got)
	}
	if got := entryNames(s.list("workers", "apps/@team/web/1.0.0", team)); len(got) != 3 {
		t.Errorf("restricted own version = %v", got)
	}
	q := url.QueryEscape
	json := harness.WithJSON
	denied := []struct {
		name, method, surface, route string
		opt                          harness.Option
	}{
		{"list another scope", "GET", "workers", "list?path=apps/@other", nil},
		{"list an unscoped worker", "GET", "workers", "list?path=apps/app", nil},
		{"list a built-in unscoped worker", "GET", "workers", "list?path=.apps/core/1.0.0", nil},
		{"list another scope's plugin", "GET", "plugins", "list?path=plugins/@other/q", nil},
		{"download", "GET", "workers", "download?path=" + q("apps/@other/x/1.0.0/index.html"), nil},
		{"download a folder", "GET", "workers", "download?path=" + q("apps/app"), nil},
		{"refresh", "GET", "workers", "refresh?path=" + q("apps/@other"), nil},
		{"refresh by POST", "POST", "plugins", "refresh", json(map[string]string{"path": "plugins/hello"})},
		{"mkdir", "POST", "workers", "mkdir", json(map[string]string{"path": "apps/@other/x/1.0.0/new"})},
		{"mkdir unscoped", "POST", "plugins", "mkdir", json(map[string]string{"path": "plugins/hello/new"})},
		{"delete", "DELETE", "workers", "delete", json(map[string]string{"path": "apps/app/1.0.0/index.html"})},
		{"delete a plugin file", "DELETE", "plugins", "delete", json(map[string]string{"path": "plugins/@other/q/index.html"})},
		{"rename", "POST", "workers", "rename", json(map[string]string{"path": "apps/@other/x/1.0.0/index.html", "newName": "x.html"})},
		{"rename a plugin file", "POST", "plugins", "rename", json(map[string]string{"path": "plugins/hello/index.html", "newName": "x.html"})},
		{"move in from another scope", "POST", "workers", "move", json(map[string]string{"path": "apps/@other/x/1.0.0/index.html", "destPath": "apps/@team/web/1.0.0/assets"})},
		{"move out to another scope", "POST", "workers", "move", json(map[string]string{"path": "apps/@team/web/1.0.0/index.html", "destPath": "apps/@other/x/1.0.0"})},
		{"move out to an unscoped plugin", "POST", "plugins", "move", json(map[string]string{"path": "plugins/@team/p/index.html", "destPath": "plugins/hello"})},
		{"move-batch out", "POST", "workers", "move-batch", json(map[string]any{"paths": []string{"apps/@team/web/1.0.0/index.html"}, "destPath": "apps/app/1.0.0"})},
		{"upload", "POST", "workers", "upload", uploadForm(t, "apps/@other/x/1.0.0", [3]string{"f.txt", "", "f"})},
		{"upload to a plugin", "POST", "plugins", "upload", uploadForm(t, "plugins/hello", [3]string{"f.txt", "", "f"})},
	}
	before := s.tree("")
	for _, tt := range denied {
		var opts []harness.Option
		if tt.opt != nil {
			opts = append(opts, tt.opt)
		}
		wantStatus(t, tt.name, s.call(tt.method, tt.surface, tt.route, team, opts...), 403, "NAMESPACE_DENIED")
	}
	// Batches refuse other namespaces path by path.
	for _, b := range []struct{ route, body string }{
		{"delete-batch", `{"paths":["apps/@other/x/1.0.0/index.html","apps/app/1.0.0/index.html"]}`},
		{"move-batch", `{"paths":["apps/@other/x/1.0.0/index.html","apps/app/1.0.0/index.html"],"destPath":"apps/@team/web/1.0.0/assets"}`},
	} {
		resp := s.call("POST", "workers", b.route, team, harness.WithBody("application/json", []byte(b.body)))
		var batch struct{ Errors []string }
		if resp.Status != 200 || resp.JSON(&batch) != nil || len(batch.Errors) != 2 || !strings.Contains(batch.Errors[0], "outside") {
			t.Errorf("%s across namespaces = %s", b.route, resp)
		}
	}
	resp := s.call("GET", "workers", "download-batch?paths="+q("apps/@other/x/1.0.0/index.html,apps/app/1.0.0/index.html"), team)
	wantStatus(t, "download-batch of other namespaces", resp, 404, "FILE_NOT_FOUND")
	resp = s.call("GET", "workers", "download?path=apps", team)
	for name := range zipEntries(t, resp.Body) {
		if !strings.HasPrefix(name, "apps/@team/") && name != "apps/" && name != "apps/@team/" {
			t.Errorf("a restricted root download holds %s", name)
		}
	}
	if fmt.Sprint(s.tree("")) != fmt.Sprint(before) {
		t.Fatal("a refused request changed the disk")
	}

	// Its own namespace works on every write.
	for _, w := range []struct {
		method, surface, route string
		opt                    harness.Option
	}{
		{"POST", "workers", "mkdir", json(map[string]string{"path": "apps/@team/web/1.0.0/new"})},
		{"POST", "workers", "rename", json(map[string]string{"path": "apps/@team/web/1.0.0/new", "newName": "newer"})},
		{"POST", "workers", "move", json(map[string]string{"path": "apps/@team/web/1.0.0/newer", "destPath": "apps/@team/web/1.0.0/assets"})},
		{"POST", "workers", "upload", uploadForm(t, "apps/@team/web/1.0.0/assets", [3]string{"f.txt", "", "f"})},
		{"DELETE", "workers", "delete", json(map[string]string{"path": "apps/@team/web/1.0.0/assets/f.txt"})},
		{"POST", "plugins", "mkdir", json(map[string]string{"path": "plugins/@team/p/new"})},
		{"POST", "plugins", "move-batch", json(map[string]any{"paths": []string{"plugins/@team/p/new"}, "destPath": "plugins/@team/p/assets"})},
		{"POST", "plugins", "delete-batch", json(map[string]any{"paths": []string{"plugins/@team/p/assets/new"}})},
	} {
		wantStatus(t, w.method+" "+w.surface+" "+w.route+" in @team", s.call(w.method, w.surface, w.route, team, w.opt), 200, "")
	}
	if !s.exists("apps/@team/web/1.0.0/assets/newer") || s.exists("plugins/@team/p/assets/new") {
		t.Error("writes in the key's own namespace did not happen")
	}
}

// TestFilesTraversal tries to leave the roots: '..' in every form, absolute paths, odd bytes,
// hostile archives and links planted on disk. Nothing outside a unit may be read or written.
func TestFilesTraversal(t *testing.T) {
	t.Parallel()
	s := startFiles(t, nil)
	outside := filepath.Join(s.Dir, "outside")
	s.plant(outside, "apps/app/1.0.0/abs")                                // absolute, out of every root
	s.plant("../../../../outside", "apps/app/1.0.0/rel")                  // relative, out of every root
	s.plant("../../../@other/x/1.0.0", "apps/@team/web/1.0.0/other")      // into another namespace
	s.plant("..", "apps/@team/web/1.0.0/up")                              // into the name folder
	s.plant(outside, "plugins/@team/p/abs")                               // a plugin's way out
	s.plant("../../@other/q", "plugins/@team/p/other")                    // a plugin's way into @other
	s.plant("../outside", "apps/linked")                                  // a unit folder that is a link
	s.plant(filepath.Join(outside, "secret.txt"), "apps/app/1.0.0/s.txt") // a file link out
	team := s.CreateKey(rootKey, map[string]any{"name": "team", "role": "admin", "namespaces": []string{"@team"}}).Secret
	before := s.tree("")
	q := url.QueryEscape
	json := harness.WithJSON

	reads := []struct {
		name, route string
		status      int
		code        string
	}{
		{"'..' in a query", "list?path=" + q("apps/../../outside"), 400, "PATH_TRAVERSAL"},
		{"encoded '..'", "list?path=apps/%2e%2e/%2e%2e/outside", 400, "PATH_TRAVERSAL"},
		{"encoded '/..'", "download?path=apps%2F..%2F..%2Foutside%2Fsecret.txt", 400, "PATH_TRAVERSAL"},
		{"leading '..'", "download?path=" + q("../outside/secret.txt"), 400, "PATH_TRAVERSAL"},
		{"absolute", "download?path=" + q(filepath.Join(outside, "secret.txt")), 400, "PATH_TRAVERSAL"},
		{"backslash", "download?path=" + q(`apps\..\..\outside`), 400, "PATH_TRAVERSAL"},
		{"NUL", "download?path=apps/app%00", 400, "PATH_TRAVERSAL"},
		{"through an absolute link", "download?path=" + q("apps/app/1.0.0/abs/secret.txt"), 400, "PATH_TRAVERSAL"},
		{"a file link out", "download?path=" + q("apps/app/1.0.0/s.txt"), 400, "PATH_TRAVERSAL"},
		{"list an absolute link", "list?path=" + q("apps/app/1.0.0/abs"), 400, "PATH_TRAVERSAL"},
		{"through a relative link", "download?path=" + q("apps/app/1.0.0/rel/secret.txt"), 400, "PATH_TRAVERSAL"},
		{"list a relative link", "list?path=" + q("apps/app/1.0.0/rel"), 400, "PATH_TRAVERSAL"},
		{"into another unit", "download?path=" + q("apps/@team/web/1.0.0/other/index.html"), 400, "PATH_TRAVERSAL"},
		{"list into another unit", "list?path=" + q("apps/@team/web/1.0.0/other"), 400, "PATH_TRAVERSAL"},
		{"a linked unit folder", "list?path=" + q("apps/linked"), 403, "PATH_FORBIDDEN"},
		{"through a linked unit folder", "download?path=" + q("apps/linked/secret.txt"), 403, "PATH_FORBIDDEN"},
	}
	for _, tt := range reads {
		wantStatus(t, tt.name, s.call("GET", "workers", tt.route, rootKey), tt.status, tt.code)
	}
	wantStatus(t, "plugin link out", s.call("GET", "plugins", "download?path="+q("plugins/@team/p/abs/secret.txt"), rootKey), 400, "PATH_TRAVERSAL")
	wantStatus(t, "plugin link into @other", s.call("GET", "plugins", "list?path="+q("plugins/@team/p/other"), team), 400, "PATH_TRAVERSAL")
	wantStatus(t, "restricted key through a link into @other", s.call("GET", "workers", "download?path="+q("apps/@team/web/1.0.0/other/index.html"), team), 400, "PATH_TRAVERSAL")
	// The URL path itself never resolves dot segments to another route.
	wantStatus(t, "dot segments in the route", s.Do("GET", s.API+"/workers/files/..%2f..%2fkeys", harness.WithKey(rootKey)), 404, "NOT_FOUND")

	// Listing shows links as links, without following them out.
	l := s.list("workers", "apps/app/1.0.0", rootKey)
	for _, e := range l.Data.Entries {
		if (e.Name == "abs" || e.Name == "rel" || e.Name == "s.txt") && (!e.IsSymlink || e.IsDirectory || e.Size != 0) {
			t.Errorf("link entry %+v", e)
		}
	}
	resp := s.call("GET", "workers", "download?path="+q("apps/app/1.0.0"), rootKey)
	for name, body := range zipEntries(t, resp.Body) {
		if strings.Contains(body, "secret") || strings.Contains(name, "abs") || strings.Contains(name, "rel") || strings.HasSuffix(name, "s.txt") {
			t.Errorf("the version zip holds %s: %q", name, body)
		}
	}

	writes := []struct {
		name, method, surface, route string
		opt                          harness.Option
	}{
		{"mkdir with '..'", "POST", "workers", "mkdir", json(map[string]string{"path": "apps/app/1.0.0/../../../../outside/new"})},
		{"mkdir absolute", "POST", "workers", "mkdir", json(map[string]string{"path": filepath.Join(outside, "new")})},
		{"mkdir through a link", "POST", "workers", "mkdir", json(map[string]string{"path": "apps/app/1.0.0/abs/new"})},
		{"mkdir through a relative link", "POST", "workers", "mkdir", json(map[string]string{"path": "apps/app/1.0.0/rel/new"})},
		{"mkdir into another unit", "POST", "workers", "mkdir", json(map[string]string{"path": "apps/@team/web/1.0.0/other/new"})},
		{"mkdir a version through a link", "POST", "workers", "mkdir", json(map[string]string{"path": "apps/@team/web/1.0.0/up/9.9.9"})},
		{"delete through a link", "DELETE", "workers", "delete", json(map[string]string{"path": "apps/app/1.0.0/abs/secret.txt"})},
		{"delete in another unit", "DELETE", "workers", "delete", json(map[string]string{"path": "apps/@team/web/1.0.0/other/index.html"})},
		{"rename through a link", "POST", "workers", "rename", json(map[string]string{"path": "apps/app/1.0.0/abs/secret.txt", "newName": "x"})},
		{"rename with '..' in the name", "POST", "workers", "rename", json(map[string]string{"path": "apps/app/1.0.0/index.html", "newName": "../../../../outside/x"})},
		{"rename with '/' in the name", "POST", "workers", "rename", json(map[string]string{"path": "apps/app/1.0.0/index.html", "newName": "assets/x"})},
		{"move out through a link", "POST", "workers", "move", json(map[string]string{"path": "apps/app/1.0.0/index.html", "destPath": "apps/app/1.0.0/abs"})},
		{"move into another unit", "POST", "workers", "move", json(map[string]string{"path": "apps/@team/web/1.0.0/index.html", "destPath": "apps/@team/web/1.0.0/other"})},
		{"move in from outside", "POST", "workers", "move", json(map[string]string{"path": "apps/app/1.0.0/abs/secret.txt", "destPath": "apps/app/1.0.0"})},
		{"move with '..'", "POST", "workers", "move", json(map[string]string{"path": "apps/app/1.0.0/index.html", "destPath": "apps/app/1.0.0/../../../.."})},
		{"upload through a link", "POST", "workers", "upload", uploadForm(t, "apps/app/1.0.0/abs", [3]string{"f.txt", "", "f"})},
		{"upload into another unit", "POST", "workers", "upload", uploadForm(t, "apps/@team/web/1.0.0/other", [3]string{"f.txt", "", "f"})},
		{"upload with '..' in paths[]", "POST", "workers", "upload", uploadForm(t, "apps/app/1.0.0", [3]string{"f.txt", "../../../../outside/f.txt", "f"})},
		{"upload with an absolute paths[]", "POST", "workers", "upload", uploadForm(t, "apps/app/1.0.0", [3]string{"f.txt", filepath.Join(outside, "f.txt"), "f"})},
		{"upload a zip with '..'", "POST", "workers", "upload", uploadForm(t, "apps/app/1.0.0", [3]string{"evil.zip", "", string(harness.Zip(t, harness.File{Name: "../../../../outside/zip.txt", Body: "x"}))})},
		{"upload a zip with an absolute entry", "POST", "workers", "upload", uploadForm(t, "apps/app/1.0.0", [3]string{"evil.zip", "", string(harness.Zip(t, harness.File{Name: filepath.Join(outside, "zip.txt"), Body: "x"}))})},
		{"upload a zip with a link out", "POST", "workers", "upload", uploadForm(t, "apps/app/1.0.0", [3]string{"evil.zip", "", string(harness.Zip(t,
			harness.File{Name: "l", Type: tar.TypeSymlink, Linkname: "../../../../outside"}, harness.File{Name: "l/zip.txt", Body: "x"}))})},
		{"plugin: mkdir through a link", "POST", "plugins", "mkdir", json(map[string]string{"path": "plugins/@team/p/abs/new"})},
		{"plugin: upload into @other through a link", "POST", "plugins", "upload", uploadForm(t, "plugins/@team/p/other", [3]string{"f.txt", "", "f"})},
		{"plugin: delete in @other through a link", "DELETE", "plugins", "delete", json(map[string]string{"path": "plugins/@team/p/other/index.html"})},
	}
	for _, tt := range writes {
		wantStatus(t, tt.name, s.call(tt.method, tt.surface, tt.route, rootKey, tt.opt), 400, "PATH_TRAVERSAL")
	}
	if after := s.tree(""); fmt.Sprint(after) != fmt.Sprint(before) {
		for p, d := range after {
			if before[p] != d {
				t.Errorf("changed: %s %s (was %q)", p, d, before[p])
			}
		}
		for p := range before {
			if _, ok := after[p]; !ok {
				t.Errorf("removed: %s", p)
			}
		}
		t.Fatal("a traversal attempt changed the disk")
	}

	// Acting on a link acts on the link: the target stays.
	wantStatus(t, "delete a link", s.call("DELETE", "workers", "delete", rootKey, json(map[string]string{"path": "apps/app/1.0.0/abs"})), 200, "")
	wantStatus(t, "replace a file link by upload", s.call("POST", "workers", "upload", rootKey, uploadForm(t, "apps/app/1.0.0", [3]string{"s.txt", "", "mine"})), 200, "")
	if s.exists("apps/app/1.0.0/abs") || s.read("apps/app/1.0.0/s.txt") != "mine" {
		t.Error("the links were not replaced")
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret.txt")); err != nil || string(b) != "secret" {
		t.Fatalf("the link target changed: %q %v", b, err)
	}
}

// TestFilesUploadLimits checks max_upload_size, max_unpacked_size and max_archive_entries on
// file manager uploads: each answers 413 naming its setting, and a refused upload writes
// nothing.
func TestFilesUploadLimits(t *testing.T) {
	t.Parallel()
	s := startFiles(t, map[string]string{
		"RUNTIME_MAX_UPLOAD_SIZE":     "64KiB",
		"RUNTIME_MAX_UNPACKED_SIZE":   "128KiB",
		"RUNTIME_MAX_ARCHIVE_ENTRIES": "10",
	})
	dest := "apps/app/1.0.0/up"
	kib := func(n int) string { return strings.Repeat("x", n<<10) }
	wantStatus(t, "60 KiB", s.call("POST", "workers", "upload", rootKey, uploadForm(t, dest, [3]string{"ok.bin", "", kib(60)})), 200, "")
	before := s.tree("")
	many := func(n int) [][3]string {
		var files [][3]string
		for i := range n {
			files = append(files, [3]string{fmt.Sprintf("f%d", i), "", "x"})
		}
		return files
	}
	var entries []harness.File
	for i := range 11 {
		entries = append(entries, harness.File{Name: fmt.Sprintf("e%d", i), Body: "x"})
	}
	for _, tt := range []struct {
		name    string
		files   [][3]string
		setting string
	}{
		{"one file over the upload size", [][3]string{{"big.bin", "", kib(70)}}, "max_upload_size"},
		{"files together over the upload size", [][3]string{{"a.bin", "", kib(40)}, {"b.bin", "", kib(40)}}, "max_upload_size"},
		{"a zip over the unpacked size", [][3]string{{"bomb.zip", "", string(harness.Zip(t, harness.File{Name: "zeros", Body: strings.Repeat("0", 200<<10)}))}}, "max_unpacked_size"},
		{"a zip over the entry count", [][3]string{{"many.zip", "", string(harness.Zip(t, entries...))}}, "max_archive_entries"},
		{"more files than the entry count", many(11), "max_archive_entries"},
	} {
		resp := s.call("POST", "workers", "upload", rootKey, uploadForm(t, dest, tt.files...))
		wantStatus(t, tt.name, resp, 413, "PAYLOAD_TOO_LARGE")
		if !strings.Contains(string(resp.Body), tt.setting) {
			t.Errorf("%s: the message does not name %s: %s", tt.name, tt.setting, resp.Body)
		}
	}
	if fmt.Sprint(s.tree("")) != fmt.Sprint(before) {
		t.Fatal("a refused upload wrote something")
	}
	wantStatus(t, "ten files", s.call("POST", "plugins", "upload", rootKey, uploadForm(t, "plugins/hello", many(10)...)), 200, "")
}

// TestFilesDeleteRoute proves that DELETE …/workers/files/delete reaches the file manager and
// is never taken for DELETE workers/{scope}/{name}: workers named files and delete survive.
func TestFilesDeleteRoute(t *testing.T) {
	t.Parallel()
	s := startFiles(t, nil)
	writeFiles(t, s.DataDir, map[string]string{
		"apps/files/1.0.0/manifest.yaml":  "name: files\nversion: 1.0.0\n",
		"apps/delete/1.0.0/manifest.yaml": "name: delete\nversion: 1.0.0\n",
		"plugins/files/manifest.yaml":     "name: files\nversion: 1.0.0\n",
		"plugins/delete/manifest.yaml":    "name: delete\nversion: 1.0.0\n",
	})
	resp := s.Do("DELETE", s.API+"/workers/files/delete", harness.WithKey(rootKey), harness.WithOrigin(""),
		harness.WithJSON(map[string]string{"path": "apps/app/1.0.0/index.html"}))
	wantStatus(t, "DELETE workers/files/delete", resp, 200, "")
	if s.exists("apps/app/1.0.0/index.html") {
		t.Error("the file manager did not delete the file")
	}
	resp = s.Do("DELETE", s.API+"/workers/files/delete", harness.WithKey(rootKey), harness.WithOrigin(""))
	if resp.Status != 400 || resp.ErrorCode() != "BAD_REQUEST" || !strings.Contains(string(resp.Body), "body") {
		t.Errorf("DELETE workers/files/delete without a body = %s", resp)
	}
	resp = s.Do("DELETE", s.API+"/plugins/files/delete", harness.WithKey(rootKey), harness.WithOrigin(""),
		harness.WithJSON(map[string]string{"path": "plugins/hello/index.html"}))
	wantStatus(t, "DELETE plugins/files/delete", resp, 200, "")
	w := workers(t, s.Server, rootKey)
	if _, ok := w["files"]; !ok {
		t.Error("worker files was deleted")
	}
	if _, ok := w["delete"]; !ok {
		t.Error("worker delete was deleted")
	}
	p := plugins(t, s.Server, rootKey)
	if _, ok := p["files"]; !ok {
		t.Error("plugin files was deleted")
	}
	if _, ok := p["delete"]; !ok {
		t.Error("plugin delete was deleted")
	}
	for _, e := range s.LogEntries("audit") {
		if a, _ := e["action"].(string); strings.HasPrefix(a, "worker.") || strings.HasPrefix(a, "plugin.") {
			t.Errorf("a unit route ran: %v", e)
		}
	}
}

// TestFilesPermissions checks each route's permission with keys that lack it, and CSRF.
func TestFilesPermissions(t *testing.T) {
	t.Parallel()
	s := startFiles(t, nil)
	viewer := s.CreateKey(rootKey, map[string]any{"name": "viewer", "role": "viewer"}).Secret
	installer := s.CreateKey(rootKey, map[string]any{"name": "installer", "role": "custom", "permissions": []string{"workers:read", "workers:install", "plugins:read", "plugins:install"}}).Secret
	remover := s.CreateKey(rootKey, map[string]any{"name": "remover", "role": "custom", "permissions": []string{"workers:remove", "plugins:remove"}}).Secret
	q := url.QueryEscape
	for _, sf := range []struct{ surface, unit string }{{"workers", "apps/app/1.0.0"}, {"plugins", "plugins/hello"}} {
		u := sf.unit
		perm := func(kind string) string { return sf.surface + ":" + kind }
		routes := []struct {
			method, route string
			opt           harness.Option
			needs         string
		}{
			{"GET", "list?path=" + q(u), nil, perm("read")},
			{"GET", "download?path=" + q(u+"/index.html"), nil, perm("read")},
			{"GET", "download-batch?paths=" + q(u+"/index.html"), nil, perm("read")},
			{"GET", "refresh", nil, perm("read")},
			{"POST", "refresh", harness.WithJSON(map[string]string{}), perm("read")},
			{"POST", "mkdir", harness.WithJSON(map[string]string{"path": u + "/new"}), perm("install")},
			{"POST", "rename", harness.WithJSON(map[string]string{"path": u + "/index.html", "newName": "i.html"}), perm("install")},
			{"POST", "move", harness.WithJSON(map[string]string{"path": u + "/index.html", "destPath": u + "/assets"}), perm("install")},
			{"POST", "move-batch", harness.WithJSON(map[string]any{"paths": []string{u + "/index.html"}, "destPath": u + "/assets"}), perm("install")},
			{"POST", "upload", uploadForm(t, u, [3]string{"f.txt", "", "f"}), perm("install")},
			{"DELETE", "delete", harness.WithJSON(map[string]string{"path": u + "/index.html"}), perm("remove")},
			{"POST", "delete-batch", harness.WithJSON(map[string]any{"paths": []string{u + "/index.html"}}), perm("remove")},
		}
		before := s.tree("")
		for _, rt := range routes {
			var opts []harness.Option
			if rt.opt != nil {
				opts = append(opts, rt.opt)
			}
			for name, key := range map[string]string{"viewer": viewer, "installer": installer, "remover": remover} {
				has := map[string][]string{"viewer": {perm("read")}, "installer": {perm("read"), perm("install")}, "remover": {perm("remove")}}[name]
				if slices.Contains(has, rt.needs) {
					continue
				}
				resp := s.call(rt.method, sf.surface, rt.route, key, opts...)
				if resp.Status != 403 || resp.ErrorCode() != "PERMISSION_DENIED" || !strings.Contains(string(resp.Body), rt.needs) {
					t.Errorf("%s %s %s as %s = %s, want 403 naming %s", rt.method, sf.surface, rt.route, name, resp, rt.needs)
				}
			}
			if rt.method != "GET" {
				// Without Origin a browser-held key is refused before anything runs.
				resp := s.Do(rt.method, s.API+"/"+sf.surface+"/files/"+rt.route, append([]harness.Option{harness.WithKey(installer)}, opts...)...)
				wantStatus(t, rt.method+" "+rt.route+" without Origin", resp, 403, "CSRF_REJECTED")
			}
		}
		if fmt.Sprint(s.tree("")) != fmt.Sprint(before) {
			t.Fatal("a refused request changed the disk")
		}
		wantStatus(t, "viewer lists", s.call("GET", sf.surface, "list?path="+q(u), viewer), 200, "")
		wantStatus(t, "installer writes", s.call("POST", sf.surface, "mkdir", installer, harness.WithJSON(map[string]string{"path": u + "/new"})), 200, "")
		wantStatus(t, "remover deletes", s.call("DELETE", sf.surface, "delete", remover, harness.WithJSON(map[string]string{"path": u + "/new"})), 200, "")
	}
}

// TestDownloadBatchBounded is attack 9 of issue 35: a viewer asking download-batch for one
// folder 300 times got a zip of 300 copies. The batch stores a path once, however often it is
// named and whether a folder it names holds it; a zip past max_archive_entries or
// max_unpacked_size is refused with 413 PAYLOAD_TOO_LARGE naming the setting, before it starts.
func TestDownloadBatchBounded(t *testing.T) {
	t.Parallel()
	s := startFiles(t, map[string]string{"RUNTIME_MAX_ARCHIVE_ENTRIES": "20"})
	viewer := s.CreateKey(rootKey, map[string]any{"name": "viewer", "role": "viewer"}).Secret
	const folder = "apps/app/1.0.0"
	single := s.call("GET", "workers", "download?path="+url.QueryEscape(folder), viewer)
	wantStatus(t, "download of the folder", single, 200, "")
	once := zipEntries(t, single.Body)
	for _, tt := range []struct {
		name  string
		paths []string
	}{
		{"300 copies", slices.Repeat([]string{folder}, 300)},
		{"copies with a trailing slash", []string{folder + "/", folder, folder + "/"}},
		{"the folder and what it holds", []string{folder + "/index.html", folder, folder + "/assets", folder + "/assets/app.js", folder}},
	} {
		resp := s.call("GET", "workers", "download-batch?paths="+url.QueryEscape(strings.Join(tt.paths, ",")), viewer)
		wantStatus(t, tt.name, resp, 200, "")
		if got := zipEntries(t, resp.Body); fmt.Sprint(got) != fmt.Sprint(once) {
			t.Errorf("%s: %d bytes, zip %v\nwant %v", tt.name, len(resp.Body), got, once)
		}
	}
	// The whole worker tree holds more than 20 entries.
	for _, route := range []string{"download-batch?paths=" + url.QueryEscape("apps,apps/app"), "download?path=apps"} {
		resp := s.call("GET", "workers", route, viewer)
		wantStatus(t, route, resp, 413, "PAYLOAD_TOO_LARGE")
		if !strings.Contains(string(resp.Body), "max_archive_entries") || resp.Header.Get("Content-Type") == "application/zip" {
			t.Errorf("%s = %s, want the envelope naming max_archive_entries", route, resp)
		}
	}
}
