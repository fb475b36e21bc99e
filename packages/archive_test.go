package packages

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// extractInto extracts data into a fresh folder nested two levels inside a sandbox, and checks
// that nothing was written to the sandbox outside that folder.
func extractInto(t *testing.T, data []byte, format Format, limits Limits) (string, Stats, error) {
	t.Helper()
	sandbox := t.TempDir()
	dest := filepath.Join(sandbox, "a", "dest")
	if err := os.MkdirAll(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	root := openRoot(t, dest)
	stats, err := Extract(bytes.NewReader(data), int64(len(data)), format, root, limits)
	filepath.WalkDir(sandbox, func(p string, d fs.DirEntry, _ error) error {
		if p != sandbox && p != filepath.Join(sandbox, "a") && !strings.HasPrefix(p, dest) {
			t.Errorf("extraction wrote %s outside the destination", p)
		}
		return nil
	})
	return dest, stats, err
}

func both(t *testing.T, files ...testkit.File) map[Format][]byte {
	return map[Format][]byte{TarGz: testkit.TarGz(t, files...), Zip: testkit.Zip(t, files...)}
}

func TestExtract(t *testing.T) {
	for format, data := range both(t,
		testkit.File{Name: "./", Type: tar.TypeDir}, // GNU tar's root entry
		testkit.File{Name: "manifest.yaml", Body: "name: a\n"},
		testkit.File{Name: "assets/", Type: tar.TypeDir},
		testkit.File{Name: "assets/app.js", Body: "js"},
		testkit.File{Name: "./deep/er/x.txt", Body: "x"},
		testkit.File{Name: "run.sh", Body: "#!/bin/sh", Mode: 0o4755},
		testkit.File{Name: "current", Type: tar.TypeSymlink, Linkname: "assets"},
		testkit.File{Name: "assets/up", Type: tar.TypeSymlink, Linkname: "../manifest.yaml"},
	) {
		dest, stats, err := extractInto(t, data, format, DefaultLimits)
		if err != nil {
			t.Fatalf("format %d: %v", format, err)
		}
		want := map[string]string{
			"manifest.yaml": "name: a\n", "assets": "dir", "assets/app.js": "js", "deep": "dir", "deep/er": "dir",
			"deep/er/x.txt": "x", "run.sh": "#!/bin/sh", "current": "-> assets", "assets/up": "-> ../manifest.yaml",
		}
		got := testkit.Tree(t, dest)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("format %d: %s = %q, want %q", format, k, got[k], v)
			}
		}
		if len(got) != len(want) || stats.Files != 4 || stats.Bytes != int64(len("name: a\n")+2+1+9) {
			t.Errorf("format %d: tree %v stats %+v", format, got, stats)
		}
		info, _ := os.Stat(filepath.Join(dest, "run.sh"))
		if info.Mode().Perm() != 0o755 || info.Mode()&fs.ModeSetuid != 0 {
			t.Errorf("format %d: run.sh mode %v, want 0755 without setuid", format, info.Mode())
		}
	}
}

func TestExtractRefusesTraversal(t *testing.T) {
	tests := []struct {
		name  string
		files []testkit.File
		zip   bool // also as zip
	}{
		{"dot-dot", []testkit.File{{Name: "../evil.txt", Body: "x"}}, true},
		{"dot-dot inside", []testkit.File{{Name: "a/../../evil.txt", Body: "x"}}, true},
		{"harmless dot-dot", []testkit.File{{Name: "a/../b.txt", Body: "x"}}, true},
		{"absolute", []testkit.File{{Name: "/tmp/evil.txt", Body: "x"}}, true},
		{"drive letter", []testkit.File{{Name: "C:/evil.txt", Body: "x"}}, true},
		{"backslash", []testkit.File{{Name: `..\evil.txt`, Body: "x"}}, true},
		{"absolute link", []testkit.File{{Name: "l", Type: tar.TypeSymlink, Linkname: "/etc/passwd"}}, true},
		{"escaping link", []testkit.File{{Name: "d/l", Type: tar.TypeSymlink, Linkname: "../../x"}}, true},
		{"link chain escape", []testkit.File{
			{Name: "d", Type: tar.TypeSymlink, Linkname: "."},
			{Name: "d/l", Type: tar.TypeSymlink, Linkname: "../x"},
		}, true},
		{"write through escaping link", []testkit.File{
			{Name: "d", Type: tar.TypeSymlink, Linkname: "."},
			{Name: "d/e", Type: tar.TypeSymlink, Linkname: "../.."},
			{Name: "d/e/evil.txt", Body: "x"},
		}, false},
		{"hard link", []testkit.File{{Name: "f", Body: "x"}, {Name: "h", Type: tar.TypeLink, Linkname: "f"}}, false},
		{"hard link out", []testkit.File{{Name: "h", Type: tar.TypeLink, Linkname: "../../etc/passwd"}}, false},
		{"fifo", []testkit.File{{Name: "p", Type: tar.TypeFifo}}, false},
		{"char device", []testkit.File{{Name: "null", Type: tar.TypeChar}}, false},
		{"block device", []testkit.File{{Name: "sda", Type: tar.TypeBlock}}, false},
	}
	for _, tt := range tests {
		formats := map[Format][]byte{TarGz: testkit.TarGz(t, tt.files...)}
		if tt.zip {
			formats[Zip] = testkit.Zip(t, tt.files...)
		}
		for format, data := range formats {
			t.Run(tt.name, func(t *testing.T) {
				_, _, err := extractInto(t, data, format, DefaultLimits)
				if !IsCode(err, CodePathTraversal) {
					t.Fatalf("format %d: Extract = %v, want PATH_TRAVERSAL", format, err)
				}
			})
		}
	}
}

