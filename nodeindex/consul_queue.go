package nodeindex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/consulstate"
)

// casAttempts bounds the read-modify-write attempts of one round.
const casAttempts = 50

// casBackoffMax caps the jittered wait between two attempts.
const casBackoffMax = 100 * time.Millisecond

// roundGap is the pause of a group's drain between two rounds (none
// before the first): the ops that arrive meanwhile go in the next round
// together. Each round writes the whole table, so in a connect storm
// fewer, larger rounds write less and conflict less with the other
// replicas: 12,000 nodes through two replicas took 93 writes, 40
// conflicts and 4.7 s with it, 381, 159 and 8.7 s without (the
// 12,000-node test, one run each).
const roundGap = 50 * time.Millisecond

var errIndexClosed = errors.New("nodeindex: consul: closed")

// opKind is what an indexOp does to a group's table.
type opKind uint8

const (
	opAcquire opKind = iota // hold node's index with the current session
	opRelease               // let go of this replica's hold on node
	opUndo                  // unhold node unless it was acquired again since op.gen (a failed Acquire)
	opRehold                // the session changed: move this replica's holds to the current session
	opDropOwn               // Close: let go of everything this replica holds
	opCheck                 // periodic: only the round's own work (repair a corrupt table, put back lost holds)
)

func (k opKind) String() string {
	return [...]string{"acquire", "release", "undo", "rehold", "drop", "check"}[k]
}

// indexOp states: a waiter abandons an op when its ctx ends first.
const (
	opPending int32 = iota
	opDelivered
	opAbandoned
)

// indexOp is one queued change to a group's table.
type indexOp struct {
	kind  opKind
	node  string
	gen   uint64 // opAcquire: its submission number in the group; opUndo: that of the failed Acquire
	fresh bool   // opAcquire: this replica did not hold node when it was submitted
	state atomic.Int32
	done  chan indexResult // buffered 1
}

type indexResult struct {
	index int
	err   error
}

func newIndexOp(kind opKind, node string) *indexOp {
	return &indexOp{kind: kind, node: node, done: make(chan indexResult, 1)}
}

// deliver hands r to the waiter; false when the waiter gave up.
func (op *indexOp) deliver(r indexResult) bool {
	if !op.state.CompareAndSwap(opPending, opDelivered) {
		return false
	}
	op.done <- r
	return true
}

// groupQueue serializes this replica's changes to one group's table and
// batches them: a single drain goroutine runs while ops are pending.
type groupQueue struct {
	group, key string
	backup     string // key of the copy of the table written with it

	mu      sync.Mutex
	pending []*indexOp
	running bool
	gen     uint64              // Acquire submissions so far
	held    map[string]heldNode // nodes this replica holds or is acquiring

	good []byte // the last stored value that decoded; used by the drain goroutine only
	// last is the table this replica last wrote (or read unchanged) and
	// the ModifyIndex the key got: a round that reads that index takes it
	// instead of decoding the value again (the decoding is most of a
	// round's CPU for a large table). Drain goroutine only.
	last struct {
		index uint64
		tb    *indexTable
	}
	lost map[string]bool // held nodes counted as lost (another node has their index); under mu
}

type heldNode struct {
	index int    // -1 until the first Acquire succeeds
	gen   uint64 // the latest Acquire of the node
}

// roundResult is what one round computed.
type roundResult struct {
	index  []int          // by op; meaningful for opAcquire
	reheld map[string]int // opRehold: node -> index
}

// submit queues op on group's queue, unless the table is closed.
func (t *Consul) submit(group string, op *indexOp) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errIndexClosed
	}
	q := t.groups[group]
	if q == nil {
		q = &groupQueue{group: group, key: t.key(group), backup: t.backupKey(group), held: map[string]heldNode{}}
		t.groups[group] = q
	}
	t.enqueue(q, op)
	return nil
}

// enqueue appends op, records holds, and starts a drain if none runs.
func (t *Consul) enqueue(q *groupQueue, op *indexOp) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch op.kind {
	case opAcquire:
		q.gen++
		h, ok := q.held[op.node]
		op.gen, op.fresh = q.gen, !ok || h.index < 0
		if !ok {
			h.index = -1
		}
		h.gen = q.gen
		q.held[op.node] = h
	case opRelease:
		delete(q.held, op.node)
	}
	q.pending = append(q.pending, op)
	if !q.running {
		q.running = true
		t.rounds.Add(1)
		go t.drain(q)
	}
}

