package ratelimit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pureFiles are the pure core: no goroutines, I/O, logging or clock.
var pureFiles = []string{"unit.go", "criticality.go", "config.go", "config_yaml.go", "config_rule.go",
	"match.go", "algorithm.go"}

// The package rules of doc.go (design guide §3).
func TestImportRules(t *testing.T) {
	const module = "github.com/xds-server/xds-server/"
	forbidden := []string{"xds", "discovery", "envoy", "cmd"}
	impure := []string{"os", "net", "net/http", "log", "log/slog", "sync", "sync/atomic", "io", "math/rand", "math/rand/v2"}
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		pure := slices.Contains(pureFiles, name)
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, p := range forbidden {
				if path == module+p || strings.HasPrefix(path, module+p+"/") {
					t.Errorf("%s imports %s", name, path)
				}
			}
			if pure && slices.Contains(impure, path) {
				t.Errorf("pure core file %s imports %s", name, path)
			}
		}
		if pure {
			checkNoGoroutinesOrClock(t, fset, name)
		}
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
