package section

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// Markers returns the begin and end marker lines of section name.
func Markers(name string) (begin, end string) {
	return "<!-- " + name + ":begin -->", "<!-- " + name + ":end -->"
}

// Emit writes body to w and, when path is not empty, makes it section
// name of the file at path (Rewrite): what a simulator does with its
// section.
func Emit(w io.Writer, path, name, body string) error {
	if _, err := io.WriteString(w, body); err != nil {
		return fmt.Errorf("section: %w", err)
	}
	if path == "" {
		return nil
	}
	return Rewrite(path, name, body)
}

// Rewrite replaces section name of the file at path with body (see
// Replace); a missing file is created. The write is atomic.
func Rewrite(path, name, body string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("section: %w", err)
	}
	doc, err := Replace(string(old), name, body)
	if err != nil {
		return fmt.Errorf("section: %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
		return fmt.Errorf("section: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("section: %w", err)
	}
	return nil
}

// Replace returns doc with the text between the markers of section name
// replaced by body; without markers, the section is appended after a
// blank line. Text outside the markers is kept byte for byte.
func Replace(doc, name, body string) (string, error) {
	beginMarker, endMarker := Markers(name)
	block := beginMarker + "\n" + strings.TrimRight(body, "\n") + "\n" + endMarker + "\n"
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
		return "", fmt.Errorf("%s markers out of order or unpaired", name)
	}
	rest := strings.TrimPrefix(doc[end+len(endMarker):], "\n")
	return doc[:begin] + block + rest, nil
}
