package config

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// FieldError is one problem of the configuration: the key, the value as
// it was given (empty when the problem is not one value's) and the reason.
type FieldError struct {
	Key     string `json:"key"`
	Value   string `json:"value,omitempty"`
	Reason  string `json:"reason"`
	Warning bool   `json:"warning,omitempty"` // does not make the configuration invalid
}

// Error is "key: value: reason", or "key: reason" without a value.
func (e FieldError) Error() string {
	if e.Value == "" {
		return e.Key + ": " + e.Reason
	}
	return e.Key + ": " + e.Value + ": " + e.Reason
}

// Errors are every problem of a configuration, sorted by key path.
type Errors []FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// JSON is es as a JSON array (never null).
func (es Errors) JSON() []byte {
	if es == nil {
		es = Errors{}
	}
	b, _ := json.MarshalIndent(es, "", "  ")
	return b
}

// Invalid reports whether es holds an error that is not a warning.
func (es Errors) Invalid() bool {
	return slices.ContainsFunc(es, func(e FieldError) bool { return !e.Warning })
}

// Err is es as an error: nil when es is empty.
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// Sorted returns es sorted by key path (listeners[2] before
// listeners[10]), then value and reason, without duplicates.
func (es Errors) Sorted() Errors {
	slices.SortStableFunc(es, func(a, b FieldError) int {
		return cmp.Or(compareKeys(a.Key, b.Key), strings.Compare(a.Value, b.Value), strings.Compare(a.Reason, b.Reason))
	})
	return slices.Compact(es)
}

// compareKeys orders key paths with their numbers compared as numbers.
func compareKeys(a, b string) int {
	for a != "" && b != "" {
		na, ra := leadingNumber(a)
		nb, rb := leadingNumber(b)
		if na >= 0 && nb >= 0 {
			if c := cmp.Compare(na, nb); c != 0 {
				return c
			}
			a, b = ra, rb
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

// leadingNumber splits the decimal number that starts s off it; -1 if none.
func leadingNumber(s string) (int, string) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || i > 9 {
		return -1, s
	}
	n, _ := strconv.Atoi(s[:i])
	return n, s[i:]
}

// problems collects field errors.
type problems struct{ errs Errors }

// bad records a problem of key's value.
func (p *problems) bad(key string, value any, reason string) {
	p.errs = append(p.errs, FieldError{Key: key, Value: render(value), Reason: reason})
}

// badKey records a problem that is not one value's.
func (p *problems) badKey(key, reason string) {
	p.errs = append(p.errs, FieldError{Key: key, Reason: reason})
}

func (p *problems) warn(key string, value any, reason string) {
	p.errs = append(p.errs, FieldError{Key: key, Value: render(value), Reason: reason, Warning: true})
}
