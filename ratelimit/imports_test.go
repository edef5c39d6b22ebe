package ratelimit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"

	"github.com/xds-server/xds-server/internal/importrules"
)

// pureFiles are the pure core: no goroutines, I/O, logging or clock.
var pureFiles = []string{"unit.go", "criticality.go", "config.go", "config_yaml.go", "config_rule.go",
	"match.go", "algorithm.go"}

// The package rules of doc.go (design guide §3), and the pure core's.
func TestImportRules(t *testing.T) {
	importrules.Check(t, "xds", "discovery", "envoy", "cmd")
	impure := []string{"os", "net", "net/http", "log", "log/slog", "sync", "sync/atomic", "io", "math/rand", "math/rand/v2"}
	fset := token.NewFileSet()
	for _, name := range pureFiles {
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); slices.Contains(impure, path) {
				t.Errorf("pure core file %s imports %s", name, path)
			}
		}
		checkNoGoroutinesOrClock(t, fset, name)
	}
}

func checkNoGoroutinesOrClock(t *testing.T, fset *token.FileSet, name string) {
	f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			t.Errorf("%s: goroutine in the pure core", fset.Position(n.Pos()))
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && id.Name == "time" && (n.Sel.Name == "Now" || n.Sel.Name == "Since") {
				t.Errorf("%s: time.%s in the pure core", fset.Position(n.Pos()), n.Sel.Name)
			}
		}
		return true
	})
}
