package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// In cluster mode calls do not queue for one pipeline of runs over every
// master: each master has a lane of its own. A call's checks are split by
// the master of their slot (go-redis's map of the cluster), each part
// goes to its master's lane, and each lane batches what queued while its
// run was in flight, as the single-node pipeline does. A master that is
// slow to answer (paused, partitioned: every run waits for the timeout
// until its breaker opens, and again at each of the breaker's probes)
// holds up only its own lane: the calls on the other masters keep being
// decided at their pace (TestRedisClusterHungMasterUnderLoad). Before
// lanes, every batch waited for its slowest master, and the calls queued
// behind it waited too. A call with checks on several masters is answered
// when its last part is.
//
// A part routed to a master that no longer serves its slot (resharding,
// failover) still runs: runSlots finds each slot's master again and
// follows MOVED and ASK. When go-redis has no map of the cluster and no
// seed node answers, the call fails without a lane, and the topology's
// breaker (address "") counts it: once open, calls fail at once.

// laneQueue bounds the parts waiting in one master's lane. A call that
// finds its lane full waits for room (its own goroutine, none other),
// until its deadline, its context's end or the store's close: a lane
// fills only when its master is slow and its calls come faster than its
// runs take them.
const laneQueue = 4096

// lane is one master's queue of parts, run by its pipelines.
type lane struct {
	parts chan lanePart
}

// lanePart is the checks of one call on one master: indexes in the
// call's checks, nil for all of them.
type lanePart struct {
	call   *redisCall
	checks []int
}

// lanes are the masters' lanes by address, made on first use. The
// masters are few and named by the cluster, not by callers: the map is
// bounded by them (a master replaced by its replica leaves an idle lane).
type lanes struct {
	m         sync.Map   // address -> *lane
	mu        sync.Mutex // held to start a lane (and to close the batcher's stop)
	pipelines int        // runs in flight per master
}

// lane returns the lane of addr, starting it on first use.
func (b *batcher) lane(addr string) *lane {
	if l, ok := b.lanes.m.Load(addr); ok {
		return l.(*lane)
	}
	b.lanes.mu.Lock()
	defer b.lanes.mu.Unlock()
	if l, ok := b.lanes.m.Load(addr); ok {
		return l.(*lane)
	}
	l := &lane{parts: make(chan lanePart, laneQueue)}
	select {
	case <-b.stop: // closing: no goroutine starts after shutdown waits
		return l
	default:
	}
	for range b.lanes.pipelines {
		b.wg.Add(1)
		go b.runLane(l)
	}
	b.lanes.m.Store(addr, l)
	return l
}

// route splits call by the masters of its checks and queues each part on
// its master's lane (cluster mode's do).
func (b *batcher) route(ctx context.Context, call *redisCall) {
	topology := b.nodes.get("")
	if !topology.allow(monoNow()) {
		call.done <- redisReply{err: ErrBreakerOpen}
		return
	}
	first, err := b.masterOf(ctx, call.keys[0])
	var addrs []string // each check's master, once they differ
	for j := 1; j < len(call.keys) && err == nil; j++ {
		var addr string
		if addr, err = b.masterOf(ctx, call.keys[j]); addrs == nil && addr != first {
			addrs = make([]string, j, len(call.keys))
			for i := range addrs {
				addrs[i] = first
			}
		}
		if addrs != nil {
			addrs = append(addrs, addr)
		}
	}
	topology.record(err, monoNow())
	if err != nil {
		call.done <- redisReply{err: err}
		return
	}
	if addrs == nil { // the common case: one master, one part of every check
		b.queue(ctx, first, lanePart{call: call})
		return
	}
	var parts []lanePart
	var on []string
	for j, addr := range addrs {
		i := 0
		for i < len(on) && on[i] != addr {
			i++
		}
		if i == len(on) {
			on, parts = append(on, addr), append(parts, lanePart{call: call})
		}
		parts[i].checks = append(parts[i].checks, j)
	}
	call.split = newSplit(call, len(parts))
	for i, p := range parts {
		b.queue(ctx, on[i], p)
	}
}

// masterOf is the address of the master go-redis maps key's slot to; an
// error when it has no map of the cluster and cannot get one (no seed
// node answers: the topology's breaker counts it).
func (b *batcher) masterOf(ctx context.Context, key string) (string, error) {
	c, err := b.cluster.MasterForKey(ctx, key)
	if err != nil {
		return "", err
	}
	return c.Options().Addr, nil
}

// queue puts p on addr's lane, waiting for room if need be (see
// laneQueue); a part that cannot wait longer fails.
func (b *batcher) queue(ctx context.Context, addr string, p lanePart) {
	l := b.lane(addr)
	select {
	case l.parts <- p:
		return
	default:
	}
	wait := time.NewTimer(time.Duration(p.call.deadline - monoNow()))
	defer wait.Stop()
	select {
	case l.parts <- p:
	case <-wait.C:
		b.finish(p, errQueueTimeout, nil, false)
	case <-ctx.Done():
		b.finish(p, ctx.Err(), nil, false)
	case <-b.stop:
		b.finish(p, errStoreClosed, nil, false)
	}
}

