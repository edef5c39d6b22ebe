package ratelimit

import (
	"math/bits"
	"time"
)

// The memory store's sketch remembers the usage of the hot keys it evicts
// (see MemoryConfig.MaxBytes): a count-min sketch with conservative
// update, generalized from counts to states. Each cell holds a state that
// dominates (holds at least the usage of, now and later) every state
// folded into it; a key reads two cells and takes the one that holds the
// least usage, which still dominates its own. So a key read back from the
// sketch is never admitted beyond its limit, and the cells grow only with
// the usage of hot keys evicted, not with the number of keys.

// memKind is a sketch's unit and algorithm: states of one kind share a
// sketch, so that every cell's state means one thing. Sliding logs are
// kept as sliding windows.
type memKind struct {
	unit Unit
	alg  Algorithm
}

// memCell is a sketch cell: State's fields but the log (Start is a window
// start in Unix ns, or GCRA's theoretical arrival time).
type memCell struct {
	start       int64
	count, prev uint64
}

// memSketch is one kind's cells (a power of two of them).
type memSketch struct {
	kind  memKind
	cells []memCell
}

// kindOf is the sketch kind of a limit.
func kindOf(l Limit) memKind {
	alg := l.Algorithm
	if alg == SlidingLog {
		alg = SlidingWindow
	}
	u := l.Unit
	if !u.Valid() {
		u = Second
	}
	return memKind{u, alg}
}

// memCellBytes is the accounted size of a sketch cell.
const memCellBytes = 24

// sketchCells is the number of cells of a shard's sketch of each kind for
// a shard of perShardKeys keys and perShardBytes bytes: the power of two
// at or above the keys, but within a quarter of the bytes, in [64,
// MemorySketchCells].
func sketchCells(perShardKeys int, perShardBytes int64) int {
	n := 1 << bits.Len(uint(max(perShardKeys-1, 1)))
	for n > 64 && int64(n*memCellBytes) > perShardBytes/4 {
		n /= 2
	}
	return min(max(n, 64), MemorySketchCells)
}

// idx are the two cells of hash h: from bits 16-27 and 32-43, as the
// shard is chosen by its low bits (at most 16 of them).
func (s *memSketch) idx(h uint64) (int, int) {
	m := uint64(len(s.cells) - 1)
	return int(h >> 16 & m), int(h >> 32 & m)
}

// cellOf is st (a state of s's kind, a sliding log made a sliding window
// at t) as a cell.
func (s *memSketch) cellOf(st *State, t int64) memCell {
	if st.Algorithm != SlidingLog {
		return memCell{st.Start, st.Count, st.Prev}
	}
	u := s.kind.unit.Seconds() * int64(time.Second)
	ws := t - floorMod(t, u)
	c := memCell{start: ws}
	for _, at := range st.Log {
		switch {
		case at >= ws:
			c.count++
		case at >= ws-u:
			c.prev++
		}
	}
	return c
}

// join is the least cell dominating both a and b.
func (s *memSketch) join(a, b memCell) memCell {
	switch s.kind.alg {
	case SlidingWindow:
		u := s.kind.unit.Seconds() * int64(time.Second)
		ws := max(a.start, b.start)
		a, b = shiftWindow(a, ws, u), shiftWindow(b, ws, u)
		return memCell{ws, max(a.count, b.count), max(a.prev, b.prev)}
	case TokenBucket, LeakyBucket:
		return memCell{start: max(a.start, b.start)}
	default: // fixed window: an older window no longer counts
		switch {
		case a.start > b.start:
			return a
		case b.start > a.start:
			return b
		}
		return memCell{a.start, max(a.count, b.count), 0}
	}
}

// shiftWindow is sliding window cell c seen from window start ws.
func shiftWindow(c memCell, ws, u int64) memCell {
	switch c.start {
	case ws:
		return c
	case ws - u:
		return memCell{ws, 0, c.count}
	}
	return memCell{start: ws}
}

// fold joins st, the state of a key of hash h, into its two cells.
func (s *memSketch) fold(h uint64, st *State, t int64) {
	c := s.cellOf(st, t)
	i, j := s.idx(h)
	s.cells[i] = s.join(s.cells[i], c)
	s.cells[j] = s.join(s.cells[j], c)
}

// estimate is the state of a key of hash h checked by c at now: that of
// its two cells holding the least usage; a sliding log gets as many hits
// at now as that usage (at most its limit).
func (s *memSketch) estimate(h uint64, now time.Time, c Check) State {
	i, j := s.idx(h)
	alg := s.kind.alg
	a := State{Algorithm: alg, Start: s.cells[i].start, Count: s.cells[i].count, Prev: s.cells[i].prev}
	b := State{Algorithm: alg, Start: s.cells[j].start, Count: s.cells[j].count, Prev: s.cells[j].prev}
	log := c.Limit.Algorithm == SlidingLog
	c.Hits, c.Limit.Algorithm = 0, alg
	pa, pb := a, b
	ua, ub := Decide(&pa, now, c).Used, Decide(&pb, now, c).Used
	if ub < ua {
		a, ua = b, ub
	}
	if !log {
		return a
	}
	hits := make([]int64, min(ua, uint64(c.Limit.Requests)))
	for k := range hits {
		hits[k] = now.UnixNano()
	}
	return State{Algorithm: SlidingLog, Log: hits}
}
