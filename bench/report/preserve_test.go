package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMarkedBlock(t *testing.T) {
	for name, tc := range map[string]struct {
		doc, want string
	}{
		"no markers":       {doc: "# Benchmarks\n", want: ""},
		"only begin":       {doc: "x\n<!-- subsetting:begin -->\nfigures\n", want: ""},
		"end before begin": {doc: "<!-- subsetting:end -->\n<!-- subsetting:begin -->\n", want: ""},
		"block in the middle": {
			doc:  "# B\n\n<!-- subsetting:begin -->\n## Subsetting\n| a |\n<!-- subsetting:end -->\ntail\n",
			want: "<!-- subsetting:begin -->\n## Subsetting\n| a |\n<!-- subsetting:end -->\n",
		},
		"block at the end without newline": {
			doc:  "# B\n<!-- subsetting:begin -->\nx\n<!-- subsetting:end -->",
			want: "<!-- subsetting:begin -->\nx\n<!-- subsetting:end -->\n",
		},
		"weightsim block only": {
			doc:  "# B\n<!-- weightsim:begin -->\n## Weights\n<!-- weightsim:end -->\n",
			want: "<!-- weightsim:begin -->\n## Weights\n<!-- weightsim:end -->\n",
		},
		"both blocks, in document order": {
			doc: "# B\n<!-- weightsim:begin -->\nW\n<!-- weightsim:end -->\nmiddle\n" +
				"<!-- subsetting:begin -->\nS\n<!-- subsetting:end -->\n",
			want: "<!-- weightsim:begin -->\nW\n<!-- weightsim:end -->\n\n" +
				"<!-- subsetting:begin -->\nS\n<!-- subsetting:end -->\n",
		},
		"one block unpaired": {
			doc:  "<!-- subsetting:begin -->\nS\n<!-- subsetting:end -->\n<!-- weightsim:begin -->\nW\n",
			want: "<!-- subsetting:begin -->\nS\n<!-- subsetting:end -->\n",
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := markedBlocks(tc.doc); got != tc.want {
				t.Errorf("markedBlocks = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPreservedSectionsSurviveARewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if got, err := preservedSections(path); err != nil || got != "" {
		t.Fatalf("missing file: %q, %v", got, err)
	}
	block := "<!-- subsetting:begin -->\n## Subsetting\n\n| x | 1 |\n<!-- subsetting:end -->\n\n" +
		"<!-- weightsim:begin -->\n## Weights\n\n| y | 2 |\n<!-- weightsim:end -->\n"
	if err := os.WriteFile(path, []byte("# Old report\n\n"+block), 0o644); err != nil {
		t.Fatal(err)
	}
	kept, err := preservedSections(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := withPreserved("# New report\n", kept), "# New report\n\n"+block; got != want {
		t.Errorf("rewritten doc = %q, want %q", got, want)
	}
	if got := withPreserved("# New report\n", ""); got != "# New report\n" {
		t.Errorf("nothing to keep: %q", got)
	}
}
