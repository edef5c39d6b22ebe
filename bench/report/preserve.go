package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/xds-server/xds-server/bench/section"
)

// The sections of BENCHMARKS.md that other commands own: bench/subsetsim's,
// bench/weightsim's, bench/rlsbench's, the HA benchmark's (this
// command with -ha), the 10,000-node one's (this command with -scale) and
// the load lab's (bench/lab: lab, and lab-envoy with --clients envoy) and
// the real-Envoy one's (this command with -envoy) and the cost model's
// (this command with -model). The report keeps them
// verbatim, markers included, when it rewrites the file.
var preserved = markers("subsetting", "weightsim", "rlsbench", haSection, scaleSection, "lab", "lab-envoy", envoySection, modelSection)

func markers(names ...string) []struct{ begin, end string } {
	out := make([]struct{ begin, end string }, len(names))
	for i, n := range names {
		out[i].begin, out[i].end = section.Markers(n)
	}
	return out
}

// preservedSections returns the preserved sections of the file at path
// (each from its begin marker through its end marker and line end), in
// the order they appear, separated by blank lines; "" if the file or the
// markers are absent.
func preservedSections(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	return markedBlocks(string(b)), nil
}

// markedBlocks returns every preserved block of doc, in document order,
// joined by blank lines.
func markedBlocks(doc string) string {
	type found struct {
		at    int
		block string
	}
	var blocks []found
	for _, m := range preserved {
		if at, block := markedBlock(doc, m.begin, m.end); block != "" {
			blocks = append(blocks, found{at, block})
		}
	}
	slices.SortFunc(blocks, func(a, b found) int { return a.at - b.at })
	texts := make([]string, len(blocks))
	for i, f := range blocks {
		texts[i] = f.block
	}
	return strings.Join(texts, "\n")
}

// markedBlock returns where in doc the begin marker is and doc's text from
// it through the end marker's line, or "" when the markers are missing or
// out of order.
func markedBlock(doc, beginMarker, endMarker string) (int, string) {
	begin := strings.Index(doc, beginMarker)
	if begin < 0 {
		return -1, ""
	}
	end := strings.Index(doc[begin:], endMarker)
	if end < 0 {
		return -1, ""
	}
	end += begin + len(endMarker)
	if end < len(doc) && doc[end] == '\n' {
		end++
	}
	block := doc[begin:end]
	if !strings.HasSuffix(block, "\n") {
		block += "\n"
	}
	return begin, block
}

// withPreserved appends the preserved block to a freshly rendered report,
// after a blank line.
func withPreserved(doc, block string) string {
	if block == "" {
		return doc
	}
	if !strings.HasSuffix(doc, "\n") {
		doc += "\n"
	}
	return doc + "\n" + block
}
