package packages

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// packTime is the time of every entry Pack writes: a tree's own times are not part of the
// package, and the same tree must pack to the same bytes.
var packTime = time.Unix(0, 0).UTC()

// Pack writes the tree of root as a gzip-compressed tar (.tgz) that Stage accepts back
// unchanged: its files at the archive's root, the manifest among them, every folder (empty
// ones too), each file's executable bit (the only mode bits an extraction keeps) and its
// links. The entries come in name order with one fixed time, no owner and fixed modes, so
// the same tree packs to the same bytes, and the same SHA-256, with the same build.
//
// A link must stay inside the tree as an extraction requires, and a special file (a socket,
// a FIFO, a device) cannot be packed: either is an error naming it, as is a file that changes
// size while it is read.
func Pack(root *os.Root, w io.Writer) error {
	gz, _ := gzip.NewWriterLevel(w, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	err := fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		hdr := &tar.Header{Name: name, ModTime: packTime, Format: tar.FormatPAX}
		switch t := d.Type(); {
		case t.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, name+"/", 0o755
			return tw.WriteHeader(hdr)
		case t&fs.ModeSymlink != 0:
			target, err := root.Readlink(name)
			if err != nil {
				return err
			}
			if err := checkLink(name, target); err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, target, 0o777
			return tw.WriteHeader(hdr)
		case t.IsRegular():
			return packFile(root, tw, hdr)
		}
		return fmt.Errorf("%s is a special file (%v); only files, folders and links can be packed", name, d.Type())
	})
	if err != nil {
		return fmt.Errorf("packing %s: %w", root.Name(), err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("packing %s: %w", root.Name(), err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("packing %s: %w", root.Name(), err)
	}
	return nil
}

// packFile writes the regular file hdr names, with the size of the file as opened.
func packFile(root *os.Root, tw *tar.Writer, hdr *tar.Header) error {
	f, err := root.Open(hdr.Name)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s changed while it was packed", hdr.Name)
	}
	hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeReg, info.Size(), 0o644
	if info.Mode()&0o111 != 0 {
		hdr.Mode = 0o755
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, io.LimitReader(f, hdr.Size))
	if err != nil {
		return err
	}
	if n != hdr.Size {
		return fmt.Errorf("%s changed while it was packed", hdr.Name)
	}
	return nil
}
