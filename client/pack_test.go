package client

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/packages"
)

func TestIgnoreRules(t *testing.T) {
	rules := parseIgnore(append(skippedByDefault, "# a comment", "*.log", "/build/", "docs/draft.md", "!keep.log", "cache/"))
	for _, tt := range []struct {
		name string
		dir  bool
		skip bool
	}{
		{".git", true, true},
		{"node_modules", true, true},
		{"web/node_modules", true, true},
		{IgnoreFile, false, true},
		{"app.log", false, true},
		{"deep/er/app.log", false, true},
		{"keep.log", false, false},
		{"build", true, true},
		{"src/build", true, false}, // rooted: only at the top
		{"build", false, false},    // a file, and the rule names folders
		{"docs/draft.md", false, true},
		{"other/docs/draft.md", false, false},
		{"cache", true, true},
		{"index.html", false, false},
	} {
		if got := rules.skips(tt.name, tt.dir); got != tt.skip {
			t.Errorf("skips(%q, dir=%v) = %v, want %v", tt.name, tt.dir, got, tt.skip)
		}
	}
	if parseIgnore(append(skippedByDefault, "!node_modules/")).skips("node_modules", true) {
		t.Error("!node_modules/ does not take node_modules back in")
	}
}

func TestPack(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("manifest.yaml", "name: site\nversion: 1.2.0\n")
	write("index.html", "<p>hi</p>")
	write("assets/app.js", "1")
	write(".git/HEAD", "ref")
	write("node_modules/x/index.js", "x")
	write("debug.log", "noise")
	write(IgnoreFile, "*.log\n")
	if err := os.Symlink("index.html", filepath.Join(dir, "home.html")); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	p, err := Pack(dir, &out)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(out.Bytes())
	if p.Name != "site" || p.Version != "1.2.0" || p.Files != 4 || p.Bytes != int64(out.Len()) || p.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("packed = %+v (archive of %d bytes)", p, out.Len())
	}
	zr, err := gzip.NewReader(&out)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		if hdr.Name == "home.html" && (hdr.Typeflag != tar.TypeSymlink || hdr.Linkname != "index.html") {
			t.Errorf("home.html packed as type %c to %q, want the link", hdr.Typeflag, hdr.Linkname)
		}
	}
	want := []string{"assets/", "assets/app.js", "home.html", "index.html", "manifest.yaml"}
	if !slices.Equal(names, want) {
		t.Errorf("archive holds %v, want %v", names, want)
	}

	for _, tt := range []struct{ manifest, want string }{
		{"name: Bad Name\n", "package name"},
		{"name: ok\nversion: one\n", "version"},
	} {
		bad := t.TempDir()
		if err := os.WriteFile(filepath.Join(bad, "manifest.yaml"), []byte(tt.manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Pack(bad, io.Discard); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("packing %q: %v, want an error about the %s", tt.manifest, err, tt.want)
		}
	}
	if _, err := Pack(t.TempDir(), io.Discard); err == nil || !strings.Contains(err.Error(), "no manifest.yaml or package.json") {
		t.Errorf("packing an empty folder: %v", err)
	}
}

// TestPackIncludes checks that the manifest's deploy.include takes node_modules back in.
func TestPackIncludes(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"manifest.yaml":           "name: api\nversion: 1.0.0\ndeploy:\n  include: [node_modules]\n",
		"node_modules/x/index.js": "x",
		".git/HEAD":               "ref",
	})
	p, err := Pack(dir, io.Discard)
	if err != nil || p.Files != 2 {
		t.Errorf("packed %+v, %v; want the manifest and node_modules/x/index.js", p, err)
	}
}

// TestPackIsTheEnginesArchive: a deploy's archive is the one the runtime's own packer
// (packages.Pack, which cluster publish uses) writes of the tree it installs, so the same
// folder gives the same bytes and sha256 whatever its files' times, and what the ignore rules
// leave out or cannot be packed (a socket) is absent from both.
func TestPackIsTheEnginesArchive(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"manifest.yaml":           "name: site\nversion: 1.0.0\n",
		"index.html":              "<p>hi</p>",
		"bin/run.sh":              "#!/bin/sh\n",
		"empty/":                  "",
		"node_modules/x/index.js": "x",
		"debug.log":               "noise",
		IgnoreFile:                "*.log\n",
	})
	if err := os.Chmod(filepath.Join(dir, "bin/run.sh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("index.html", filepath.Join(dir, "home.html")); err != nil {
		t.Fatal(err)
	}
	if l, err := net.Listen("unix", filepath.Join(dir, "s.sock")); err == nil {
		t.Cleanup(func() { l.Close() })
	}

	var first bytes.Buffer
	p, err := Pack(dir, &first)
	if err != nil {
		t.Fatal(err)
	}
	if p.Files != 4 {
		t.Errorf("packed %d files and links, want 4: the manifest, index.html, run.sh and the link home.html", p.Files)
	}
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, name := range []string{"manifest.yaml", "index.html", "bin/run.sh", "bin", "empty"} {
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(name)), old, old); err != nil {
			t.Fatal(err)
		}
	}
	var again bytes.Buffer
	if _, err := Pack(dir, &again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), again.Bytes()) {
		t.Error("the folder packs to other bytes once its files' times change")
	}

	installed, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer installed.Close()
	if _, err := packages.ExtractTarGz(bytes.NewReader(first.Bytes()), installed, packages.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	var engine bytes.Buffer
	if _, err := packages.Pack(installed, &engine, packages.PackOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), engine.Bytes()) {
		t.Errorf("the deploy's archive (%d bytes) is not the engine's archive of the tree it installs (%d bytes)", first.Len(), engine.Len())
	}
}

// writeTree writes files (slash-separated names; one ending in "/" is a folder) into a new
// folder, and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		folder := filepath.Dir(p)
		if strings.HasSuffix(name, "/") {
			folder = p
		}
		if err := os.MkdirAll(folder, 0o755); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, "/") {
			continue
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
