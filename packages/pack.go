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

// PackOptions change what Pack leaves out.
type PackOptions struct {
	// Skip, when set, leaves out the entry name (slash-separated, relative to the root) and,
	// for a folder, all it holds: a deploy's ignore rules, and the special files it passes over.
	Skip func(name string, d fs.DirEntry) bool
}

// Pack writes the tree of root as a gzip-compressed tar (.tgz) that Stage accepts back
// unchanged: its files at the archive's root, the manifest among them, every folder (empty
// ones too), each file's executable bit (the only mode bits an extraction keeps) and its
// links. The entries come in name order with one fixed time, no owner and fixed modes, so
// the same tree packs to the same bytes, and the same SHA-256, with the same build. It is the
// one packer: cluster publish packs installed trees with it, and a deploy (client.Pack) the
// folder it uploads. It returns how many files and links it wrote.
//
// A link must stay inside the tree as an extraction requires, and a special file (a socket,
// a FIFO, a device) cannot be packed: either is an error naming it, as is a file that changes
// size while it is read.
func Pack(root *os.Root, w io.Writer, opts PackOptions) (files int, err error) {
	gz, _ := gzip.NewWriterLevel(w, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		if opts.Skip != nil && opts.Skip(name, d) {
			if d.IsDir() {
				return fs.SkipDir
			}
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
			files++
			return tw.WriteHeader(hdr)
		case t.IsRegular():
			files++
			return packFile(root, tw, hdr)
		}
		return fmt.Errorf("%s is a special file (%v); only files, folders and links can be packed", name, d.Type())
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = gz.Close()
	}
	if err != nil {
		return 0, fmt.Errorf("packing %s: %w", root.Name(), err)
	}
	return files, nil
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
