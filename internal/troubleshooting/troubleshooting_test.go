package troubleshooting

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// notAtStartUp are the warnings logged while serving, about one request or one pass, which
// the guide does not explain: the file and the start of the message.
var notAtStartUp = map[string][]string{
	"handlers/files.go":               {"download failed after it started"},
	"handlers/traffic.go":             {"the traffic split of a removed worker could not be ended"},
	"handlers/secrets.go":             {"the secrets of a removed worker could not be removed"},
	"handlers/domains.go":             {"the custom domains of a removed worker could not be read", "a custom domain of a removed worker could not be detached"},
	"caddymodule/wasm.go":             {"the list of WebAssembly modules to load at the next start was not written"}, // at a stop
	"caddymodule/domains.go":          {"dropping expired custom domain claims"},                                     // hourly
	"internal/serving/serving.go":     {"a worker failed after it began to answer"},
	"internal/serving/directproxy.go": {"a worker failed after it began to answer"},
	"internal/serving/proxy.go":       {"worker request failed"},
	"internal/pluginhost/chain.go":    {"onRequest hook failed"},
	"internal/pluginhost/hooks.go":    {"onRequest hook failed; going on"},
	"internal/workers/scratch.go":     {"worker passed its scratch limit"},
	"internal/workers/output.go":      {"worker output dropped"},
	"keystore/replica.go":             {"wrote to the key store primary but could not read", "key store primary unreachable: dropped"},
	"internal/cluster/cluster.go":     {"cluster: "},
	"internal/cron/scheduler.go":      {"cron: "}, // at ticks and lease renewals
	"handlers/cron.go":                {"the cron runs and pause of a removed worker"},
	"internal/workers/database.go":    {"worker passed its database limit"},
	"caddymodule/state.go":            nil, // every warning there is a start-up one
}

// warning is a Warn call found in the source.
type warning struct {
	at      string // file:line
	file    string
	message string // the message's first string literal
	anchor  string // the troubleshooting anchor of its docs field, "" without one
}

// TestEveryStartUpWarningLinksItsParagraph lists the Warn calls of the module's code and
// checks that each one logged at start-up carries a docs field with its paragraph's anchor.
func TestEveryStartUpWarningLinksItsParagraph(t *testing.T) {
	warnings, used := scan(t)
	t.Logf("%d Warn calls", len(warnings))
	if len(warnings) < len(All) {
		t.Fatalf("found %d Warn calls, fewer than the %d paragraphs: the scan misses some", len(warnings), len(All))
	}
	for _, w := range warnings {
		exempt := slices.ContainsFunc(notAtStartUp[w.file], func(prefix string) bool { return strings.HasPrefix(w.message, prefix) })
		switch {
		case w.anchor == "" && !exempt:
			t.Errorf("%s: the warning %q has no docs field: give it a troubleshooting anchor and a paragraph in docs/troubleshooting.md", w.at, w.message)
		case w.anchor != "" && exempt:
			t.Errorf("%s: the warning %q is listed as not logged at start-up but links %s", w.at, w.message, w.anchor)
		}
	}
	for _, a := range All {
		if !used[string(a)] {
			t.Errorf("anchor %s is no warning's", a)
		}
	}
	for name := range used {
		if !slices.Contains(All, Anchor(name)) {
			t.Errorf("anchor %s is used but not in All", name)
		}
	}
}

// TestAnchors checks that the anchors are distinct GitHub heading slugs, and that the guide,
// once it is there, has a heading for each.
func TestAnchors(t *testing.T) {
	seen := map[Anchor]bool{}
	for _, a := range All {
		if seen[a] || slug(string(a)) != string(a) {
			t.Errorf("anchor %q is repeated or not a heading's slug", a)
		}
		seen[a] = true
		if !strings.HasPrefix(a.URL(), "https://github.com/caddy-runtime/runtime/blob/main/docs/troubleshooting.md#") {
			t.Errorf("%s links %s", a, a.URL())
		}
	}
	guide, err := os.ReadFile("../../docs/troubleshooting.md")
	if os.IsNotExist(err) {
		t.Skip("docs/troubleshooting.md is not written yet: the headings of its paragraphs are not checked")
	}
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`).FindAllStringSubmatch(string(guide), -1) {
		headings[slug(m[1])] = true
	}
	for _, a := range All {
		if !headings[string(a)] {
			t.Errorf("docs/troubleshooting.md has no heading whose anchor is %s", a)
		}
	}
}

// slug is GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// scan parses the module's code (no tests) and returns its Warn calls and the anchors its
// code names (troubleshooting.X).
func scan(t *testing.T) ([]warning, map[string]bool) {
	t.Helper()
	root := filepath.Join("..", "..")
	var out []warning
	used := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "integration/") || strings.HasPrefix(rel, "bench/") || strings.HasPrefix(rel, "internal/testkit/") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "troubleshooting" && n.Sel.IsExported() && n.Sel.Name != "Anchor" {
					used[n.Sel.Name] = true
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Warn" || len(n.Args) == 0 {
					return true
				}
				w := warning{at: fset.Position(n.Pos()).String(), file: rel, message: firstString(n.Args[0])}
				for _, arg := range n.Args[1:] {
					if call, ok := arg.(*ast.CallExpr); ok {
						if fsel, ok := call.Fun.(*ast.SelectorExpr); ok && fsel.Sel.Name == "Field" && len(call.Args) == 0 {
							w.anchor = exprString(fsel.X)
						}
					}
				}
				out = append(out, w)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The anchors the names stand for.
	names := map[string]string{}
	for _, a := range All {
		names[constName(t, a)] = string(a)
	}
	resolved := map[string]bool{}
	for name := range used {
		if a, ok := names[name]; ok {
			resolved[a] = true
		} else {
			resolved[name] = true
		}
	}
	return out, resolved
}

// constName is the name of the constant whose value is a, read from this package's source.
func constName(t *testing.T, a Anchor) string {
	t.Helper()
	src, err := os.ReadFile("troubleshooting.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*(\w+)\s+Anchor = ` + regexp.QuoteMeta(strconv.Quote(string(a))) + `$`).FindSubmatch(src)
	if m == nil {
		t.Fatalf("no constant for anchor %s", a)
	}
	return string(m[1])
}

// firstString is the first string literal of an expression (a message built with +).
func firstString(e ast.Expr) string {
	var s string
	ast.Inspect(e, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && s == "" {
			s, _ = strconv.Unquote(lit.Value)
			return false
		}
		return s == ""
	})
	return s
}

// exprString renders a short expression such as troubleshooting.AccessLog or w.Docs.
func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return "?"
}
