package config

// suggest is a " (did you mean x?)" hint for the unknown name: the one
// candidate within a small edit distance of it, if there is exactly one
// closest.
func suggest(name string, candidates []string) string {
	if best := Closest(name, candidates); best != "" {
		return " (did you mean " + best + "?)"
	}
	return ""
}

// Closest returns the candidate nearest to name by edit distance when it
// is close (at most a third of name's length, and at most 3 edits) and
// nearer than any other; else "".
func Closest(name string, candidates []string) string {
	limit := min(3, max(1, len(name)/3))
	best, bestDist, tie := "", limit+1, false
	for _, c := range candidates {
		switch d := distance(name, c); {
		case d < bestDist:
			best, bestDist, tie = c, d, false
		case d == bestDist && c != best:
			tie = true
		}
	}
	if tie || bestDist > limit {
		return ""
	}
	return best
}

// distance is the Levenshtein distance of a and b (bytes).
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
