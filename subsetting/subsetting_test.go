package subsetting

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

var algorithms = []Algorithm{Classic, Steady, Random}

func TestParseAlgorithm(t *testing.T) {
	for name, tc := range map[string]struct {
		in      string
		want    Algorithm
		wantErr string
	}{
		"empty means steady": {in: "", want: Steady},
		"steady":             {in: "steady", want: Steady},
		"classic":            {in: "classic", want: Classic},
		"random (simulator)": {in: "random", want: Random},
		"unknown":            {in: "ringsteady", wantErr: `subsetting: unknown algorithm "ringsteady" (valid: steady, classic)`},
		"case matters":       {in: "Classic", wantErr: "valid: steady, classic"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseAlgorithm(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseAlgorithm(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestNew(t *testing.T) {
	for name, tc := range map[string]struct {
		alg      Algorithm
		backends []string
		size     int
		wantErr  error
		wantIDs  []string
		wantSize int
	}{
		"sorted and deduplicated": {alg: Classic, backends: []string{"b", "a", "c", "a"}, size: 2, wantIDs: []string{"a", "b", "c"}, wantSize: 2},
		"size clamped":            {alg: Steady, backends: []string{"b", "a"}, size: 5, wantIDs: []string{"a", "b"}, wantSize: 2},
		"empty algorithm":         {alg: "", backends: []string{"a"}, size: 1, wantIDs: []string{"a"}, wantSize: 1},
		"no backends":             {alg: Steady, backends: nil, size: 3, wantIDs: []string{}, wantSize: 0},
		"size zero":               {alg: Steady, backends: []string{"a"}, size: 0, wantErr: ErrSize},
		"negative size":           {alg: Classic, backends: []string{"a"}, size: -1, wantErr: ErrSize},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := New(tc.alg, tc.backends, tc.size)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Backends(), tc.wantIDs) || p.Size() != tc.wantSize {
				t.Errorf("Backends() = %v, Size() = %d; want %v, %d", p.Backends(), p.Size(), tc.wantIDs, tc.wantSize)
			}
		})
	}
	if _, err := New("ringsteady", []string{"a"}, 1); err == nil || !strings.HasPrefix(err.Error(), "subsetting: ") {
		t.Errorf("unknown algorithm: err = %v", err)
	}
}

func TestOrderEdges(t *testing.T) {
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			p := mustNew(t, alg, names("e", 10), 3)
			dst := []int{42}
			if got := p.Order(dst, -1, 3); !slices.Equal(got, []int{42}) {
				t.Errorf("negative client appended: %v", got)
			}
			if got := p.Order(dst, 0, 0); !slices.Equal(got, []int{42}) {
				t.Errorf("n = 0 appended: %v", got)
			}
			if got := p.Order(dst[:1], 5, 100); len(got) != 11 || got[0] != 42 {
				t.Errorf("n = 100 of 10 backends: %v, want dst plus 10", got)
			}
			empty := mustNew(t, alg, nil, 3)
			if got := empty.Order(nil, 3, 3); len(got) != 0 {
				t.Errorf("no backends: %v", got)
			}
		})
	}
}

// TestOrderProperties checks, for every algorithm, what Plan promises:
// a subset is Size() distinct valid indices, a full order is a permutation,
// Order(n) is a prefix of Order(n+1), and the plan is a function of the
// backend set only (input order and duplicates do not matter).
func TestOrderProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, alg := range algorithms {
		for _, tc := range []struct{ backends, size int }{{1, 1}, {12, 3}, {30, 7}, {64, 64}, {301, 10}} {
			ids := randomIDs(r, tc.backends)
			shuffled := slices.Clone(ids)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			shuffled = append(shuffled, shuffled[:len(shuffled)/2]...)
			p, q := mustNew(t, alg, ids, tc.size), mustNew(t, alg, shuffled, tc.size)
			for _, c := range []int{0, 1, 31, 32, 33, 299, 1 << 20} {
				checkOrder(t, p, q, c)
			}
		}
	}
}

// checkOrder checks one client of p against the same plan q built from
// another input order.
func checkOrder(t *testing.T, p, q Plan, c int) {
	t.Helper()
	nb := len(p.Backends())
	full := p.Order(nil, c, nb)
	if got := slices.Sorted(slices.Values(full)); !slices.Equal(got, seq(nb)) {
		t.Fatalf("client %d: full order %v is not a permutation of 0..%d", c, full, nb-1)
	}
	for n := range nb + 1 {
		if got := p.Order(nil, c, n); !slices.Equal(got, full[:n]) {
			t.Fatalf("client %d: Order(%d) = %v, not a prefix of %v", c, n, got, full)
		}
	}
	if got := q.Order(nil, c, nb); !slices.Equal(ids(q, got), ids(p, full)) {
		t.Fatalf("client %d: input order changed the order: %v vs %v", c, ids(q, got), ids(p, full))
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestOrderAppendsWithoutAllocating(t *testing.T) {
	for _, alg := range []Algorithm{Classic, Steady} { // random's scratch pool may be emptied by the GC
		p := mustNew(t, alg, names("a", 100), 10)
		dst := make([]int, 0, 100)
		for c := range 64 { // warm the round caches
			p.Order(dst, c, 100)
		}
		if allocs := testing.AllocsPerRun(100, func() { dst = p.Order(dst[:0], 17, 100) }); allocs > 0 {
			t.Errorf("%s: Order allocates %.1f times per call with a large enough dst", alg, allocs)
		}
	}
}

func TestMetrics(t *testing.T) {
	p := mustNew(t, Classic, names("b", 12), 3)
	if got := Loads(p, 4); !slices.Equal(got, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}) {
		t.Errorf("Loads of one full round = %v, want all 1", got)
	}
	q := mustNew(t, Classic, names("b", 13), 3)
	moved, total := Churn(p, p, []int{0, 1, 2})
	if moved != 0 || total != 9 {
		t.Errorf("Churn(p, p) = %d/%d, want 0/9", moved, total)
	}
	if moved, _ := Churn(p, q, []int{0, 1, 2, 3}); moved == 0 {
		t.Errorf("classic churn on a 13th backend = 0, want most connections moved")
	}
}