func TestExtractRefusesZipSpecialFiles(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "pipe"}
	h.SetMode(fs.ModeNamedPipe | 0o644)
	zw.CreateHeader(h)
	zw.Close()
	if _, _, err := extractInto(t, buf.Bytes(), Zip, DefaultLimits); !IsCode(err, CodePathTraversal) {
		t.Fatalf("zip fifo = %v", err)
	}
}

func TestExtractLimits(t *testing.T) {
	many := make([]testkit.File, 30)
	for i := range many {
		many[i] = testkit.File{Name: strings.Repeat("f", i+1), Body: "x"}
	}
	big := []testkit.File{{Name: "a", Body: strings.Repeat("a", 600)}, {Name: "b", Body: strings.Repeat("b", 600)}}
	for format, data := range both(t, many...) {
		_, _, err := extractInto(t, data, format, Limits{Unpacked: 1 << 20, Entries: 20})
		if !IsCode(err, CodeTooLarge) || !strings.Contains(err.Error(), "20 entries") || !strings.Contains(err.Error(), EntriesSetting) {
			t.Errorf("format %d entries: %v", format, err)
		}
	}
	for format, data := range both(t, big...) {
		_, _, err := extractInto(t, data, format, Limits{Unpacked: 1000, Entries: 100})
		if !IsCode(err, CodeTooLarge) || !strings.Contains(err.Error(), UnpackedSetting) {
			t.Errorf("format %d unpacked: %v", format, err)
		}
	}
}

// TestCompressionBombStopsAtTheLimit unpacks 64 files of 1 MiB of zeros, compressed to a few
// KiB, with a 5.5 MiB limit: extraction stops with at most the limit on disk.
func TestCompressionBombStopsAtTheLimit(t *testing.T) {
	zeros := strings.Repeat("\x00", 1<<20)
	files := make([]testkit.File, 64)
	for i := range files {
		files[i] = testkit.File{Name: fmt.Sprintf("z%02d", i), Body: zeros}
	}
	const limit = 5<<20 + 1<<19
	for format, data := range both(t, files...) {
		if len(data) > 1<<20 {
			t.Fatalf("the bomb is %d bytes; it should compress well", len(data))
		}
		dest, stats, err := extractInto(t, data, format, Limits{Unpacked: limit, Entries: 100})
		if !IsCode(err, CodeTooLarge) {
			t.Fatalf("format %d: %v", format, err)
		}
		if written := diskUsage(dest); written > limit || stats.Bytes > limit {
			t.Fatalf("format %d: %d bytes written (stats %d), limit %d", format, written, stats.Bytes, limit)
		}
	}
}

// TestUnpackedLimitHoldsAgainstLyingSizes feeds a file whose declared size is small but whose
// content is not: the bytes actually written are capped.
func TestUnpackedLimitHoldsAgainstLyingSizes(t *testing.T) {
	dir := t.TempDir()
	x := extractor{dest: openRoot(t, dir), limits: Limits{Unpacked: 1000}}
	err := x.file("f", 0o644, 10, strings.NewReader(strings.Repeat("y", 1<<20)))
	if !IsCode(err, CodeTooLarge) {
		t.Fatalf("file = %v", err)
	}
	if written := diskUsage(dir); written > 1001 {
		t.Fatalf("%d bytes written past a 1000-byte limit", written)
	}
}

