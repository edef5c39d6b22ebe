package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// render writes a value as the user gave it, for messages: strings as
// they are ("" when empty), durations as people write them.
func render(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		if v == "" {
			return `""`
		}
		return v
	case time.Duration:
		return formatDuration(v)
	case []string:
		return "[" + strings.Join(v, ", ") + "]"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = render(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		return "{...}"
	default:
		return fmt.Sprint(v)
	}
}

// parse converts v, a YAML value from the file or a string from the
// environment or a flag, to kind's Go type, or says why it cannot.
func parse(kind Kind, v any) (any, string) {
	if _, ok := v.(map[string]any); ok {
		return nil, fmt.Sprintf("is a section, want a %s", kind)
	}
	if _, ok := v.([]any); ok && kind != List {
		return nil, fmt.Sprintf("is a list, want a %s", kind)
	}
	switch kind {
	case String:
		if v == nil {
			return "", ""
		}
		return fmt.Sprint(v), ""
	case Duration:
		return parseDuration(v)
	case Uint32:
		return parseUint32(v)
	case Float:
		switch n := v.(type) {
		case float64:
			return n, ""
		case int:
			return float64(n), ""
		case string:
			if f, err := strconv.ParseFloat(strings.TrimSpace(n), 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				return f, ""
			}
		}
		return nil, "is not a number"
	case Bool:
		switch b := v.(type) {
		case bool:
			return b, ""
		case string:
			if p, err := strconv.ParseBool(strings.TrimSpace(b)); err == nil {
				return p, ""
			}
		}
		return nil, "is not true or false"
	case List:
		return parseList(v)
	}
	return v, ""
}

const durationHint = "(like 50ms, 5s or 1m)"

func parseDuration(v any) (any, string) {
	switch d := v.(type) {
	case int:
		if d == 0 {
			return time.Duration(0), ""
		}
		return nil, "a duration needs a unit " + durationHint
	case float64:
		return nil, "a duration needs a unit " + durationHint
	case string:
		s := strings.TrimSpace(d)
		if p, err := time.ParseDuration(s); err == nil {
			return p, ""
		}
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return nil, "a duration needs a unit " + durationHint
		}
	}
	return nil, "is not a duration " + durationHint
}

func parseUint32(v any) (any, string) {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case uint64:
		if x > math.MaxUint32 {
			return nil, fmt.Sprintf("is not in [0, %d]", uint32(math.MaxUint32))
		}
		n = int64(x)
	case string:
		p, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			if _, ferr := strconv.ParseFloat(strings.TrimSpace(x), 64); ferr == nil {
				return nil, fmt.Sprintf("is not in [0, %d]", uint32(math.MaxUint32))
			}
			return nil, "is not a whole number"
		}
		n = p
	case float64:
		if x == math.Trunc(x) && x >= 0 && x <= math.MaxUint32 {
			return uint32(x), ""
		}
		return nil, fmt.Sprintf("is not a whole number in [0, %d]", uint32(math.MaxUint32))
	default:
		return nil, "is not a whole number"
	}
	if n < 0 || n > math.MaxUint32 {
		return nil, fmt.Sprintf("is not in [0, %d]", uint32(math.MaxUint32))
	}
	return uint32(n), ""
}

func parseList(v any) (any, string) {
	switch l := v.(type) {
	case nil:
		return []string{}, ""
	case string:
		out := []string{}
		for _, s := range strings.Split(l, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out, ""
	case []any:
		out := make([]string, 0, len(l))
		for _, e := range l {
			switch e.(type) {
			case map[string]any, []any:
				return nil, "is not a list of strings"
			}
			out = append(out, fmt.Sprint(e))
		}
		return out, ""
	}
	return nil, "is not a list"
}
