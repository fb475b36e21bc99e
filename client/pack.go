package client

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/caddy-runtime/runtime/packages"
)

// IgnoreFile names the patterns a deploy leaves out of the archive, one per line, as in
// .gitignore: "#" starts a comment, a pattern without "/" matches a name at any depth, one
// with "/" a path from the folder, a trailing "/" only folders, and "!" takes a name back in.
const IgnoreFile = ".runtimeignore"

// skippedByDefault are left out unless the ignore file takes them back ("!node_modules").
var skippedByDefault = []string{".git/", "node_modules/", IgnoreFile}

// Packed is a folder packed for upload.
type Packed struct {
	Name, Version string
	Files         int    // regular files and links in the archive
	Bytes         int64  // the archive's size
	SHA256        string // the archive's digest, hex
}

// Pack reads the package in dir (its manifest.yaml or package.json), checks its name and
// version with the runtime's own rules, and writes it as a .tgz to w with the runtime's packer
// (packages.Pack: the same tree gives the same bytes), leaving out .git, node_modules (unless
// the manifest's deploy.include names it), what the ignore file names, and sockets, devices and
// pipes, which are not package content. Files are read through dir as an os.Root, so links are
// packed as links, never followed.
func Pack(dir string, w io.Writer) (Packed, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Packed{}, fmt.Errorf("opening the folder to deploy: %w", err)
	}
	defer root.Close()
	md, err := packages.ReadMetadata(root, ".")
	if errors.Is(err, packages.ErrNoMetadata) {
		return Packed{}, fmt.Errorf("%s has no manifest.yaml or package.json: a package names itself in one of them", dir)
	}
	if err != nil {
		return Packed{}, err
	}
	if err := packages.ValidateName(md.Name); err != nil {
		return Packed{}, fmt.Errorf("the package name %q: %w", md.Name, err)
	}
	if err := packages.ValidateVersion(md.Version); err != nil {
		return Packed{}, fmt.Errorf("the version %q of %s: %w", md.Version, md.Name, err)
	}
	var keys packages.DeployKeys
	if err := md.Decode(&keys); err != nil {
		return Packed{}, err
	}
	ignore, err := readIgnore(root, keys.Deploy.Include)
	if err != nil {
		return Packed{}, err
	}

	sum := sha256.New()
	size := &byteCount{}
	files, err := packages.Pack(root, io.MultiWriter(w, sum, size), packages.PackOptions{Skip: func(name string, d fs.DirEntry) bool {
		if t := d.Type(); !t.IsDir() && !t.IsRegular() && t&fs.ModeSymlink == 0 {
			return true
		}
		return ignore.skips(name, d.IsDir())
	}})
	if err != nil {
		return Packed{}, err
	}
	return Packed{Name: md.Name, Version: md.Version, Files: files, Bytes: size.n, SHA256: hex.EncodeToString(sum.Sum(nil))}, nil
}

type byteCount struct{ n int64 }

func (c *byteCount) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// ignoreRule is one line of the ignore file.
type ignoreRule struct {
	pattern string
	dirOnly bool // a trailing "/"
	rooted  bool // has a "/" before its end: matched against the whole path
	negate  bool
}

type ignoreRules []ignoreRule

func parseIgnore(lines []string) ignoreRules {
	var rules ignoreRules
	for _, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := ignoreRule{}
		if r.negate = strings.HasPrefix(line, "!"); r.negate {
			line = line[1:]
		}
		if r.dirOnly = strings.HasSuffix(line, "/"); r.dirOnly {
			line = strings.TrimSuffix(line, "/")
		}
		r.rooted = strings.Contains(line, "/")
		r.pattern = strings.TrimPrefix(line, "/")
		rules = append(rules, r)
	}
	return rules
}

// readIgnore reads the ignore file after the default rules, and the names the manifest's
// deploy.include takes back in.
func readIgnore(root *os.Root, include []string) (ignoreRules, error) {
	lines := slices.Clone(skippedByDefault)
	for _, name := range include {
		lines = append(lines, "!"+name)
	}
	f, err := root.Open(IgnoreFile)
	if errors.Is(err, fs.ErrNotExist) {
		return parseIgnore(lines), nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		lines = append(lines, s.Text())
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", IgnoreFile, err)
	}
	return parseIgnore(lines), nil
}

// skips reports whether the path name (slash-separated, relative to the folder) is left out:
// the last rule that matches decides.
func (rules ignoreRules) skips(name string, dir bool) bool {
	skip := false
	for _, r := range rules {
		if r.dirOnly && !dir {
			continue
		}
		subject := path.Base(name)
		if r.rooted {
			subject = name
		}
		if ok, _ := path.Match(r.pattern, subject); ok {
			skip = !r.negate
		}
	}
	return skip
}
