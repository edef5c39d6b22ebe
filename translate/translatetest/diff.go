package translatetest

import (
	"fmt"
	"strings"
)

// contextLines is how many unchanged lines Diff shows around a change.
const contextLines = 3

// Diff returns a unified-style line diff from want to got ("" when they
// are equal): hunks headed "@@ -a,n +b,m @@", lines prefixed "-" (only in
// want), "+" (only in got) or " " (both), with 3 lines of contextLines.
func Diff(want, got string) string {
	if want == got {
		return ""
	}
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	ops := editScript(a, b)
	var out strings.Builder
	for start := 0; start < len(ops); {
		first := nextChange(ops, start)
		if first < 0 {
			break
		}
		lo, hi := max(first-contextLines, 0), hunkEnd(ops, first)
		ai, bi := ops[lo].a, ops[lo].b
		var body strings.Builder
		na, nb := 0, 0
		for _, op := range ops[lo:hi] {
			body.WriteString(string(op.kind) + op.line + "\n")
			if op.kind != '+' {
				na++
			}
			if op.kind != '-' {
				nb++
			}
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n%s", ai+1, na, bi+1, nb, body.String())
		start = hi
	}
	return out.String()
}

// op is one line of the edit script: kind ' ', '-' or '+', and the
// positions in want and got where it stands.
type op struct {
	kind byte
	line string
	a, b int
}

// editScript is a shortest edit script from a to b, by longest common
// subsequence.
func editScript(a, b []string) []op {
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []op
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, op{' ', a[i], i, j})
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', a[i], i, j})
			i++
		default:
			ops = append(ops, op{'+', b[j], i, j})
			j++
		}
	}
	return ops
}

// nextChange is the position of the first change at or after from, or -1.
func nextChange(ops []op, from int) int {
	for k := from; k < len(ops); k++ {
		if ops[k].kind != ' ' {
			return k
		}
	}
	return -1
}

// hunkEnd is where the hunk holding the change at first ends: after the
// contextLines following its last change that is within 2*contextLines unchanged
// lines of the previous one.
func hunkEnd(ops []op, first int) int {
	last := first
	for k := first + 1; k < len(ops) && k <= last+2*contextLines; k++ {
		if ops[k].kind != ' ' {
			last = k
		}
	}
	return min(last+contextLines+1, len(ops))
}
