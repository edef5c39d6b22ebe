package section

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReplace(t *testing.T) {
	begin, end := Markers("sim")
	block := begin + "\nNEW\n" + end + "\n"
	for name, tc := range map[string]struct {
		doc, want string
		err       bool
	}{
		"replaces between markers": {doc: "# B\n" + begin + "\nOLD\n" + end + "\n## After\n", want: "# B\n" + block + "## After\n"},
		"appends when absent":      {doc: "# B", want: "# B\n\n" + block},
		"creates from nothing":     {doc: "", want: block},
		"other sections untouched": {doc: "<!-- x:begin -->\nX\n<!-- x:end -->\n", want: "<!-- x:begin -->\nX\n<!-- x:end -->\n\n" + block},
		"markers out of order":     {doc: end + "\n" + begin + "\n", err: true},
		"end marker alone":         {doc: "a\n" + end + "\n", err: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Replace(tc.doc, "sim", "NEW\n")
			if tc.err {
				if err == nil {
					t.Fatalf("no error; got %q", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Replace = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "B.md")
	if err := os.WriteFile(path, []byte("# Benchmarks\nkeep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"first", "second"} {
		if err := Rewrite(path, "sim", body); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(path)
	begin, end := Markers("sim")
	if want := "# Benchmarks\nkeep me\n\n" + begin + "\nsecond\n" + end + "\n"; string(b) != want {
		t.Errorf("file = %q, want %q", b, want)
	}
}
