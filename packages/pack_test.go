package packages

import (
	"bytes"
	"crypto/sha256"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// pack packs the tree at dir.
func pack(t *testing.T, dir string) ([]byte, error) {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var buf bytes.Buffer
	_, err = Pack(root, &buf, PackOptions{})
	return buf.Bytes(), err
}

// TestPackRoundTrip packs installed trees and installs the archives again: the trees are
// equal (folders, empty ones too, files, links, the executable bit), the archive is the same
// bytes however often and from whichever copy it is packed, whatever the files' times, and
// an npm-style package/ folder comes back unwrapped at the root.
func TestPackRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name, filename string
		archive        []byte
	}{
		{"tgz", "app.tgz", testkit.TarGz(t,
			testkit.File{Name: "manifest.yaml", Body: "name: '@team/app'\nversion: 1.2.3\n# kept as written\n"},
			testkit.File{Name: "index.html", Body: "<h1>app</h1>"},
			testkit.File{Name: "bin/", Type: '5'},
			testkit.File{Name: "bin/run.sh", Body: "#!/bin/sh\necho hi\n", Mode: 0o700},
			testkit.File{Name: "empty/", Type: '5'},
			testkit.File{Name: "a/b/c/deep.txt", Body: strings.Repeat("deep ", 1000)},
			testkit.File{Name: "home.html", Type: '2', Linkname: "index.html"},
			testkit.File{Name: "a/b/up", Type: '2', Linkname: "../../bin"},
			testkit.File{Name: strings.Repeat("long-name-", 12) + ".txt", Body: "a name over ustar's 100 bytes"},
		)},
		{"npm zip", "app.zip", testkit.Zip(t,
			testkit.File{Name: "package/package.json", Body: `{"name":"app","version":"2.0.0"}`},
			testkit.File{Name: "package/lib/x.js", Body: "x"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newCatalog(t, WorkerLayout)
			first, err := install(t, c, tc.filename, tc.archive)
			if err != nil {
				t.Fatal(err)
			}
			packed, err := pack(t, first.Path)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := pack(t, first.Path)
			if !bytes.Equal(packed, again) {
				t.Fatal("the same tree packed twice gives different archives")
			}

			other, _ := newCatalog(t, WorkerLayout)
			second, err := install(t, other, "packed.tgz", packed)
			if err != nil {
				t.Fatalf("the packed archive does not install: %v", err)
			}
			if second.Name != first.Name || second.Version != first.Version || second.Files != first.Files || second.Bytes != first.Bytes {
				t.Fatalf("installed from the packed archive: %+v, want as %+v", second, first)
			}
			a, b := testkit.Tree(t, first.Path), testkit.Tree(t, second.Path)
			if !maps.Equal(a, b) {
				t.Fatalf("tree from the packed archive:\n%v\nwant:\n%v", b, a)
			}
			for rel, body := range a {
				if body == "dir" || strings.HasPrefix(body, "-> ") {
					continue
				}
				ia, _ := os.Stat(filepath.Join(first.Path, rel))
				ib, _ := os.Stat(filepath.Join(second.Path, rel))
				if ia.Mode().Perm()&0o111 != ib.Mode().Perm()&0o111 {
					t.Errorf("%s: mode %v after the round trip, want %v", rel, ib.Mode(), ia.Mode())
				}
			}

			// New times on the second copy: the same archive.
			old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
			for rel, body := range b {
				if !strings.HasPrefix(body, "-> ") {
					os.Chtimes(filepath.Join(second.Path, rel), old, old)
				}
			}
			repacked, err := pack(t, second.Path)
			if err != nil {
				t.Fatal(err)
			}
			if sha256.Sum256(repacked) != sha256.Sum256(packed) {
				t.Fatal("the installed copy packs to another archive")
			}
		})
	}
}

// TestPackRefuses: what an extraction would refuse, or cannot be archived, is an error
// naming it, not an archive that installs differently.
func TestPackRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		make       func(dir string) error
	}{
		{"link outside", "outside the package", func(dir string) error { return os.Symlink("../../etc", filepath.Join(dir, "out")) }},
		{"absolute link", "absolute path", func(dir string) error { return os.Symlink("/etc/passwd", filepath.Join(dir, "abs")) }},
		{"socket", "special file", func(dir string) error {
			l, err := net.Listen("unix", filepath.Join(dir, "s"))
			if err == nil {
				t.Cleanup(func() { l.Close() })
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte("name: x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(dir); err != nil {
				t.Skip(err)
			}
			if _, err := pack(t, dir); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("pack = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
