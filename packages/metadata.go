package packages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync/atomic"

	"gopkg.in/yaml.v3"
)

// Metadata files, in the order they are looked for.
const (
	ManifestYAML = "manifest.yaml"
	ManifestYML  = "manifest.yml"
	PackageJSON  = "package.json"
)

// maxMetadataSize bounds a metadata file.
const maxMetadataSize = 1 << 20

// Metadata is what a package says about itself.
type Metadata struct {
	Name    string
	Version string // Latest when the package declares none
	Enabled bool   // manifest key enabled; true when absent
	// Manifest is the manifest file's name, or "" when only package.json exists.
	Manifest string
	// Entry is the entry file found in the package's folder (see FindEntry): the manifest's
	// entrypoint if that file exists, else the first of EntryFiles there; "" when none is, or
	// when the metadata was read without its folder. Module is the first of EntryFiles there
	// that is a JavaScript or TypeScript module (index.ts beside an index.html).
	Entry  string
	Module string
	// doc is the parsed manifest, kept so later readers can decode their own keys.
	doc *yaml.Node
	// serial tells reads apart: every read gets a new one.
	serial uint64
}

// Serial identifies this read of the metadata: a later read of the same package, after a
// change, has another serial, so a cache of what was derived from it knows to drop it.
func (m Metadata) Serial() uint64 { return m.serial }

var metadataReads atomic.Uint64

// Decode decodes the manifest's keys into v (a struct with yaml tags); without a manifest it
// leaves v unchanged.
func (m Metadata) Decode(v any) error {
	if m.doc == nil {
		return nil
	}
	if err := m.doc.Decode(v); err != nil {
		return newErr(Invalid, CodeInvalidManifest, "%s: %v", m.Manifest, err)
	}
	return nil
}

// declares reports whether the manifest itself sets the name and version, so no other
// metadata file can change them.
func (m Metadata) declares() bool {
	var keys manifestKeys
	return m.doc != nil && m.doc.Decode(&keys) == nil && keys.Name != nil && keys.Version != nil
}

// ErrNoMetadata means a folder holds no manifest.yaml, manifest.yml or package.json.
var ErrNoMetadata = errors.New("no package metadata")

// MetadataFiles are the files a package's metadata is read from, at the top of its folder.
var MetadataFiles = []string{ManifestYAML, ManifestYML, PackageJSON}

// ReadMetadata reads the metadata of the package in folder dir of root: manifest.yaml or
// manifest.yml, and package.json, with the manifest's values winning.
func ReadMetadata(root *os.Root, dir string) (Metadata, error) {
	md, err := ReadMetadataFiles(func(name string) ([]byte, error) {
		return ReadMetadataFile(root, path.Join(dir, name))
	})
	if err == nil {
		md.FindEntry(root, dir)
	}
	return md, err
}

// EntryFiles are the files a package's entry is looked for among, in this order, when its
// manifest names no entrypoint that exists (as the older implementation looked): an HTML page
// first, then the JavaScript and TypeScript modules.
var EntryFiles = []string{"index.html", "index.ts", "index.js", "index.mjs", "index.tsx", "index.jsx", "index.mts", "index.cjs"}

// FindEntry sets m.Entry and m.Module from the package in folder dir of root: the manifest's entrypoint
// when it names a regular file inside the folder, else the first of EntryFiles that is one.
func (m *Metadata) FindEntry(root *os.Root, dir string) {
	var keys struct {
		Entrypoint string `yaml:"entrypoint"`
	}
	_ = m.Decode(&keys) // a bad manifest is reported by its reader
	m.Entry, m.Module = "", ""
	for i, name := range append([]string{keys.Entrypoint}, EntryFiles...) {
		file := path.Clean(name)
		if name == "" || !filepath.IsLocal(file) {
			continue
		}
		if info, err := root.Stat(path.Join(dir, file)); err != nil || !info.Mode().IsRegular() {
			continue
		}
		if m.Entry == "" {
			m.Entry = file
		}
		if i > 1 && m.Module == "" { // EntryFiles[1:], past index.html
			m.Module = file
		}
	}
}

