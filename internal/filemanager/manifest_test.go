package filemanager

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-runtime/runtime/packages"
)

// admitting returns the fixture's surfaces asking an admission that refuses manifests
// declaring command or onRequest, and the units it was asked about.
func admitting(f *fixture) (workers, plugins *Surface, asked *[]string) {
	asked = &[]string{}
	admit := func(unit string, md packages.Metadata) error {
		var m struct {
			Command   []string `yaml:"command"`
			OnRequest []any    `yaml:"onRequest"`
		}
		if err := md.Decode(&m); err != nil {
			return err
		}
		*asked = append(*asked, unit+"@"+md.Version)
		if len(m.Command) > 0 || len(m.OnRequest) > 0 {
			return &packages.Error{Kind: packages.Forbidden, Code: "REFUSED", Message: "refused " + unit}
		}
		return nil
	}
	return f.workers.WithAdmit(admit), f.plugins.WithAdmit(admit), asked
}

// TestManifestWritesAreAdmitted checks that every way of writing, replacing or removing a
// metadata file at the top of a writable folder is admitted as the folder would be left,
// links inside the unit included, and that a refused write changes nothing.
func TestManifestWritesAreAdmitted(t *testing.T) {
	const web = "apps/@team/web/1.0.0"
	evil := "name: '@team/web'\nversion: 1.0.0\ncommand: [./run]\n"
	good := "name: '@team/web'\nversion: 1.0.0\nentrypoint: index.html\n"
	tests := []struct {
		name  string
		setup map[string]string // files written first (content "->x": a link to x)
		op    func(workers, plugins *Surface) error
		code  string   // "" when done
		asked []string // the admissions asked for
	}{
		{"upload a manifest with command", nil, func(w, _ *Surface) error {
			_, err := w.Upload(team, web, []UploadFile{upload("manifest.yaml", []byte(evil))}, packages.DefaultLimits)
			return err
		}, "REFUSED", []string{"@team/web@1.0.0"}},
		{"upload a plain manifest", nil, func(w, _ *Surface) error {
			_, err := w.Upload(team, web, []UploadFile{upload("manifest.yaml", []byte(good)), upload("x.txt", []byte("x"))}, packages.DefaultLimits)
			return err
		}, "", []string{"@team/web@1.0.0"}},
		{"upload a manifest below the top", nil, func(w, _ *Surface) error {
			_, err := w.Upload(team, web+"/assets", []UploadFile{upload("manifest.yaml", []byte(evil))}, packages.DefaultLimits)
			return err
		}, "", nil},
		{"upload a manifest as a folder path", nil, func(w, _ *Surface) error {
			_, err := w.Upload(team, web+"/new", []UploadFile{upload("../manifest.yaml", []byte(evil))}, packages.DefaultLimits)
			return err
		}, packages.CodePathTraversal, nil},
		{"upload a zip holding a plugin manifest with hooks", nil, func(_, p *Surface) error {
			_, err := p.Upload(team, "plugins/@team/p", []UploadFile{upload("x.zip", zipOf(t,
				[2]string{"manifest.yaml", "name: '@team/p'\nonRequest: [{handler: headers}]\n"}))}, packages.DefaultLimits)
			return err
		}, "REFUSED", []string{"@team/p@latest"}},
		{"upload through a link to the top", map[string]string{web + "/up": "->."}, func(w, _ *Surface) error {
			_, err := w.Upload(team, web+"/up", []UploadFile{upload("manifest.yaml", []byte(evil))}, packages.DefaultLimits)
			return err
		}, "REFUSED", []string{"@team/web@1.0.0"}},
		{"rename onto the manifest's name", map[string]string{web + "/package.json": `{"name":"@team/web","version":"1.0.0"}`, web + "/draft.yaml": evil}, func(w, _ *Surface) error {
			if _, err := w.Delete(team, web+"/manifest.yaml"); err != nil {
				return err
			}
			_, err := w.Rename(team, web+"/draft.yaml", "manifest.yml")
			return err
		}, "REFUSED", []string{"@team/web@1.0.0", "@team/web@1.0.0"}},
		{"rename onto a manifest name that is not read", map[string]string{web + "/manifest.yaml": good, web + "/draft.yaml": evil}, func(w, _ *Surface) error {
			_, err := w.Rename(team, web+"/draft.yaml", "manifest.yml")
			return err
		}, "", []string{"@team/web@1.0.0"}},
		{"rename through a link to the top", map[string]string{web + "/loop": "->.", web + "/draft.yaml": evil}, func(w, _ *Surface) error {
			if _, err := w.Delete(team, web+"/manifest.yaml"); err != nil {
				return err
			}
			_, err := w.Rename(team, web+"/loop/draft.yaml", "manifest.yaml")
			return err
		}, "REFUSED", []string{"@team/web@1.0.0"}},
		{"rename the manifest away, uncovering manifest.yml", map[string]string{web + "/manifest.yml": evil}, func(w, _ *Surface) error {
			_, err := w.Rename(team, web+"/manifest.yaml", "old.yaml")
			return err
		}, "REFUSED", []string{"@team/web@1.0.0"}},
		{"delete the manifest, uncovering manifest.yml", map[string]string{web + "/manifest.yml": evil}, func(w, _ *Surface) error {
			_, err := w.Delete(team, web+"/manifest.yaml")
			return err
		}, "REFUSED", []string{"@team/web@1.0.0"}},
		{"delete the last metadata", nil, func(w, _ *Surface) error {
			_, err := w.Delete(team, web+"/manifest.yaml")
			return err
		}, "", nil},
		{"move a manifest to the top", map[string]string{web + "/assets/manifest.yaml": evil}, func(w, _ *Surface) error {
			if _, err := w.Delete(team, web+"/manifest.yaml"); err != nil {
				return err
			}
			_, err := w.Move(team, web+"/assets/manifest.yaml", web)
			return err
		}, "REFUSED", []string{"@team/web@1.0.0"}},
		{"move a plain manifest to the top", map[string]string{web + "/assets/manifest.yaml": good}, func(w, _ *Surface) error {
			if _, err := w.Delete(team, web+"/manifest.yaml"); err != nil {
				return err
			}
			_, err := w.Move(team, web+"/assets/manifest.yaml", web)
			return err
		}, "", []string{"@team/web@1.0.0"}},
		{"move the manifest away, uncovering manifest.yml", map[string]string{web + "/manifest.yml": evil}, func(w, _ *Surface) error {
			_, err := w.Move(team, web+"/manifest.yaml", web+"/assets")
			return err
		}, "REFUSED", []string{"@team/web@1.0.0"}},
		{"a folder named like the manifest", map[string]string{web + "/assets/manifest.yaml/x": ""}, func(w, _ *Surface) error {
			if _, err := w.Delete(team, web+"/manifest.yaml"); err != nil {
				return err
			}
			_, err := w.Move(team, web+"/assets/manifest.yaml", web)
			return err
		}, packages.CodeInvalidManifest, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			for rel, content := range tt.setup {
				if target, ok := strings.CutPrefix(content, "->"); ok {
					f.link(t, target, rel)
					continue
				}
				os.MkdirAll(filepath.Dir(f.path(rel)), 0o755)
				if err := os.WriteFile(f.path(rel), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			before := f.snapshot(t, web)
			workers, plugins, asked := admitting(f)
			err := tt.op(workers, plugins)
			if got := codeOf(err); got != tt.code {
				t.Fatalf("error %v, want code %q", err, tt.code)
			}
			if strings.Join(*asked, ",") != strings.Join(tt.asked, ",") {
				t.Errorf("asked about %v, want %v", *asked, tt.asked)
			}
			if strings.HasPrefix(tt.name, "upload a manifest with") || strings.HasPrefix(tt.name, "rename the") || strings.HasPrefix(tt.name, "delete the manifest") {
				if after := f.snapshot(t, web); !maps(before, after) {
					t.Errorf("a refused write changed the version:\nbefore %v\nafter  %v", before, after)
				}
			}
			if tt.code == "" && strings.Contains(tt.name, "plain manifest") && !strings.Contains(f.read(t, web+"/manifest.yaml"), "entrypoint: index.html") {
				t.Error("the admitted manifest was not written")
			}
			if tt.code == "REFUSED" && f.exists(web+"/manifest.yaml") && strings.Contains(f.read(t, web+"/manifest.yaml"), "command") {
				t.Error("the refused manifest was written")
			}
		})
	}
}

// TestAdmittedContentLands checks that a metadata file moved into place is written with the
// content that was admitted.
func TestAdmittedContentLands(t *testing.T) {
	f := newFixture(t)
	workers, _, _ := admitting(f)
	const web = "apps/@team/web/1.0.0"
	os.WriteFile(f.path(web+"/draft.yaml"), []byte("name: '@team/web'\nversion: 1.0.0\nentrypoint: index.html\n"), 0o644)
	if _, err := workers.Delete(team, web+"/manifest.yaml"); err != nil {
		t.Fatal(err)
	}
	if _, err := workers.Rename(team, web+"/draft.yaml", "manifest.yaml"); err != nil {
		t.Fatal(err)
	}
	if f.exists(web+"/draft.yaml") || !strings.Contains(f.read(t, web+"/manifest.yaml"), "index.html") {
		t.Errorf("after the rename: draft %v, manifest %q", f.exists(web+"/draft.yaml"), f.read(t, web+"/manifest.yaml"))
	}
}