func diskUsage(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, _ error) error {
		if info, err := d.Info(); err == nil && !d.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}

func TestExtractCorrupt(t *testing.T) {
	good := testkit.TarGz(t, testkit.File{Name: "a", Body: strings.Repeat("a", 5000)})
	for name, data := range map[string][]byte{
		"garbage":   []byte("not an archive at all"),
		"truncated": good[:len(good)/2],
	} {
		for _, format := range []Format{TarGz, Zip} {
			if _, _, err := extractInto(t, data, format, DefaultLimits); !IsCode(err, CodeInvalidArchive) {
				t.Errorf("%s as %d: %v", name, format, err)
			}
		}
	}
}

func TestFormatOf(t *testing.T) {
	for name, want := range map[string]Format{"a.tgz": TarGz, "a.tar.gz": TarGz, "A.TGZ": TarGz, "a.zip": Zip} {
		if got, err := FormatOf(name); err != nil || got != want {
			t.Errorf("FormatOf(%q) = %d, %v", name, got, err)
		}
	}
	for _, name := range []string{"a.tar", "a.gz", "a.rar", "zip", "a.zip.exe", ""} {
		if _, err := FormatOf(name); !IsCode(err, CodeInvalidFileType) {
			t.Errorf("FormatOf(%q) = %v", name, err)
		}
	}
}

