package runtime

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxMethods bounds the methods of one type: past it a type holds several concerns, which
// want types of their own (as keystore.Store's tables are its facets).
const maxMethods = 40

// methodCounts returns how many methods each type of the Go files below root declares, tests
// excluded, by "package folder.type" (the folder relative to root, "." for root's own).
func methodCounts(t *testing.T, root string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "node_modules" || name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 {
				continue
			}
			if name := receiverType(fn.Recv.List[0].Type); name != "" {
				counts[filepath.ToSlash(dir)+"."+name]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

// receiverType is the name of the type of a method's receiver: T of T, *T, T[P] or *T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// TestNoTypeOverFortyMethods keeps every type of the project at maxMethods methods or fewer
// (handlers.API had 133, keystore.Store 84 and caddymodule's state 45 before issue 36).
func TestNoTypeOverFortyMethods(t *testing.T) {
	counts := methodCounts(t, ".")
	if counts["keystore.Store"] == 0 {
		t.Fatal("no methods found on keystore.Store: the walk reads the wrong tree")
	}
	for typ, n := range counts {
		if n > maxMethods {
			t.Errorf("%s has %d methods, more than %d: give its concerns types of their own", typ, n, maxMethods)
		}
	}
}
