package certs

import (
	"errors"
	"strings"
)

// Match reports whether s matches glob: '*' matches any run of characters
// (none, '/', '.' and ':' included), every other character only itself.
// "*" matches everything; "" matches nothing.
func Match(glob, s string) bool {
	if glob == "" {
		return false
	}
	parts := strings.Split(glob, "*")
	if len(parts) == 1 {
		return glob == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, last)
}

// MatchAny reports whether some glob of globs matches s.
func MatchAny(globs []string, s string) bool {
	for _, g := range globs {
		if Match(g, s) {
			return true
		}
	}
	return false
}

// CheckGlob reports a glob that can match nothing.
func CheckGlob(glob string) error {
	if strings.TrimSpace(glob) == "" {
		return errors.New("is empty")
	}
	return nil
}