// wait returns op's result, or gives up when ctx ends first.
func (t *Consul) wait(ctx context.Context, group string, op *indexOp) (int, error) {
	var r indexResult
	select {
	case r = <-op.done:
	case <-ctx.Done():
		if op.state.CompareAndSwap(opPending, opAbandoned) {
			r.err = ctx.Err()
		} else {
			r = <-op.done
		}
	}
	if r.err != nil {
		return 0, fmt.Errorf("nodeindex: consul: %s node %q in group %q: %w", op.kind, op.node, group, r.err)
	}
	return r.index, nil
}

// drain runs rounds, roundGap apart, until q has nothing pending.
func (t *Consul) drain(q *groupQueue) {
	defer t.rounds.Done()
	for first := true; ; first = false {
		if !first {
			_ = consulstate.Sleep(t.ctx, nil, roundGap)
		}
		q.mu.Lock()
		ops := q.pending
		q.pending = nil
		if len(ops) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		t.round(q, ops)
	}
}

// round applies ops in one read-modify-write and settles their results.
// Acquires abandoned before the round are left out; a fresh Acquire that
// fails or is abandoned is undone by a later op.
func (t *Consul) round(q *groupQueue, ops []*indexOp) {
	var live, skipped []*indexOp
	for _, op := range ops {
		if op.kind == opAcquire && op.state.Load() == opAbandoned {
			skipped = append(skipped, op)
		} else {
			live = append(live, op)
		}
	}
	var res roundResult
	var err error
	if len(live) > 0 {
		ctx, cancel := context.WithTimeout(t.ctx, indexRoundTimeout)
		res, err = t.commit(ctx, q, live)
		cancel()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, op := range skipped {
		t.undoLocked(q, op)
	}
	for i, op := range live {
		r := indexResult{err: err}
		if err == nil {
			r.index = res.index[i]
		}
		delivered := op.deliver(r)
		switch {
		case op.kind == opUndo && err == nil:
			if h, ok := q.held[op.node]; ok && h.gen == op.gen {
				delete(q.held, op.node)
			}
		case op.kind == opUndo:
			t.log.Warn("could not let go of the index of a failed acquire; it stays held until this replica closes",
				"group", q.group, "node", op.node, "error", err)
		case op.kind != opAcquire:
		case err == nil && delivered:
			if h, ok := q.held[op.node]; ok {
				h.index = r.index
				q.held[op.node] = h
			}
		default:
			t.undoLocked(q, op)
		}
	}
	t.settleRehold(q, res.reheld)
	if err != nil {
		t.log.Debug("consul index round failed", "group", q.group, "ops", len(live), "error", err)
	}
}

// undoLocked queues the undo of a failed or abandoned fresh Acquire.
// q.mu is held; the running drain picks the op up.
func (t *Consul) undoLocked(q *groupQueue, op *indexOp) {
	if !op.fresh {
		return
	}
	u := newIndexOp(opUndo, op.node)
	u.gen = op.gen
	q.pending = append(q.pending, u)
}

// settleRehold records the indices of the nodes moved to a new session and
// logs those whose index changed. q.mu is held.
func (t *Consul) settleRehold(q *groupQueue, reheld map[string]int) {
	for node, i := range reheld {
		h, ok := q.held[node]
		if !ok {
			continue
		}
		if h.index >= 0 && h.index != i {
			t.log.Warn("client index changed after the consul session was lost",
				"group", q.group, "node", node, "old_index", h.index, "index", i)
		}
		h.index = i
		q.held[node] = h
	}
}

// commit retries attempt on check-and-set conflicts, at most casAttempts
// times, with jittered backoff.
func (t *Consul) commit(ctx context.Context, q *groupQueue, ops []*indexOp) (roundResult, error) {
	for n := 1; ; n++ {
		res, ok, err := t.attempt(ctx, q, ops)
		if err != nil {
			t.metrics.attempts.WithLabelValues("failed").Inc()
		}
		if err != nil || ok {
			return res, err
		}
		t.metrics.attempts.WithLabelValues("conflict").Inc()
		t.log.Debug("consul index check-and-set conflict; retrying", "group", q.group, "attempt", n, "ops", len(ops))
		if n == casAttempts {
			return roundResult{}, fmt.Errorf("key %s: %d check-and-set conflicts in a row", q.key, n)
		}
		wait := min(time.Millisecond<<min(n, 10), casBackoffMax)
		if !consulstate.Sleep(ctx, nil, rand.N(wait)+1) {
			return roundResult{}, ctx.Err()
		}
	}
}

// attempt reads the table, applies ops and writes it back with
// check-and-set; ok is false on a conflict.
func (t *Consul) attempt(ctx context.Context, q *groupQueue, ops []*indexOp) (res roundResult, ok bool, err error) {
	pair, _, err := t.client.KV().Get(q.key, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return res, false, fmt.Errorf("read %s: %w", q.key, err)
	}
	var old []byte
	var modify uint64 // 0 makes the write create the key only if it is absent
	if pair != nil {
		old, modify = pair.Value, pair.ModifyIndex
	}
	session, own := t.sessionState()
	now := t.now()
	var tb *indexTable
	var rep *repairReport
	known := q.last.tb != nil && pair != nil && pair.ModifyIndex == q.last.index
	if known {
		tb = q.last.tb // the value is what this replica last wrote or read
	} else if tb, rep, err = t.readTable(ctx, q, old, now); err != nil {
		return res, false, err
	}
	q.last.tb = nil // tb changes below: kept again once written
	lost, changed := tb.reassert(q.heldIndices(), session, t.replica)
	if known && !changed && onlyChecks(ops) {
		q.last.tb = tb
		t.metrics.attempts.WithLabelValues("unchanged").Inc()
		return roundResult{index: make([]int, len(ops))}, true, nil // a check of a table as it was: nothing to encode
	}
	if needsLiveness(tb, ops, session) {
		alive, err := consulstate.LiveSessions(ctx, t.client)
		if err != nil {
			return res, false, err
		}
		tb.drop(func(s string) bool { return !alive[s] && s != session }, now)
	}
	res = t.apply(tb, q, ops, session, own, now)
	data, err := tb.encode()
	if err != nil {
		return res, false, err
	}
	if bytes.Equal(data, old) || (pair == nil && len(tb.slots) == 0) {
		if pair != nil {
			q.last.index, q.last.tb = modify, tb
		}
		t.metrics.attempts.WithLabelValues("unchanged").Inc()
		return res, true, nil // nothing to write
	}
	ok, index, err := consulstate.Txn(ctx, t.client, api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: q.key, Value: data, Index: modify}},
		{KV: &api.KVTxnOp{Verb: api.KVSet, Key: q.backup, Value: data}},
	})
	if err != nil {
		return res, false, fmt.Errorf("write %s: %w", q.key, err)
	}
	if ok {
		q.good = data
		q.last.index, q.last.tb = index, tb
		t.metrics.attempts.WithLabelValues("written").Inc()
		t.metrics.valueBytes.Observe(float64(len(data)))
		t.repaired(q, rep, lost)
	}
	return res, ok, nil
}

