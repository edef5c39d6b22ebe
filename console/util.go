package console

import (
	"slices"
	"strconv"
)

func itoa(n int) string { return strconv.Itoa(n) }

func sortedCopy(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}
