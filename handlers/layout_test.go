package handlers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxMethods is the most methods one type of the package may declare: each resource is a type
// of its own with the dependencies it uses, not one type serving every route.
const maxMethods = 40

// TestResourcesStaySmall counts the methods declared on each type of the package, tests
// excluded, and fails for a type with more than maxMethods.
func TestResourcesStaySmall(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	methods := map[string]int{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil {
				continue
			}
			typ := fn.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				methods[id.Name]++
			}
		}
	}
	if len(methods) == 0 {
		t.Fatal("no methods found: the test reads the wrong folder")
	}
	for typ, n := range methods {
		if n > maxMethods {
			t.Errorf("type %s declares %d methods, more than %d: give a resource a type of its own", typ, n, maxMethods)
		}
	}
}
