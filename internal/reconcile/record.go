package reconcile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/caddy-runtime/runtime/packages"
)

// A record says which archive of the package store an installed tree came from. It lies in
// packages.UnitsFolder at the top of the catalog folder that holds the tree, under the tree's
// own relative path: .runtime-units/<name>/<version>.json for a worker version,
// .runtime-units/<name>.json for a plugin. There, and not in the tree, it is never served,
// never part of what a file manager download or a worker sees, and an archive cannot carry a
// forged one; the catalog skips the folder (its name starts with '.') and the file manager
// hides it (packages.InternalPrefix).
//
// A tree without a record was installed on this instance outside the reconciler (before the
// cluster existed): it is left alone unless a row names the same unit version, which then
// replaces it. An install records an empty sum before it swaps the tree in and the archive's
// sum after, so a crash in between leaves a tree the next pass installs again, never a tree
// recorded as an archive it may not be.
type record struct {
	SHA256 string `json:"sha256"` // "" while an install is under way
}

const (
	recordSuffix = ".json"
	maxRecord    = 4 << 10
)

func recordPath(rel string) string { return path.Join(packages.UnitsFolder, rel) + recordSuffix }

// writeRecord records sum for the tree at rel of root, replacing the record at once.
func writeRecord(root *os.Root, rel, sum string) error {
	name := recordPath(rel)
	if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
		return fmt.Errorf("recording the archive of %s: %w", rel, err)
	}
	body, _ := json.Marshal(record{SHA256: sum})
	if err := packages.WriteFileAtomic(root, name, append(body, '\n')); err != nil {
		return fmt.Errorf("recording the archive of %s: %w", rel, err)
	}
	return nil
}

// readRecord reads the record of the tree at rel: its sum ("" while an install was under way,
// or for a damaged record) and whether there is one.
func readRecord(root *os.Root, rel string) (string, bool, error) {
	body, err := root.ReadFile(recordPath(rel))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("reading the record of %s: %w", rel, err)
	}
	var r record
	if len(body) > maxRecord || json.Unmarshal(body, &r) != nil {
		return "", true, nil // someone else's bytes: installed by the reconciler, from an unknown archive
	}
	return r.SHA256, true, nil
}

// removeRecord removes the record of rel, and the folders it leaves empty, UnitsFolder too.
func removeRecord(root *os.Root, rel string) error {
	name := recordPath(rel)
	if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the record of %s: %w", rel, err)
	}
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if root.Remove(dir) != nil { // not empty
			break
		}
	}
	return nil
}

// readRecords reads every record of a catalog folder of layout, by the relative path of its
// tree. Records under names no unit can have are ignored; what an interrupted write left is
// removed.
func readRecords(root *os.Root, layout packages.Layout) (map[string]string, error) {
	out := map[string]string{}
	err := fs.WalkDir(root.FS(), packages.UnitsFolder, func(p string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		case strings.HasPrefix(d.Name(), packages.TempPrefix):
			_ = root.RemoveAll(p)
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		case !d.Type().IsRegular() || !strings.HasSuffix(p, recordSuffix):
			return nil
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(p, packages.UnitsFolder+"/"), recordSuffix)
		name, version := rel, ""
		if layout.Versioned {
			name, version = path.Dir(rel), path.Base(rel)
			if packages.ValidateVersion(version) != nil {
				return nil
			}
		}
		if packages.ValidateName(name) != nil {
			return nil
		}
		sum, _, err := readRecord(root, rel)
		if err != nil {
			return err
		}
		out[rel] = sum
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the records in %s: %w", packages.UnitsFolder, err)
	}
	return out, nil
}
