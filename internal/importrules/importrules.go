package importrules

import (
	"fmt"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Module is this module's path.
const Module = "github.com/xds-server/xds-server"

// AnyInModule, as a forbidden entry, forbids every package of this module
// (other than the package itself and its subpackages).
const AnyInModule = "*"

// AnyButInternal, as a forbidden entry, forbids every package of this
// module but those under internal/ (each of which imports nothing else of
// this module), as AnyInModule does: for a package that must stay a leaf
// apart from the module's shared internal pieces.
const AnyButInternal = "*-internal"

// Check fails t for every forbidden import in the non-test Go files of
// the current directory (the package under test). A forbidden entry is a
// package of this module by its path within it ("xds", "e2e/harness"), a
// path outside it ("github.com/spf13/viper"), or AnyInModule; a package
// forbids its subpackages too.
func Check(t *testing.T, forbidden ...string) {
	t.Helper()
	bad, err := Violations(".", forbidden)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// Violations returns "file imports path" for every forbidden import in the
// non-test Go files of dir, as Check describes.
func Violations(dir string, forbidden []string) ([]string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	own := ownPath(dir)
	fset := token.NewFileSet()
	var bad []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly|parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("importrules: %w", err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if forbids(forbidden, path, own) {
				bad = append(bad, fmt.Sprintf("%s imports %s", filepath.Base(name), path))
			}
		}
	}
	return bad, nil
}

// forbids reports whether path is forbidden for package own (its import
// path).
func forbids(forbidden []string, path, own string) bool {
	for _, f := range forbidden {
		switch {
		case f == AnyInModule:
			if within(path, Module) && !within(path, own) {
				return true
			}
		case f == AnyButInternal:
			if within(path, Module) && !within(path, own) && !within(path, Module+"/internal") {
				return true
			}
		case strings.Contains(strings.SplitN(f, "/", 2)[0], "."):
			if within(path, f) {
				return true
			}
		default:
			if within(path, Module+"/"+f) {
				return true
			}
		}
	}
	return false
}

// within reports whether path is pkg or below it.
func within(path, pkg string) bool {
	return path == pkg || strings.HasPrefix(path, pkg+"/")
}

// ownPath is the import path of the package in dir, found by walking up
// to go.mod's directory; "" if there is none.
func ownPath(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	var rel []string
	for d := abs; ; d = filepath.Dir(d) {
		if m, _ := filepath.Glob(filepath.Join(d, "go.mod")); len(m) > 0 {
			if len(rel) == 0 {
				return Module
			}
			for i, j := 0, len(rel)-1; i < j; i, j = i+1, j-1 {
				rel[i], rel[j] = rel[j], rel[i]
			}
			return Module + "/" + strings.Join(rel, "/")
		}
		if filepath.Dir(d) == d {
			return ""
		}
		rel = append(rel, filepath.Base(d))
	}
}