// TestExtractRepeatedEntries lists a path more than once, directly or through a folder link:
// the last entry wins, as with tar, and the stats count what is on disk, not what was read.
func TestExtractRepeatedEntries(t *testing.T) {
	link := func(name, target string) testkit.File {
		return testkit.File{Name: name, Type: tar.TypeSymlink, Linkname: target}
	}
	for _, tc := range []struct {
		name  string
		files []testkit.File
		bytes int64
		count int
		code  string
	}{
		{"file twice", []testkit.File{{Name: "f", Body: "x"}, {Name: "f", Body: "fourteen bytes"}}, 14, 1, ""},
		{"file through a folder link", []testkit.File{link("d", "."), {Name: "f", Body: "abc"}, {Name: "d/f", Body: "de"}}, 2, 1, ""},
		{"link over a file", []testkit.File{{Name: "f", Body: "abc"}, link("f", "g")}, 0, 0, ""},
		{"file over a link", []testkit.File{link("a", "b"), {Name: "a", Body: "xyz"}}, 3, 1, ""},
		{"link over a folder", []testkit.File{{Name: "x/f", Body: "abc"}, link("x", "y")}, 0, 0, CodeInvalidArchive},
		{"folder over a file", []testkit.File{{Name: "f", Body: "abc"}, {Name: "f/", Type: tar.TypeDir}}, 0, 0, CodeInvalidArchive},
	} {
		for format, data := range both(t, tc.files...) {
			t.Run(fmt.Sprintf("%s/%d", tc.name, format), func(t *testing.T) {
				dest, stats, err := extractInto(t, data, format, DefaultLimits)
				if tc.code != "" {
					if !IsCode(err, tc.code) {
						t.Fatalf("err = %v, want %s", err, tc.code)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if stats.Bytes != tc.bytes || stats.Files != tc.count || regularBytes(dest) != tc.bytes {
					t.Fatalf("stats %d bytes in %d files, disk %d; want %d in %d", stats.Bytes, stats.Files, regularBytes(dest), tc.bytes, tc.count)
				}
			})
		}
	}
}

func regularBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, _ error) error {
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n
}

// TestParallelExtraction extracts archives with the file writers (on goroutines, and inline as
// a paced extraction does) and one entry at a time: the trees, the stats and the refusals are
// the same, and the writers did write.
func TestParallelExtraction(t *testing.T) {
	link := func(name, target string) testkit.File {
		return testkit.File{Name: name, Type: tar.TypeSymlink, Linkname: target}
	}
	var many []testkit.File
	for i := range 600 {
		body := strings.Repeat(fmt.Sprint(i%10), i%7*100)
		if i%150 == 0 {
			body = strings.Repeat("L", maxBuffered+1+i) // written as it is read
		}
		many = append(many, testkit.File{Name: fmt.Sprintf("d%03d/sub/f%d.txt", i%300, i), Body: body, Mode: 0o644 | fs.FileMode(i%2)*0o111})
	}
	for _, tc := range []struct {
		name     string
		files    []testkit.File
		parallel int // at least this many files by the writers
		code     string
	}{
		{"many folders", many, 500, ""},
		{"folder entries", []testkit.File{{Name: "a/", Type: tar.TypeDir}, {Name: "a/b/", Type: tar.TypeDir}, {Name: "a/b/c", Body: "c"}, {Name: "x", Body: "x"}}, 2, ""},
		{"a name twice", []testkit.File{{Name: "a/f", Body: "one"}, {Name: "a/g", Body: "g"}, {Name: "a/f", Body: "three"}}, 2, ""},
		{"names apart by case only", []testkit.File{{Name: "README", Body: "1"}, {Name: "readme", Body: "22"}, {Name: "D/x", Body: "x"}, {Name: "d/y", Body: "y"}}, 1, ""},
		{"a link, then files through it", []testkit.File{{Name: "x/f", Body: "f"}, link("l", "x"), {Name: "l/g", Body: "g"}, {Name: "y/h", Body: "h"}}, 1, ""},
		{"a folder where a file is", []testkit.File{{Name: "f", Body: "f"}, {Name: "f/", Type: tar.TypeDir}}, 0, CodeInvalidArchive},
		{"a file in a file", []testkit.File{{Name: "f", Body: "f"}, {Name: "f/g", Body: "g"}}, 0, CodeInvalidArchive},
		{"a file where a folder is", []testkit.File{{Name: "d/f", Body: "f"}, {Name: "d", Body: "d"}}, 0, CodeInvalidArchive},
		{"a link out after files", []testkit.File{{Name: "a/f", Body: "f"}, link("a/l", "../../out")}, 0, CodePathTraversal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := testkit.TarGz(t, tc.files...)
			// writers: -1 one entry at a time, 0 inline (a paced extraction), else goroutines.
			extract := func(writers int) (map[string]string, Stats, error, int64) {
				dest := t.TempDir()
				x := extractor{dest: openRoot(t, dest), limits: DefaultLimits}
				var written *atomic.Int64
				if writers >= 0 {
					x.startWriters(writers)
					written = &x.w.written
				}
				err := x.finish(x.tarGz(bytes.NewReader(data)))
				if err == nil {
					err = x.checkLinks()
				}
				if x.w != nil || len(x.dirs) != 0 {
					t.Fatal("the writers or their folders are left open")
				}
				var n int64
				if written != nil {
					n = written.Load()
				}
				tree := testkit.Tree(t, dest)
				for name, body := range tree { // with the modes of files
					if info, err := os.Lstat(filepath.Join(dest, name)); err == nil && info.Mode().IsRegular() {
						tree[name] = fmt.Sprintf("%v %s", info.Mode(), body)
					}
				}
				return tree, x.stats, err, n
			}
			wantTree, wantStats, wantErr, _ := extract(-1)
			for _, writers := range []int{writerCount(), 0} {
				how := fmt.Sprintf("%d writers", writers)
				if writers == 0 {
					how = "inline"
				}
				tree, stats, err, written := extract(writers)
				if tc.code != "" {
					if !IsCode(err, tc.code) || !IsCode(wantErr, tc.code) {
						t.Fatalf("%s: %v; one at a time: %v; want %s", how, err, wantErr, tc.code)
					}
					continue
				}
				if err != nil || wantErr != nil {
					t.Fatalf("%s: %v; one at a time: %v", how, err, wantErr)
				}
				if !reflect.DeepEqual(tree, wantTree) || stats != wantStats {
					t.Fatalf("%s wrote %v (%+v)\none at a time %v (%+v)", how, tree, stats, wantTree, wantStats)
				}
				if written < int64(tc.parallel) {
					t.Fatalf("%s: the writers wrote %d files, want at least %d", how, written, tc.parallel)
				}
			}
		})
	}
}

// TestExtractIntoFolderWithFiles writes one entry at a time into a folder that holds files
// already, replacing them as an archive's own entries would be.
func TestExtractIntoFolderWithFiles(t *testing.T) {
	dest := t.TempDir()
	if err := os.WriteFile(filepath.Join(dest, "f"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := testkit.TarGz(t, testkit.File{Name: "f", Body: "new"}, testkit.File{Name: "g", Body: "g"})
	if _, err := ExtractTarGz(bytes.NewReader(data), openRoot(t, dest), DefaultLimits); err != nil {
		t.Fatal(err)
	}
	if got := testkit.Tree(t, dest); got["f"] != "new" || got["g"] != "g" {
		t.Fatalf("tree %v", got)
	}
}
