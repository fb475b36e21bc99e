package testkit

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// File is one entry of a test archive. The zero Type is a regular file.
type File struct {
	Name     string
	Body     string
	Mode     fs.FileMode // permission bits; 0644 (0755 for dirs) when zero
	Type     byte        // tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink, tar.TypeFifo, tar.TypeChar
	Linkname string      // target of a link
}

var archiveTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func (f File) mode() fs.FileMode {
	switch {
	case f.Mode != 0:
		return f.Mode
	case f.Type == tar.TypeDir:
		return 0o755
	}
	return 0o644
}

// TarGz builds a gzip-compressed tar archive of files, written exactly as given (no entry
// name is cleaned), so tests can craft hostile archives.
func TarGz(tb testing.TB, files ...File) []byte {
	tb.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		typ := f.Type
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: f.Name, Mode: int64(f.mode()), Typeflag: typ, Linkname: f.Linkname, ModTime: archiveTime, Format: tar.FormatPAX}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(f.Body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			tb.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(f.Body)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// Zip builds a zip archive of files; symlinks are stored as zip does (mode bit plus the
// target as content).
func Zip(tb testing.TB, files ...File) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		hdr := &zip.FileHeader{Name: f.Name, Method: zip.Deflate, Modified: archiveTime}
		body := f.Body
		switch f.Type {
		case tar.TypeDir:
			hdr.SetMode(fs.ModeDir | f.mode())
		case tar.TypeSymlink:
			hdr.SetMode(fs.ModeSymlink | 0o777)
			body = f.Linkname
		default:
			hdr.SetMode(f.mode())
		}
		w, err := zw.CreateHeader(hdr)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// Tree describes what lies below dir, to compare trees: each path (slash-separated, relative
// to dir) → the file's content, "dir" for a folder, "-> target" for a link.
func Tree(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
		case d.IsDir():
			out[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
