package translatetest

import "testing"

// TestDiff: equal texts give nothing; a change shows as - and + lines in
// a hunk with its context and line numbers; far apart changes make two
// hunks.
func TestDiff(t *testing.T) {
	if d := Diff("a\nb\n", "a\nb\n"); d != "" {
		t.Fatalf("equal texts: %q", d)
	}
	want := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n"
	got := "1\n2\nthree\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n15\n"
	const expect = "@@ -1,6 +1,6 @@\n 1\n 2\n-3\n+three\n 4\n 5\n 6\n" +
		"@@ -11,6 +11,5 @@\n 11\n 12\n 13\n-14\n 15\n \n"
	if d := Diff(want, got); d != expect {
		t.Errorf("Diff =\n%s\nwant\n%s", d, expect)
	}
}
