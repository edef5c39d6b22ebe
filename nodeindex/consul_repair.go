package nodeindex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/internal/logclip"
)

// repairReport says what repairIndexTable changed.
type repairReport struct {
	Restored bool   // the table was restored from its backup (the rest is zero)
	Rebuilt  bool   // the value did not parse: the table was rebuilt from the last good one this replica read (or empty)
	Dropped  int    // slots freed: a duplicate or oversized node, or a node without a usable state
	Fixed    int    // slots kept with bad parts dropped (holders out of range or repeated, a bad release time)
	Cause    string // why the value was refused
}

// repairIndexTable makes a table of a stored value decodeIndexTable
// refused, keeping all it can: a value that does not parse is rebuilt
// from good (the last value this replica decoded; nil: empty); in one
// that parses, a slot whose node repeats an earlier one or is too long is
// freed, holders out of range, repeated or without a session are dropped,
// and a release time that does not parse becomes now (reserved afresh). A
// newer version is an error (errTableNewer): never overwritten.
func repairIndexTable(data, good []byte, now time.Time) (*indexTable, repairReport, error) {
	v, err := tableBody(data)
	if errors.Is(err, errTableNewer) {
		return nil, repairReport{}, errTableNewer
	}
	if err != nil {
		tb, gerr := decodeIndexTable(good)
		if gerr != nil {
			tb = newIndexTable()
		}
		tb.reserveAfresh(now)
		return tb, repairReport{Rebuilt: true}, nil
	}
	var rep repairReport
	tb := newIndexTable()
	for _, h := range v.Holders {
		if h.Session != "" {
			tb.replicas[h.Session] = h.Replica
		}
	}
	tb.slots = make([]indexSlot, len(v.Slots))
	for i, js := range v.Slots {
		if js.Node == "" {
			rep.Fixed += b2i(len(js.HeldBy) > 0 || js.ReleasedAt != "")
			continue
		}
		if _, dup := tb.byNode[js.Node]; dup || len(js.Node) > maxTableNode {
			rep.Dropped++
			continue
		}
		s, fixed := repairSlot(js, v.Holders, now)
		rep.Fixed += b2i(fixed)
		tb.slots[i] = s
		tb.byNode[s.node] = i
	}
	tb.reserveAfresh(now)
	return tb, rep, nil
}

// reserveAfresh makes every released slot reserved from now: the release
// times of a corrupt table are not trusted (a node another replica still
// holds may be marked released long ago), so every reservation runs a
// whole TTL, time for the holders to put their holds back.
func (tb *indexTable) reserveAfresh(now time.Time) {
	for i := range tb.slots {
		if s := &tb.slots[i]; s.node != "" && !s.held() {
			s.releasedAt = now
		}
	}
}

// repairSlot decodes a slot with a node, dropping what is wrong in it;
// fixed reports whether anything was.
func repairSlot(js indexSlotJSON, holders []indexHolderJSON, now time.Time) (s indexSlot, fixed bool) {
	s = indexSlot{node: js.Node}
	for _, p := range js.HeldBy {
		if p < 0 || p >= len(holders) || holders[p].Session == "" || slices.Contains(s.holders, holders[p].Session) {
			fixed = true
			continue
		}
		s.holders = append(s.holders, holders[p].Session)
	}
	if s.held() {
		return s, fixed
	}
	t, err := time.Parse(time.RFC3339Nano, js.ReleasedAt)
	if err != nil {
		t, fixed = now, true
	}
	s.releasedAt = t
	return s, fixed
}

