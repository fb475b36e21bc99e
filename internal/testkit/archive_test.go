package testkit

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"testing"
)

// TestArchivesKeepEntriesAsWritten checks that hostile entries survive into the archive
// unchanged, since later tests rely on them to attack the extractor.
func TestArchivesKeepEntriesAsWritten(t *testing.T) {
	files := []File{
		{Name: "package/manifest.yaml", Body: "name: demo\n"},
		{Name: "../escape.txt", Body: "x"},
		{Name: "/abs.txt", Body: "y"},
		{Name: "dir/", Type: tar.TypeDir},
		{Name: "link", Type: tar.TypeSymlink, Linkname: "../../etc/passwd"},
		{Name: "run.sh", Body: "#!/bin/sh\n", Mode: 0o755},
	}

	gz, err := gzip.NewReader(bytes.NewReader(TarGz(t, files...)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for _, want := range files {
		hdr, err := tr.Next()
		if err != nil {
			t.Fatalf("tar entry %s: %v", want.Name, err)
		}
		body, _ := io.ReadAll(tr)
		if hdr.Name != want.Name || hdr.Linkname != want.Linkname || string(body) != want.Body || fs.FileMode(hdr.Mode) != want.mode() {
			t.Errorf("tar entry = %q -> %q %q mode %o, want %+v", hdr.Name, hdr.Linkname, body, hdr.Mode, want)
		}
	}

	data := Zip(t, files...)
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != len(files) {
		t.Fatalf("zip has %d entries, want %d", len(zr.File), len(files))
	}
	for i, f := range zr.File {
		if f.Name != files[i].Name {
			t.Errorf("zip entry %d = %q, want %q", i, f.Name, files[i].Name)
		}
	}
	if link := zr.File[4]; link.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("zip symlink mode = %v", link.Mode())
	}
	if dir := zr.File[3]; !dir.Mode().IsDir() {
		t.Errorf("zip dir mode = %v", dir.Mode())
	}
}