// ReadMetadataFiles reads package metadata through read, which returns the content of one of
// MetadataFiles or an error wrapping fs.ErrNotExist when the package has no such file. The
// file manager reads a package's metadata as a change would leave it this way.
func ReadMetadataFiles(read func(name string) ([]byte, error)) (Metadata, error) {
	md := Metadata{Enabled: true, serial: metadataReads.Add(1)}
	var fromJSON struct {
		Name    *string `json:"name"`
		Version *string `json:"version"`
	}
	jsonBody, err := read(PackageJSON)
	hasJSON := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return md, err
	}
	if hasJSON {
		if err := json.Unmarshal(jsonBody, &fromJSON); err != nil {
			return md, newErr(Invalid, CodeInvalidManifest, "package.json is not valid: %v", err)
		}
		if fromJSON.Name != nil {
			md.Name = *fromJSON.Name
		}
		if fromJSON.Version != nil {
			md.Version = *fromJSON.Version
		}
	}
	for _, name := range []string{ManifestYAML, ManifestYML} {
		body, err := read(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return md, err
		}
		md.Manifest = name
		if err := md.parseManifest(body); err != nil {
			return md, err
		}
		break
	}
	if md.Manifest == "" && !hasJSON {
		return md, ErrNoMetadata
	}
	if md.Version == "" {
		md.Version = Latest
	}
	return md, nil
}

// manifestKeys are the manifest keys every package understands.
type manifestKeys struct {
	Name    *string `yaml:"name"`
	Version *string `yaml:"version"`
	Enabled *bool   `yaml:"enabled"`
}

func (md *Metadata) parseManifest(body []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(body, &doc); err != nil {
		return newErr(Invalid, CodeInvalidManifest, "%s is not valid YAML: %v", md.Manifest, err)
	}
	if len(doc.Content) == 0 { // an empty file
		return nil
	}
	if doc.Content[0].Kind != yaml.MappingNode {
		return newErr(Invalid, CodeInvalidManifest, "%s must be a mapping of keys to values", md.Manifest)
	}
	md.doc = &doc
	var keys manifestKeys
	if err := md.Decode(&keys); err != nil {
		return err
	}
	if keys.Name != nil {
		md.Name = *keys.Name
	}
	if keys.Version != nil {
		md.Version = *keys.Version
	}
	if keys.Enabled != nil {
		md.Enabled = *keys.Enabled
	}
	return nil
}

// ReadMetadataFile reads the metadata file name of root, which must be a regular file of at
// most 1 MiB: a metadata file that is a link would let a write to the linked file change the
// manifest unseen.
func ReadMetadataFile(root *os.Root, name string) ([]byte, error) {
	info, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, newErr(Invalid, CodeInvalidManifest, "%s must be a regular file, not a folder or a link", path.Base(name))
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if opened, err := f.Stat(); err != nil || !os.SameFile(info, opened) {
		return nil, newErr(Invalid, CodeInvalidManifest, "%s changed while it was read; try again", path.Base(name))
	}
	body, err := io.ReadAll(io.LimitReader(f, maxMetadataSize+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxMetadataSize {
		return nil, newErr(Invalid, CodeInvalidManifest, "%s is larger than 1 MiB", path.Base(name))
	}
	return body, nil
}

// WriteEnabled sets the manifest key enabled of the package in folder dir of root, keeping
// comments, key order and every other key. Without a manifest, create decides: true creates
// manifest.yaml holding only the flag, false reports ErrNoManifest.
func WriteEnabled(root *os.Root, dir string, enabled, create bool) error {
	md, err := ReadMetadata(root, dir)
	if err != nil && !errors.Is(err, ErrNoMetadata) {
		return err
	}
	if md.Manifest == "" {
		if !create {
			return ErrNoManifest
		}
		body := fmt.Sprintf("# Written by the runtime when the package was enabled or disabled.\nenabled: %t\n", enabled)
		return WriteFileAtomic(root, path.Join(dir, ManifestYAML), []byte(body))
	}
	doc := md.doc
	if doc == nil { // an empty manifest
		doc = &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	setMappingBool(doc.Content[0], "enabled", enabled)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("encoding %s: %w", md.Manifest, err)
	}
	enc.Close()
	return WriteFileAtomic(root, path.Join(dir, md.Manifest), out.Bytes())
}

// ErrNoManifest means a package has package.json only, so there is no manifest to edit.
var ErrNoManifest = errors.New("no manifest.yaml or manifest.yml")

// setMappingBool sets key to a boolean in a YAML mapping, in place when the key exists.
func setMappingBool(m *yaml.Node, key string, v bool) {
	value := fmt.Sprint(v)
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			val := m.Content[i+1]
			*val = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: value,
				HeadComment: val.HeadComment, LineComment: val.LineComment, FootComment: val.FootComment}
			return
		}
	}
	m.Content = append(m.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: value})
}

// WriteFileAtomic replaces name with body through a temporary file and a rename, so a reader
// sees the old or the new content.
func WriteFileAtomic(root *os.Root, name string, body []byte) error {
	tmp := path.Join(path.Dir(name), tempPrefix+randomSuffix()+".part")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(body)
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr == nil {
		werr = root.Rename(tmp, name)
	}
	if werr != nil {
		_ = root.Remove(tmp)
	}
	return werr
}
