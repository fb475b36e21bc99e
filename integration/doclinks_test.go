package integration

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestDocumentedLinks checks that every relative link of the README, the pages of docs/ and
// examples/README.md names a file of the checkout, and every anchor a heading of the page it
// points to (as GitHub renders them), and that the Go sources' references to the documents
// (start-up warnings name the paragraph that explains them) do too: moving a section cannot
// strand a link.
func TestDocumentedLinks(t *testing.T) {
	t.Parallel()
	docs := documentPaths(t)
	for _, doc := range docs {
		text, err := os.ReadFile(filepath.Join("..", doc))
		must(t, err)
		for _, l := range markdownLinks(string(text)) {
			if err := checkLink("..", doc, l.target); err != nil {
				t.Errorf("%s:%d: link %q: %v", doc, l.line, l.target, err)
			}
		}
	}
	// Go sources name document pages and sections as docs/page.md#anchor or README.md#anchor.
	ref := regexp.MustCompile(`(?:README|docs/[a-z0-9-]+)\.md(?:#[a-z0-9_-]+)?`)
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "bin" || strings.HasPrefix(d.Name(), ".") && d.Name() != "..") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range ref.FindAllString(string(data), -1) {
			if err := checkLink("..", "README.md", m); err != nil {
				t.Errorf("%s: reference %q: %v", p, m, err)
			}
		}
		return nil
	})
	must(t, err)
}

// TestDocumentedPagesRun checks that the README tests run every page of docs/ (TestReadme,
// or TestReadmeCluster the cluster walk's), so a page added there cannot hold shell blocks
// nobody runs.
func TestDocumentedPagesRun(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("../docs/*.md")
	must(t, err)
	if len(pages) == 0 {
		t.Fatal("docs/ holds no page")
	}
	for _, p := range pages {
		if name := "docs/" + filepath.Base(p); !slices.Contains(readmeDocs, name) && name != clusterWalk {
			t.Errorf("%s is not in readmeDocs, so TestReadme does not run its blocks", name)
		}
	}
}

// TestDocumentedLinksFailures checks that the link check refuses what a reader would find
// broken, and accepts what GitHub resolves.
func TestDocumentedLinksFailures(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "docs"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "README.md"), []byte("# Title\n\n## Quick start\n\n## Building Caddy (xcaddy)\n\n## Quick start\n\n```sh\n# not a heading\n```\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "docs", "api.md"), []byte("# API\n\n## `GET /api/health`: probes\n"), 0o644))
	tests := []struct {
		doc, target string
		ok          bool
	}{
		{"README.md", "#quick-start", true},
		{"README.md", "#quick-start-1", true},
		{"README.md", "#building-caddy-xcaddy", true},
		{"README.md", "#not-a-heading", false},
		{"README.md", "#missing", false},
		{"README.md", "docs/api.md", true},
		{"README.md", "docs/api.md#get-apihealth-probes", true},
		{"README.md", "docs/api.md#api", true},
		{"README.md", "docs/api.md#quick-start", false},
		{"README.md", "docs/missing.md", false},
		{"README.md", "docs/", true},
		{"docs/api.md", "../README.md#quick-start", true},
		{"docs/api.md", "README.md#quick-start", false},
		{"docs/api.md", "../../outside.md", false},
		{"docs/api.md", "https://example.com/x#y", true},
	}
	for _, tt := range tests {
		err := checkLink(root, tt.doc, tt.target)
		if (err == nil) != tt.ok {
			t.Errorf("checkLink(%s, %q) = %v, want ok %v", tt.doc, tt.target, err, tt.ok)
		}
	}
	links := markdownLinks("[a](x.md) `[b](y.md)` ![c](d.png \"title\")\n```\n[e](z.md)\n```\n<https://example.com> [over\ntwo lines](w.md)\n")
	var got []string
	for _, l := range links {
		got = append(got, l.target)
	}
	if want := []string{"x.md", "d.png", "w.md"}; !slices.Equal(got, want) {
		t.Errorf("markdownLinks = %q, want %q", got, want)
	}
}

// documentPaths returns the Markdown documents whose links are checked, relative to the
// checkout's root.
func documentPaths(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../docs/*.md")
	must(t, err)
	docs := []string{"README.md", "CHANGELOG.md", "examples/README.md"}
	for _, p := range pages {
		docs = append(docs, "docs/"+filepath.Base(p))
	}
	return docs
}

// mdLink is one link of a Markdown text.
type mdLink struct {
	line   int
	target string
}

var inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
var codeSpan = regexp.MustCompile("`[^`]*`")

// markdownLinks returns the inline links and images of a Markdown text, leaving out fenced
// blocks and code spans, where brackets are code. A link's text may run over lines.
func markdownLinks(text string) []mdLink {
	lines := strings.Split(text, "\n")
	fenced := false
	for i, line := range lines {
		isFence := strings.HasPrefix(strings.TrimSpace(line), "```")
		if isFence {
			fenced = !fenced
		}
		if isFence || fenced {
			lines[i] = ""
			continue
		}
		lines[i] = codeSpan.ReplaceAllString(line, "")
	}
	prose := strings.Join(lines, "\n")
	var links []mdLink
	for _, m := range inlineLink.FindAllStringSubmatchIndex(prose, -1) {
		links = append(links, mdLink{strings.Count(prose[:m[0]], "\n") + 1, prose[m[2]:m[3]]})
	}
	return links
}

// checkLink reports whether target, a link of the document doc (both relative to root), leads
// somewhere: a link with a scheme is taken as it is, a relative one must name a file or folder
// inside root, and its anchor a heading of the Markdown page it names.
func checkLink(root, doc, target string) error {
	if regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(target) {
		return nil
	}
	file, anchor, _ := strings.Cut(target, "#")
	name := doc
	if file != "" {
		name = path.Join(path.Dir(doc), file)
		if name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("leads outside the checkout")
		}
		if _, err := os.Stat(filepath.Join(root, name)); err != nil {
			return fmt.Errorf("no file %s", name)
		}
	}
	if anchor == "" {
		return nil
	}
	if !strings.HasSuffix(name, ".md") {
		return fmt.Errorf("an anchor on %s, which is not a Markdown page", name)
	}
	text, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		return err
	}
	if !slices.Contains(headingAnchors(string(text)), anchor) {
		return fmt.Errorf("%s has no heading with the anchor #%s", name, anchor)
	}
	return nil
}

// headingAnchors returns the anchors GitHub gives a Markdown text's headings: lower case,
// without punctuation, blanks as hyphens, and a repeated one numbered.
func headingAnchors(text string) []string {
	var anchors []string
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		heading, ok := strings.CutPrefix(line, "#")
		if fenced || !ok {
			continue
		}
		heading = strings.TrimLeft(heading, "#")
		if !strings.HasPrefix(heading, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		anchor := b.String()
		if n := seen[anchor]; n > 0 {
			seen[anchor]++
			anchor = fmt.Sprintf("%s-%d", anchor, n)
		} else {
			seen[anchor] = 1
		}
		anchors = append(anchors, anchor)
	}
	return anchors
}
