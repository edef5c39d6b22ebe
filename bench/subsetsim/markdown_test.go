package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReplaceSection(t *testing.T) {
	const block = "<!-- subsetting:begin -->\nNEW\n<!-- subsetting:end -->\n"
	for name, tc := range map[string]struct {
		doc, want, wantErr string
	}{
		"empty file":                  {doc: "", want: block},
		"appended after a blank line": {doc: "# B\ntext", want: "# B\ntext\n\n" + block},
		"replaced in place": {
			doc:  "# B\n<!-- subsetting:begin -->\nOLD\nOLD\n<!-- subsetting:end -->\n## After\n",
			want: "# B\n" + block + "## After\n",
		},
		"unpaired": {doc: "<!-- subsetting:end -->\n<!-- subsetting:begin -->\n", wantErr: "unpaired"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := replaceSection(tc.doc, "NEW\n")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestRunSmall runs the whole simulator on a small configuration and
// rewrites a Markdown file twice: the text outside the markers survives.
func TestRunSmall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "B.md")
	if err := os.WriteFile(path, []byte("# Benchmarks\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := options{clients: 40, backends: 20, size: 3, trials: 3, seed: 1, markdown: path, reference: true}
	for range 2 {
		if err := run(o, []string{"-clients", "40"}, io.Discard, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if !strings.HasPrefix(doc, "# Benchmarks\n\n"+beginMarker) || strings.Count(doc, beginMarker) != 1 {
		t.Errorf("unexpected document:\n%s", doc)
	}
	for _, want := range []string{"| steady |", "| classic |", "| random |", "40 clients x 20 backends x size 3", "a client joining or leaving"} {
		if !strings.Contains(doc, want) {
			t.Errorf("section lacks %q", want)
		}
	}
}