// reassert puts back the nodes this replica holds (node -> index, from
// its own records; a negative index is not known yet) that tb lacks, at
// their index when that slot is free, and adds session to their holders
// where it is missing (a table rebuilt or repaired by another replica may
// have lost them). It returns, sorted, those that could not be put back
// because another node has their index, or the table gives them another,
// and whether it changed tb.
func (tb *indexTable) reassert(held map[string]int, session, replica string) (lost []string, changed bool) {
	for _, node := range sortedKeys(held) {
		i := held[node]
		if i < 0 {
			continue
		}
		if j, ok := tb.byNode[node]; ok {
			if j != i {
				lost = append(lost, node) // the table gave it another index: the table stands
			} else if s := &tb.slots[j]; !slices.Contains(s.holders, session) {
				s.holders, s.releasedAt = append(s.holders, session), time.Time{}
				tb.replicas[session] = replica
				changed = true
			}
			continue
		}
		if i < len(tb.slots) && tb.slots[i].node != "" {
			lost = append(lost, node)
			continue
		}
		for len(tb.slots) <= i {
			tb.slots = append(tb.slots, indexSlot{})
		}
		tb.slots[i] = indexSlot{node: node, holders: []string{session}}
		tb.byNode[node] = i
		tb.replicas[session] = replica
		changed = true
	}
	return lost, changed
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// isNewer reports whether err says a table is of a newer version.
func isNewer(err error) bool { return errors.Is(err, errTableNewer) }

// readTable decodes a group's stored value; a corrupt one is restored
// from the backup, or repaired (rep says how; the caller writes it back
// with check-and-set on the value read, so under the table's lock). A
// table of a newer version is an error.
func (t *Consul) readTable(ctx context.Context, q *groupQueue, old []byte, now time.Time) (*indexTable, *repairReport, error) {
	tb, err := decodeIndexTable(old)
	if err == nil {
		q.good = old
		return tb, nil, nil
	}
	if isNewer(err) {
		return nil, nil, fmt.Errorf("%s: %w", q.key, err)
	}
	pair, _, berr := t.client.KV().Get(q.backup, (&api.QueryOptions{}).WithContext(ctx))
	if berr != nil {
		return nil, nil, fmt.Errorf("read %s: %w", q.backup, berr)
	}
	if pair != nil && len(pair.Value) > 0 {
		if tb, berr := decodeIndexTable(pair.Value); berr == nil {
			return tb, &repairReport{Restored: true, Cause: err.Error()}, nil
		}
	}
	tb, rep, rerr := repairIndexTable(old, q.good, now)
	if rerr != nil {
		return nil, nil, fmt.Errorf("%s: %w", q.key, rerr)
	}
	rep.Cause = err.Error()
	return tb, &rep, nil
}

// heldIndices returns the nodes this replica holds with their index (-1
// while the first Acquire runs).
func (q *groupQueue) heldIndices() map[string]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[string]int, len(q.held))
	for node, h := range q.held {
		out[node] = h.index
	}
	return out
}

// repaired counts and logs a repair written back (rep nil: none) and the
// holds of this replica another node took (each node once while held).
func (t *Consul) repaired(q *groupQueue, rep *repairReport, lost []string) {
	if n := q.newlyLost(lost); n > 0 {
		t.metrics.lost.Add(float64(n))
		t.log.Warn("nodes of this replica lost their client index in the shared table (another node has it)",
			"group", logclip.Name(q.group), "nodes", n)
	}
	if rep == nil {
		return
	}
	how := "repaired"
	switch {
	case rep.Restored:
		how = "restored"
	case rep.Rebuilt:
		how = "rebuilt"
	}
	t.metrics.repairs.WithLabelValues(how).Inc()
	t.log.Warn("the client index table in Consul KV was corrupt; "+how+" it", "key", logclip.Name(q.key), "error", logclip.Name(rep.Cause),
		"slots_dropped", rep.Dropped, "slots_fixed", rep.Fixed)
}

// newlyLost notes the lost nodes and returns how many were not noted
// before; nodes no longer held are forgotten.
func (q *groupQueue) newlyLost(lost []string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	for node := range q.lost {
		if _, ok := q.held[node]; !ok {
			delete(q.lost, node)
		}
	}
	n := 0
	for _, node := range lost {
		if !q.lost[node] {
			if q.lost == nil {
				q.lost = map[string]bool{}
			}
			q.lost[node] = true
			n++
		}
	}
	return n
}

// checksPerRenewal bounds the check rounds checkHolds queues at a time
// (one Consul read each): the groups take turns.
const checksPerRenewal = 16

// checkHolds queues a check round on up to checksPerRenewal idle groups
// where this replica holds nodes, taking turns: it repairs a corrupt
// table and puts back holds a repair by another replica lost, without
// waiting for this replica's next change there.
func (t *Consul) checkHolds() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || len(t.groups) == 0 {
		return
	}
	names := make([]string, 0, len(t.groups))
	for g := range t.groups {
		names = append(names, g)
	}
	slices.Sort(names)
	for n, i := 0, 0; i < len(names) && n < checksPerRenewal; i++ {
		q := t.groups[names[(t.checkNext+i)%len(names)]]
		q.mu.Lock()
		idle := !q.running && len(q.held) > 0
		q.mu.Unlock()
		if idle {
			t.enqueue(q, newIndexOp(opCheck, ""))
			n++
		}
	}
	t.checkNext = (t.checkNext + checksPerRenewal) % len(names)
}