// onlyChecks reports whether ops are all opCheck (they change nothing
// but what the round itself repairs or puts back).
func onlyChecks(ops []*indexOp) bool {
	for _, op := range ops {
		if op.kind != opCheck {
			return false
		}
	}
	return true
}

// needsLiveness reports whether dead holders must be found before ops are
// applied: when a node may need a new slot while other sessions hold slots
// (so that a crashed replica's slots get reserved and, after the TTL,
// reused), or when a node is released that other sessions also hold (so
// that its reservation starts now, not when the dead holder is found later).
func needsLiveness(tb *indexTable, ops []*indexOp, session string) bool {
	other := func(s string) bool { return s != session }
	others := -1 // whether other sessions hold slots (a pass over the table): found once, when first needed
	othersHold := func() bool {
		if others < 0 {
			others = b2i(slices.ContainsFunc(tb.sessions(), other))
		}
		return others == 1
	}
	for _, op := range ops {
		switch op.kind {
		case opRehold:
			return othersHold()
		case opAcquire:
			if !tb.has(op.node) && othersHold() {
				return true
			}
		case opRelease, opUndo:
			if i, ok := tb.byNode[op.node]; ok && slices.ContainsFunc(tb.slots[i].holders, other) {
				return true
			}
		}
	}
	return false
}

// apply runs ops, in order, on tb.
func (t *Consul) apply(tb *indexTable, q *groupQueue, ops []*indexOp, session string, own func(string) bool, now time.Time) roundResult {
	res := roundResult{index: make([]int, len(ops))}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, op := range ops {
		switch op.kind {
		case opAcquire:
			res.index[i] = tb.acquire(op.node, session, t.replica, now, t.ttl)
		case opRelease:
			tb.release(op.node, own, now)
		case opUndo:
			if h, ok := q.held[op.node]; !ok || h.gen == op.gen {
				tb.unhold(op.node, own, now)
			}
		case opRehold:
			tb.drop(func(s string) bool { return own(s) && s != session }, now)
			res.reheld = map[string]int{}
			for _, node := range slices.Sorted(maps.Keys(q.held)) {
				res.reheld[node] = tb.acquire(node, session, t.replica, now, t.ttl)
			}
		case opDropOwn:
			tb.drop(own, now)
		}
	}
	return res
}
