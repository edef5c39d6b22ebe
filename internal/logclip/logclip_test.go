package logclip

import (
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	long := strings.Repeat("a", MaxBytes+10)
	// "é" is two bytes: 255 a's then "é" puts a rune across the cut.
	across := strings.Repeat("a", MaxBytes-1) + "é" + "tail"
	for name, tc := range map[string]struct {
		in, want string
	}{
		"short kept":             {"web", "web"},
		"invalid UTF-8 replaced": {"a\xffb", "a?b"},
		"exactly MaxBytes kept":  {long[:MaxBytes], long[:MaxBytes]},
		"long cut and measured":  {long, long[:MaxBytes] + "…(266 bytes)"},
		"cut at a rune boundary": {across, strings.Repeat("a", MaxBytes-1) + "…(261 bytes)"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Name(tc.in); got != tc.want {
				t.Errorf("Name(%d bytes) = %q, want %q", len(tc.in), got, tc.want)
			}
		})
	}
}

func TestTo(t *testing.T) {
	if got, want := To("abcdef", 3), "abc…(6 bytes)"; got != want {
		t.Errorf("To = %q, want %q", got, want)
	}
	if got := To("abc", 3); got != "abc" {
		t.Errorf("To = %q, want abc", got)
	}
}