// runLane runs l's parts until the batcher stops: the first waiting part
// and whatever else queued meanwhile (up to redisMaxBatchChecks checks)
// in one runSlots.
func (b *batcher) runLane(l *lane) {
	defer b.wg.Done()
	var parts []lanePart
	var keys []string
	args := make([]any, 1, 1+redisArgsPerCheck*redisMaxBatchChecks)
	for {
		select {
		case <-b.stop:
			return
		case first := <-l.parts:
			gather(l.parts)
			parts = append(parts[:0], first)
			n := first.size()
		collect:
			for n < redisMaxBatchChecks {
				select {
				case p := <-l.parts:
					parts, n = append(parts, p), n+p.size()
				default:
					break collect
				}
			}
			keys, args = b.runParts(parts, keys, args)
			clear(parts) // let the calls be collected
		}
	}
}

// runParts runs the checks of parts in one runSlots, by the earliest
// deadline of their calls (the parts past it fail unrun), and answers
// each part. It returns keys and args for reuse.
func (b *batcher) runParts(parts []lanePart, keys []string, args []any) ([]string, []any) {
	now := monoNow()
	deadline := now + int64(b.timeout)
	live := parts[:0]
	for _, p := range parts {
		if p.call.deadline <= now {
			b.finish(p, errQueueTimeout, nil, false)
			continue
		}
		deadline = min(deadline, p.call.deadline)
		live = append(live, p)
	}
	if len(live) == 0 {
		return keys, args
	}
	keys, args = keys[:0], append(args[:0], redisTTLGrace.Milliseconds())
	for _, p := range live {
		keys, args = p.appendChecks(keys, args)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(deadline-now))
	reply, errs, _ := b.runSlots(ctx, keys, args)
	cancel()
	k, off := 0, 0
	for _, p := range live {
		n, nv := p.size(), p.replies()
		var err error
		for _, e := range errs[k : k+n] {
			if e != nil {
				err = e
				break
			}
		}
		b.finish(p, err, reply[off:off+nv], err != nil)
		k, off = k+n, off+nv
	}
	return keys, args
}

// finish answers part p: with err, or its reply values vals (in the order
// of its checks); a split call is answered once its last part is.
// runFailed: err is a failed run's (counted once per call).
func (b *batcher) finish(p lanePart, err error, vals []any, runFailed bool) {
	c, sp := p.call, p.call.split
	if sp == nil { // the whole call: its part of the run's reply, not copied
		if err != nil {
			if runFailed {
				b.stats.callsFailed.Add(1)
			}
			c.done <- redisReply{err: err}
			return
		}
		c.done <- redisReply{vals: vals}
		return
	}
	if err != nil {
		if sp.failed.CompareAndSwap(nil, &err) && runFailed {
			b.stats.callsFailed.Add(1)
		}
	} else {
		off := 0
		for _, j := range p.checks {
			off += copy(sp.vals[sp.valAt[j]:sp.valAt[j+1]], vals[off:])
		}
	}
	if sp.parts.Add(-1) != 0 {
		return
	}
	if e := sp.failed.Load(); e != nil {
		c.done <- redisReply{err: *e}
		return
	}
	c.done <- redisReply{vals: sp.vals}
}

// size is how many checks p has.
func (p lanePart) size() int {
	if p.checks == nil {
		return len(p.call.keys)
	}
	return len(p.checks)
}

// replies is how many reply values p's checks get.
func (p lanePart) replies() int {
	if p.checks == nil {
		return p.call.replies
	}
	n, at := 0, p.call.split.valAt
	for _, j := range p.checks {
		n += at[j+1] - at[j]
	}
	return n
}

// appendChecks appends p's keys and their arguments (each check's
// algorithm name and its arguments) to keys and args.
func (p lanePart) appendChecks(keys []string, args []any) ([]string, []any) {
	c := p.call
	if p.checks == nil {
		return append(keys, c.keys...), append(args, c.args...)
	}
	at := c.split.argAt
	for _, j := range p.checks {
		keys, args = append(keys, c.keys[j]), append(args, c.args[at[j]:at[j+1]]...)
	}
	return keys, args
}

// split is what a call whose checks are on several masters carries: its
// parts not answered yet, the first error of its parts, its reply values
// (filled part by part, each into its checks' places) and where each
// check's arguments and reply values start in the call's (one more entry
// for the end).
type split struct {
	parts        atomic.Int32
	failed       atomic.Pointer[error]
	vals         []any
	argAt, valAt []int
}

// newSplit is the split of c into parts parts.
func newSplit(c *redisCall, parts int) *split {
	n := len(c.keys)
	sp := &split{argAt: make([]int, n+1), valAt: make([]int, n+1)}
	a, v := 0, 0
	for j := range n {
		sp.argAt[j], sp.valAt[j] = a, v
		name, _ := c.args[a].(string)
		nargs, nreply := scriptShape(name)
		a, v = a+1+nargs, v+nreply
	}
	sp.argAt[n], sp.valAt[n] = a, v
	sp.vals = make([]any, v)
	sp.parts.Store(int32(parts))
	return sp
}
