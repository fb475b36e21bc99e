package packages

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// writeTree writes files (name → content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestReadMetadata(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  Metadata
		err   string
	}{
		{"manifest.yaml", map[string]string{"manifest.yaml": "name: app\nversion: 1.0.0\n"}, Metadata{Name: "app", Version: "1.0.0", Enabled: true, Manifest: ManifestYAML}, ""},
		{"manifest.yml", map[string]string{"manifest.yml": "name: app\nenabled: false\n"}, Metadata{Name: "app", Version: Latest, Enabled: false, Manifest: ManifestYML}, ""},
		{"yaml before yml", map[string]string{"manifest.yaml": "name: a\n", "manifest.yml": "name: b\n"}, Metadata{Name: "a", Version: Latest, Enabled: true, Manifest: ManifestYAML}, ""},
		{"package.json only", map[string]string{"package.json": `{"name":"app","version":"2.0.0","main":"x"}`}, Metadata{Name: "app", Version: "2.0.0", Enabled: true}, ""},
		{"manifest wins", map[string]string{"package.json": `{"name":"pkg","version":"2.0.0"}`, "manifest.yaml": "version: 3.0.0\n"}, Metadata{Name: "pkg", Version: "3.0.0", Enabled: true, Manifest: ManifestYAML}, ""},
		{"empty manifest", map[string]string{"manifest.yaml": "", "package.json": `{"name":"x"}`}, Metadata{Name: "x", Version: Latest, Enabled: true, Manifest: ManifestYAML}, ""},
		{"none", map[string]string{"index.html": "<p>"}, Metadata{}, "no package metadata"},
		{"bad yaml", map[string]string{"manifest.yaml": "name: [\n"}, Metadata{}, CodeInvalidManifest},
		{"yaml list", map[string]string{"manifest.yaml": "- a\n"}, Metadata{}, CodeInvalidManifest},
		{"enabled not bool", map[string]string{"manifest.yaml": "name: a\nenabled: maybe\n"}, Metadata{}, CodeInvalidManifest},
		{"name not string", map[string]string{"manifest.yaml": "name: [a]\n"}, Metadata{}, CodeInvalidManifest},
		{"bad json", map[string]string{"package.json": `{"name":`}, Metadata{}, CodeInvalidManifest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tt.files)
			md, err := ReadMetadata(openRoot(t, dir), ".")
			if tt.err != "" {
				if err == nil || !(IsCode(err, tt.err) || errors.Is(err, ErrNoMetadata) && tt.err == "no package metadata") {
					t.Fatalf("ReadMetadata = %+v, %v; want %s", md, err, tt.err)
				}
				return
			}
			if md.serial == 0 {
				t.Error("the read has no serial")
			}
			md.doc, md.serial = nil, 0
			if err != nil || md != tt.want {
				t.Fatalf("ReadMetadata = %+v, %v; want %+v", md, err, tt.want)
			}
		})
	}
}

func TestWriteEnabledKeepsComments(t *testing.T) {
	dir := t.TempDir()
	manifest := `# The demo app.
name: demo # the name
version: 1.2.3
# Turn it off here.
enabled: true # served?
entrypoint: index.html
env:
  MODE: prod # production
`
	writeTree(t, dir, map[string]string{"manifest.yaml": manifest})
	root := openRoot(t, dir)
	if err := WriteEnabled(root, ".", false, true); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "manifest.yaml"))
	want := `# The demo app.
name: demo # the name
version: 1.2.3
# Turn it off here.
enabled: false # served?
entrypoint: index.html
env:
  MODE: prod # production
`
	if string(got) != want {
		t.Fatalf("manifest after disable:\n%s\nwant:\n%s", got, want)
	}
	md, _ := ReadMetadata(root, ".")
	if md.Enabled {
		t.Fatal("still enabled")
	}
	// A manifest without the key gets it appended.
	writeTree(t, dir, map[string]string{"manifest.yaml": "# head\nname: demo\nbase: /demo # mount\n"})
	if err := WriteEnabled(root, ".", false, false); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(filepath.Join(dir, "manifest.yaml"))
	if string(got) != "# head\nname: demo\nbase: /demo # mount\nenabled: false\n" {
		t.Fatalf("appended manifest:\n%s", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

func TestWriteEnabledWithPackageJSONOnly(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"package.json": `{"name":"app","version":"1.0.0"}`})
	root := openRoot(t, dir)
	if err := WriteEnabled(root, ".", false, false); !errors.Is(err, ErrNoManifest) {
		t.Fatalf("WriteEnabled without create = %v, want ErrNoManifest", err)
	}
	if err := WriteEnabled(root, ".", false, true); err != nil {
		t.Fatal(err)
	}
	md, err := ReadMetadata(root, ".")
	if err != nil || md.Enabled || md.Name != "app" || md.Version != "1.0.0" || md.Manifest != ManifestYAML {
		t.Fatalf("after creating the manifest: %+v %v", md, err)
	}
	if err := WriteEnabled(root, ".", true, true); err != nil {
		t.Fatal(err)
	}
	if md, _ := ReadMetadata(root, "."); !md.Enabled {
		t.Fatal("not re-enabled")
	}
}

// TestMetadataFilesAreRegular refuses a metadata file that is a link or a folder: through a
// link, a write to an ordinary file would change the manifest.
func TestMetadataFilesAreRegular(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"linked/notes.yaml": "name: linked\n", "folder/manifest.yaml/x": ""})
	if err := os.Symlink("notes.yaml", filepath.Join(dir, "linked", ManifestYAML)); err != nil {
		t.Fatal(err)
	}
	for _, unit := range []string{"linked", "folder"} {
		if _, err := ReadMetadata(openRoot(t, dir), unit); !IsCode(err, CodeInvalidManifest) {
			t.Errorf("%s: err = %v, want %s", unit, err, CodeInvalidManifest)
		}
	}
}
