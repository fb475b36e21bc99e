package packages

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// fuzzLimits are small, so the fuzzer explores the limits too.
var fuzzLimits = Limits{Unpacked: 64 << 10, Entries: 64}

// FuzzExtract feeds arbitrary bytes to the extractor as a .tgz or a .zip. Whatever the input,
// it must not panic, must write nothing outside the destination, must keep no more than the
// unpacked limit on disk, must leave no link resolving outside, and must refuse with a
// package error (a code for the API), never another error.
func FuzzExtract(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed.data, seed.zip)
	}
	f.Fuzz(func(t *testing.T, data []byte, isZip bool) {
		sandbox := t.TempDir()
		dest := filepath.Join(sandbox, "a", "dest")
		if err := os.MkdirAll(dest, 0o755); err != nil {
			t.Fatal(err)
		}
		root, err := os.OpenRoot(dest)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		format := TarGz
		if isZip {
			format = Zip
		}
		stats, err := Extract(bytes.NewReader(data), int64(len(data)), format, root, fuzzLimits)
		var pe *Error
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("Extract returned a %T, not a package error: %v", err, err)
		}
		var onDisk int64
		filepath.WalkDir(sandbox, func(p string, d fs.DirEntry, werr error) error {
			if werr != nil {
				return nil
			}
			if p != sandbox && p != filepath.Dir(dest) && p != dest && !strings.HasPrefix(p, dest+string(filepath.Separator)) {
				t.Fatalf("wrote %s outside the destination", p)
			}
			info, _ := d.Info()
			if info.Mode().IsRegular() {
				onDisk += info.Size()
			}
			if err == nil && d.Type()&fs.ModeSymlink != 0 {
				rel, _ := filepath.Rel(dest, p)
				if _, serr := root.Stat(rel); serr != nil && !errors.Is(serr, fs.ErrNotExist) {
					t.Fatalf("link %s does not resolve inside: %v", rel, serr)
				}
			}
			return nil
		})
		if onDisk > fuzzLimits.Unpacked+1 {
			t.Fatalf("%d bytes on disk, limit %d", onDisk, fuzzLimits.Unpacked)
		}
		if err == nil && stats.Bytes != onDisk {
			t.Fatalf("stats say %d bytes, disk holds %d", stats.Bytes, onDisk)
		}
	})
}

type fuzzSeed struct {
	name string
	data []byte
	zip  bool
}

// fuzzSeeds are well-formed and hostile archives in both formats.
func fuzzSeeds(tb testing.TB) []fuzzSeed {
	sets := map[string][]testkit.File{
		"package": {{Name: "package/", Type: tar.TypeDir}, {Name: "package/manifest.yaml", Body: "name: a\n"}, {Name: "package/x/y.js", Body: "y"}},
		"root":    {{Name: "./", Type: tar.TypeDir}, {Name: "manifest.yaml", Body: "name: a\n"}, {Name: "run.sh", Body: "#!/bin/sh", Mode: 0o755}},
		"dotdot":  {{Name: "../../evil", Body: "x"}},
		"abs":     {{Name: "/etc/evil", Body: "x"}},
		"links": {
			{Name: "ok", Type: tar.TypeSymlink, Linkname: "x/y.js"},
			{Name: "d", Type: tar.TypeSymlink, Linkname: "."},
			{Name: "d/l", Type: tar.TypeSymlink, Linkname: "../out"},
		},
		"hardlink": {{Name: "f", Body: "x"}, {Name: "h", Type: tar.TypeLink, Linkname: "f"}},
		"fifo":     {{Name: "p", Type: tar.TypeFifo}},
		"bomb":     {{Name: "z", Body: strings.Repeat("\x00", 256<<10)}},
		"replace":  {{Name: "a", Type: tar.TypeSymlink, Linkname: "b"}, {Name: "a", Body: "file over link"}},
		"twice":    {{Name: "f", Body: "x"}, {Name: "f", Body: "fourteen bytes"}, {Name: "f", Type: tar.TypeSymlink, Linkname: "g"}},
		"alias":    {{Name: "d", Type: tar.TypeSymlink, Linkname: "."}, {Name: "f", Body: "abc"}, {Name: "d/f", Body: "de"}},
	}
	var seeds []fuzzSeed
	for name, files := range sets {
		seeds = append(seeds, fuzzSeed{name + "-tgz", testkit.TarGz(tb, files...), false})
		seeds = append(seeds, fuzzSeed{name + "-zip", testkit.Zip(tb, files...), true})
	}
	return seeds
}

var writeSeeds = flag.Bool("write-fuzz-seeds", false, "write the seed corpus of FuzzExtract to testdata/fuzz")

// TestWriteFuzzSeeds writes the seeds as corpus files, to be committed:
// go test ./packages -run TestWriteFuzzSeeds -write-fuzz-seeds
func TestWriteFuzzSeeds(t *testing.T) {
	if !*writeSeeds {
		t.Skip("run with -write-fuzz-seeds to regenerate testdata/fuzz/FuzzExtract")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzExtract")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range fuzzSeeds(t) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%t)\n", s.data, s.zip)
		if err := os.WriteFile(filepath.Join(dir, "seed-"+s.name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
