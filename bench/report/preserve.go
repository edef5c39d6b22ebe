package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// The section of BENCHMARKS.md that bench/subsetsim owns. The report keeps
// it verbatim, markers included, when it rewrites the file.
const (
	subsettingBegin = "<!-- subsetting:begin -->"
	subsettingEnd   = "<!-- subsetting:end -->"
)

// preservedSections returns the subsetting section of the file at path
// (from its begin marker through its end marker and line end), or "" if
// the file or the markers are absent.
func preservedSections(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	return markedBlock(string(b)), nil
}

// markedBlock returns doc's text from the begin marker through the end
// marker's line, or "" when the markers are missing or out of order.
func markedBlock(doc string) string {
	begin := strings.Index(doc, subsettingBegin)
	if begin < 0 {
		return ""
	}
	end := strings.Index(doc[begin:], subsettingEnd)
	if end < 0 {
		return ""
	}
	end += begin + len(subsettingEnd)
	if end < len(doc) && doc[end] == '\n' {
		end++
	}
	block := doc[begin:end]
	if !strings.HasSuffix(block, "\n") {
		block += "\n"
	}
	return block
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
