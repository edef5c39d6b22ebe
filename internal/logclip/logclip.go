package logclip

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxBytes bounds a name in a log line, in bytes.
const MaxBytes = 256

// Name returns s when it has at most MaxBytes bytes, else its first
// MaxBytes bytes at most (cut at a rune boundary) followed by "…(N
// bytes)", N the length of s; either way invalid UTF-8 is replaced by "?".
func Name(s string) string { return To(s, MaxBytes) }

// To is Name with limit bytes (>= 0) in place of MaxBytes.
func To(s string, limit int) string {
	if len(s) <= limit {
		return strings.ToValidUTF8(s, "?")
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", strings.ToValidUTF8(s[:cut], "?"), len(s))
}
