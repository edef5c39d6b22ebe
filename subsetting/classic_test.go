package subsetting

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
)

// vectors are the reference outputs of testdata/gen_classic.py (CPython).
type vectors struct {
	Random53 []struct {
		Seed   string   `json:"seed"`
		Values []uint64 `json:"values"`
	} `json:"random53"`
	Shuffles []struct {
		Seed string   `json:"seed"`
		N    int      `json:"n"`
		Want []uint32 `json:"want"`
	} `json:"shuffles"`
	Subsets []struct {
		Name     string              `json:"name"`
		Backends []string            `json:"backends"`
		Size     int                 `json:"size"`
		Want     map[string][]string `json:"want"`
	} `json:"subsets"`
}

func readVectors(t *testing.T) vectors {
	t.Helper()
	b, err := os.ReadFile("testdata/classic.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func parseSeed(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRandomMatchesPython(t *testing.T) {
	for _, tc := range readVectors(t).Random53 {
		t.Run("seed "+tc.Seed, func(t *testing.T) {
			var m mt19937
			m.seedPython(parseSeed(t, tc.Seed))
			for i, want := range tc.Values {
				if got := m.random53(); got != want {
					t.Fatalf("random() #%d = %d/2^53, Python gives %d/2^53", i, got, want)
				}
			}
		})
	}
}

func TestShuffleMatchesPython(t *testing.T) {
	for _, tc := range readVectors(t).Shuffles {
		t.Run(fmt.Sprintf("seed %s n %d", tc.Seed, tc.N), func(t *testing.T) {
			xs := make([]uint32, tc.N)
			for i := range xs {
				xs[i] = uint32(i)
			}
			var m mt19937
			m.seedPython(parseSeed(t, tc.Seed))
			m.shufflePython(xs)
			if !slices.Equal(xs, tc.Want) {
				t.Errorf("got %v, Python gives %v", xs, tc.Want)
			}
		})
	}
}

// TestClassicRoundZeroOfTwelve is the acceptance vector of the design guide.
func TestClassicRoundZeroOfTwelve(t *testing.T) {
	ids := make([]string, 12)
	for i := range ids {
		ids[i] = fmt.Sprintf("b%02d", i)
	}
	p, err := New(Classic, ids, 12)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{0, 6, 3, 5, 1, 7, 11, 9, 2, 4, 8, 10}
	if got := p.Order(nil, 0, 12); !slices.Equal(got, want) {
		t.Errorf("round 0 of 0..11 = %v, want %v", got, want)
	}
}

func TestClassicMatchesBook(t *testing.T) {
	for _, tc := range readVectors(t).Subsets {
		t.Run(tc.Name, func(t *testing.T) {
			in := slices.Clone(tc.Backends)
			slices.Reverse(in) // input order must not matter
			p, err := New(Classic, append(in, in[0]), tc.Size)
			if err != nil {
				t.Fatal(err)
			}
			for client, want := range tc.Want {
				c, _ := strconv.Atoi(client)
				if got := ids(p, p.Order(nil, c, p.Size())); !slices.Equal(got, want) {
					t.Errorf("client %d: got %v, the book gives %v", c, got, want)
				}
			}
		})
	}
}

func TestClassicBalance(t *testing.T) {
	for name, tc := range map[string]struct {
		backends, size, clients int
		min, max                int
	}{
		"12 backends, size 3, 10 clients (design guide)": {12, 3, 10, 2, 3},
		"300 backends, size 10, 300 clients":             {300, 10, 300, 10, 10},
		"leftovers: 10 backends, size 3, 30 clients":     {10, 3, 30, 8, 10},
		"leftovers: 301 backends, size 10, 300 clients":  {301, 10, 300, 9, 10},
		"leftovers: 299 backends, size 10, 3000 clients": {299, 10, 3000, 99, 101},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := New(Classic, names("be", tc.backends), tc.size)
			if err != nil {
				t.Fatal(err)
			}
			loads := Loads(p, tc.clients)
			if lo, hi := slices.Min(loads), slices.Max(loads); lo < tc.min || hi > tc.max {
				t.Errorf("loads in [%d, %d], want within [%d, %d]", lo, hi, tc.min, tc.max)
			}
		})
	}
}

// TestClassicLeftoversWithinTwo checks the documented bound for every
// prefix of clients: loads differ by at most 2.
func TestClassicLeftoversWithinTwo(t *testing.T) {
	for _, n := range []int{7, 10, 23, 101} {
		for _, size := range []int{2, 3, 4, 6} {
			p, err := New(Classic, names("x", n), size)
			if err != nil {
				t.Fatal(err)
			}
			loads := make([]int, n)
			for c := range 40 * n / size {
				for _, i := range p.Order(nil, c, size) {
					loads[i]++
				}
				if d := slices.Max(loads) - slices.Min(loads); d > 2 {
					t.Fatalf("n=%d size=%d: after %d clients loads spread %d", n, size, c+1, d)
				}
			}
		}
	}
}

func TestClassicCandidatesContinueTheRound(t *testing.T) {
	p, err := New(Classic, names("b", 12), 3)
	if err != nil {
		t.Fatal(err)
	}
	// Round 0 is [0 6 3 5 1 7 11 9 2 4 8 10]; client 1 is subset 1: [5 1 7],
	// then the rest of the round from there, wrapping.
	want := []int{5, 1, 7, 11, 9, 2, 4, 8, 10, 0, 6, 3}
	if got := p.Order(nil, 1, 12); !slices.Equal(got, want) {
		t.Errorf("client 1 order = %v, want %v", got, want)
	}
}

// ids maps plan indices to backend ids.
func ids(p Plan, idx []int) []string {
	out := make([]string, len(idx))
	for i, x := range idx {
		out[i] = p.Backends()[x]
	}
	return out
}

// names returns n distinct ids with a prefix.
func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}
