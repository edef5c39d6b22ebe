package importrules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLayoutListsEveryPackage: the README's Layout table names every
// directory of Go files (a row may name several, or a parent with its
// subpackages listed in the same row).
func TestLayoutListsEveryPackage(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(readme), "## Layout")
	if !ok {
		t.Fatal("README.md has no Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	dirs := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			dirs[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir := range dirs {
		if dir == "." {
			continue
		}
		if !strings.Contains(layout, "`"+dir+"`") && !strings.Contains(layout, "`"+dir+"/`") {
			t.Errorf("README's Layout table does not list %s", dir)
		}
	}
}
