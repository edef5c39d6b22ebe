package ratelimit

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// In cluster mode a script's declared keys must share a hash slot. Every
// check has exactly one key (see Redis), so a decision's state never
// spans slots and no hash tag is needed: keys hash over their whole name
// and spread over every master. Each master has a lane of its own that
// batches its checks (redis_cluster_lanes.go); a batch is split by slot,
// the slots of one master run as one script there
// (redis_cluster_node.go), and each master's runs go in a go-redis
// cluster pipeline of their own: one round trip per node per batch, and
// no master's failure in another's pipeline (sendRuns: a lane's batch
// spans several masters only while a slot moves). Within a slot the checks keep their
// batch order; checks on different slots touch different keys, so their
// order does not matter. A run that fails (its node down, paused or
// slow) fails only the calls with a check in it: the failure mode
// answers those, every other call is decided. Each master has its own
// circuit breaker (nodeBreakers): an open one fails the runs of its
// slots at once, without touching the other masters'.

// clusterStats counts the slot groups and calls failed in cluster mode
// while the other masters' slots were decided.
type clusterStats struct {
	groupsFailed atomic.Uint64 // script runs of one slot that failed
	callsFailed  atomic.Uint64 // Decide calls failed by such a run
}

// nodeBreakers are the circuit breakers of a cluster's masters, by
// address ("": the cluster's topology, see admit), made by make on first
// use. A cluster's masters are few (and named by the cluster, not by
// callers): the map is bounded by them.
type nodeBreakers struct {
	m    sync.Map // address -> *breaker
	make func() *breaker
}

func (n *nodeBreakers) get(addr string) *breaker {
	if b, ok := n.m.Load(addr); ok {
		return b.(*breaker)
	}
	b, _ := n.m.LoadOrStore(addr, n.make())
	return b.(*breaker)
}

// each calls f for every breaker made so far.
func (n *nodeBreakers) each(f func(*breaker)) {
	n.m.Range(func(_, v any) bool { f(v.(*breaker)); return true })
}

// slotGroup is the part of a batch on one hash slot.
type slotGroup struct {
	slot    uint16
	node    string        // address of the master that serves the slot (set when err is nil)
	client  *redis.Client // that master's client (set with node)
	err     error         // set before the run: not sent
	keys    []string
	args    []any // args[0]: the TTL grace, then the checks' arguments
	checks  []int // indexes in the batch's keys
	replies int   // values the script replies
}

// noRetryCmd is a script run that go-redis must not resend after a
// network error: it may have run. MOVED and ASK are still followed.
type noRetryCmd struct{ *redis.Cmd }

// NoRetry implements redis.Cmder.
func (noRetryCmd) NoRetry() bool { return true }

// runSlots runs keys' checks (args as the batcher builds them, args[0]
// the grace) in one pipeline per master: one script per master, or per
// slot (see redis_cluster_node.go). It returns the reply values in the order of
// keys, as one script run would, and the error of each check's run (nil
// when it ran); ok reports whether any run succeeded.
func (b *batcher) runSlots(ctx context.Context, keys []string, args []any) (reply []any, errs []error, ok bool) {
	groups, offsets, want := groupBySlot(keys, args)
	b.admit(ctx, groups)
	runs := b.sendRuns(ctx, b.planRuns(groups))
	reply, errs = make([]any, want), make([]error, len(keys))
	for _, g := range groups {
		for _, i := range g.checks {
			errs[i] = g.err // set when it was not sent
		}
	}
	outcome := make(map[string]error, 4) // per node: the first failure of its runs
	for _, r := range runs {
		vals, err := r.cmd.Slice()
		if prev, seen := outcome[r.node]; !seen || (prev == nil && err != nil && breakerFailure(err)) {
			outcome[r.node] = err
		}
		if err == nil && len(vals) != r.replies {
			err = fmt.Errorf("%d values in the reply of %d slot(s) on %s (want %d)", len(vals), len(r.groups), r.node, r.replies)
		}
		if err != nil {
			b.stats.groupsFailed.Add(uint64(len(r.groups)))
			for _, g := range r.groups {
				for _, i := range g.checks {
					errs[i] = err
				}
			}
			continue
		}
		ok = true
		off := 0
		for _, g := range r.groups {
			for _, i := range g.checks {
				off += copy(reply[offsets[i]:offsets[i+1]], vals[off:])
			}
		}
	}
	b.recordNodes(ctx, outcome)
	return reply, errs, ok
}

