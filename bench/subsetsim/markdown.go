package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// The markers delimiting the simulator's section of a Markdown file. bench/report
// keeps the lines between them (markers included) when it rewrites
// BENCHMARKS.md.
const (
	beginMarker = "<!-- subsetting:begin -->"
	endMarker   = "<!-- subsetting:end -->"
)

// rewriteSection replaces, in the file at path, the lines between the
// markers with section, appending the markers (after a blank line) if the
// file has none. A missing file is created. The write is atomic.
func rewriteSection(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("subsetsim: %w", err)
	}
	doc, err := replaceSection(string(old), section)
	if err != nil {
		return fmt.Errorf("subsetsim: %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
		return fmt.Errorf("subsetsim: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("subsetsim: %w", err)
	}
	return nil
}

// replaceSection returns doc with the text between the marker lines
// replaced by section. Text outside the markers is kept byte for byte.
func replaceSection(doc, section string) (string, error) {
	block := beginMarker + "\n" + strings.TrimRight(section, "\n") + "\n" + endMarker + "\n"
	begin := strings.Index(doc, beginMarker)
	end := strings.Index(doc, endMarker)
	switch {
	case begin < 0 && end < 0:
		if doc != "" && !strings.HasSuffix(doc, "\n") {
			doc += "\n"
		}
		if doc != "" {
			doc += "\n"
		}
		return doc + block, nil
	case begin < 0 || end < begin:
		return "", errors.New("subsetting markers out of order or unpaired")
	}
	rest := doc[end+len(endMarker):]
	rest = strings.TrimPrefix(rest, "\n")
	return doc[:begin] + block + rest, nil
}