// recordNodes tells each master's breaker the outcome of its runs.
func (b *batcher) recordNodes(ctx context.Context, outcome map[string]error) {
	now := monoNow()
	reload := false
	for node, err := range outcome {
		b.nodes.get(node).record(err, now)
		reload = reload || err != nil && (breakerFailure(err) || redis.HasErrorPrefix(err, "CLUSTERDOWN"))
	}
	if reload {
		// A master that does not answer may have been replaced by its
		// replica: go-redis learns it only from MOVED or its (60s) reload
		// interval, so ask for the slots again (go-redis runs one reload
		// at a time, at most one each 200ms).
		b.cluster.ReloadState(ctx)
	}
}

// admit finds the master of each group's slot and asks its breaker (once
// per node and batch) whether the runs may go; those of an open breaker
// get ErrBreakerOpen. The cluster's topology has a breaker too (address
// ""): when the slots' masters cannot be learnt (no seed node answers),
// it opens like a node's and fails every run at once.
func (b *batcher) admit(ctx context.Context, groups []*slotGroup) {
	now := monoNow()
	topology := b.nodes.get("")
	if !topology.allow(now) {
		for _, g := range groups {
			g.err = ErrBreakerOpen
		}
		return
	}
	var lookupErr error
	allowed := make(map[string]bool, 4)
	for _, g := range groups {
		c, err := b.cluster.MasterForKey(ctx, g.keys[0])
		if err != nil {
			g.err, lookupErr = err, err
			continue
		}
		g.node, g.client = c.Options().Addr, c
		ok, seen := allowed[g.node]
		if !seen {
			ok = b.nodes.get(g.node).allow(now)
			allowed[g.node] = ok
		}
		if !ok {
			g.err = ErrBreakerOpen
		}
	}
	for _, ok := range allowed {
		if !ok { // its slots may have a new master by now (see runSlots)
			b.cluster.ReloadState(ctx)
			break
		}
	}
	topology.record(lookupErr, monoNow())
}

// scriptCmd is the EVALSHA (or EVAL) of script over keys with args.
func scriptCmd(ctx context.Context, name, script string, keys []string, args []any) *noRetryCmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, script, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	return &noRetryCmd{redis.NewCmd(ctx, a...)}
}

// groupBySlot splits a batch's checks by the hash slot of their keys, in
// the order of their first check; offsets[i] is where check i's reply
// values start in the batch's reply (offsets[len(keys)] is the total).
func groupBySlot(keys []string, args []any) (groups []*slotGroup, offsets []int, want int) {
	bySlot := make(map[uint16]*slotGroup, len(keys))
	offsets = make([]int, len(keys)+1)
	o := 1
	for i, key := range keys {
		name, _ := args[o].(string)
		nargs, nreply := scriptShape(name)
		slot := hashSlot(key)
		g := bySlot[slot]
		if g == nil {
			g = &slotGroup{slot: slot, args: []any{args[0]}}
			bySlot[slot] = g
			groups = append(groups, g)
		}
		g.keys, g.checks = append(g.keys, key), append(g.checks, i)
		g.args = append(g.args, args[o:o+1+nargs]...)
		g.replies += nreply
		offsets[i] = want
		want += nreply
		o += 1 + nargs
	}
	offsets[len(keys)] = want
	return groups, offsets, want
}

// scriptShape is how many arguments follow the algorithm's name in
// redis.lua and how many values it replies (replyLen).
func scriptShape(name string) (nargs, nreply int) {
	switch name {
	case "w":
		return 7, 3
	case "l":
		return 6, 4
	case "g":
		return 7, 2
	default: // "f"
		return 4, 1
	}
}

// hashSlot is the Redis Cluster hash slot of key, in [0, 16384): CRC16
// (XMODEM) of the key, or of its hash tag (the text between the first
// "{" and the next "}", when not empty), modulo 16384, as Redis computes
// it (CLUSTER KEYSLOT). go-redis keeps its own in an internal package.
func hashSlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[k]]
	}
	return crc % 16384
}

// crc16Table is CRC16-CCITT (XMODEM, polynomial 0x1021) by byte.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
