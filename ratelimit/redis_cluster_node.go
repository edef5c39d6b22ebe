package ratelimit

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis calls a script once per slot when its declared keys span one
// slot, and a run costs about as much as the few commands it makes: a
// batch spread over 16,384 slots would pay one run per check. So the
// slot groups of a batch that share a master run as one script there
// (redisNodeScript): its keys travel in ARGV, which Redis 7's
// allow-cross-slot-keys flag lets it touch, and KEYS[1] (the first key)
// routes the run, so go-redis still picks the node and follows MOVED and
// ASK. A run carries the id of the master it was planned for and runs
// nothing on another node (NOTPLANNED): ASKING would let it touch keys
// of the importing slot that still live on the source. The script reads
// every key before it writes one: a key whose slot this master no longer
// serves (resharding, a failover go-redis has not seen yet) fails the
// run before any write. Either way its slot groups run again one script
// per slot, where go-redis's redirections apply. A master that cannot
// load the flagged script (Redis before 7) turns the node runs off for
// the store's life.

// redisNodeLua is redis.lua with the allow-cross-slot-keys flag.
var redisNodeLua = "#!lua flags=allow-cross-slot-keys\n" + redisLua

var redisNodeScript = redis.NewScript(redisNodeLua)

// nodeIDs are the masters' ids (CLUSTER MYID) by address, for their
// node runs. An id is looked up off the batch's path, when a master
// first has slot groups in a batch; until it is known (or while it
// cannot be read) that master's slots run one script each. Bounded by
// the cluster's masters, like nodeBreakers.
type nodeIDs struct {
	m       sync.Map // address -> id
	pending sync.Map // address -> struct{}: a lookup in flight
}

// id is the id of the master at addr, when known.
func (n *nodeIDs) id(addr string) (string, bool) {
	v, ok := n.m.Load(addr)
	if !ok {
		return "", false
	}
	return v.(string), true
}

// lookup asks c, the master at addr, for its id in the background (one
// lookup per address at a time, bounded by the store's timeout; the
// store's close waits for it). A lookup that fails (the master down, an
// ACL without CLUSTER) is not tried again for idRetry: not a command
// per batch.
func (n *nodeIDs) lookup(b *batcher, addr string, c *redis.Client) {
	if _, busy := n.pending.LoadOrStore(addr, struct{}{}); busy {
		return
	}
	b.wg.Add(1) // the pipeline calling holds a count: Add cannot race Wait
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		defer cancel()
		id, err := c.ClusterMyID(ctx).Result()
		if err != nil || id == "" {
			time.AfterFunc(idRetry, func() { n.pending.Delete(addr) })
			return
		}
		n.m.Store(addr, id)
		n.pending.Delete(addr)
	}()
}

// idRetry is how long a master whose id could not be read waits for the
// next lookup.
const idRetry = time.Second

// forget drops addr's id: a node run met another node there, or the
// address now serves another process; the next batch looks it up again.
func (n *nodeIDs) forget(addr string) { n.m.Delete(addr) }

// nodeRunStats counts the node runs redone per slot.
type nodeRunStats struct {
	off    atomic.Bool   // a master could not load redisNodeLua: per slot only
	redone atomic.Uint64 // node runs redone per slot (a key not served there)
}

// clusterRun is one script run of a batch in cluster mode: one slot
// group, or every slot group of one master.
type clusterRun struct {
	node    string
	id      string // node runs: the id of the master they are for
	groups  []*slotGroup
	replies int
	cmd     *noRetryCmd
}

// planRuns turns the admitted slot groups into runs: one per master for
// masters with several slot groups, one per slot otherwise (or when node
// runs are off, or the master's id is not known yet).
func (b *batcher) planRuns(groups []*slotGroup) []*clusterRun {
	runs := make([]*clusterRun, 0, 4)
	byNode := make(map[string]*clusterRun, 4) // nil: that master's slots run one script each
	for _, g := range groups {
		if g.err != nil {
			continue
		}
		if b.nodeRuns.off.Load() {
			runs = append(runs, slotRun(g))
			continue
		}
		r, seen := byNode[g.node]
		if !seen {
			if id, ok := b.ids.id(g.node); ok {
				r = &clusterRun{node: g.node, id: id}
				runs = append(runs, r)
			} else {
				b.ids.lookup(b, g.node, g.client)
			}
			byNode[g.node] = r
		}
		if r == nil {
			runs = append(runs, slotRun(g))
			continue
		}
		r.groups = append(r.groups, g)
		r.replies += g.replies
	}
	return runs
}

func slotRun(g *slotGroup) *clusterRun {
	return &clusterRun{node: g.node, groups: []*slotGroup{g}, replies: g.replies}
}

// command is r's EVALSHA, or its EVAL when eval is set.
func (r *clusterRun) command(ctx context.Context, eval bool) *noRetryCmd {
	if len(r.groups) == 1 {
		g := r.groups[0]
		name, script := "evalsha", redisScript.Hash()
		if eval {
			name, script = "eval", redisLua
		}
		return scriptCmd(ctx, name, script, g.keys, g.args)
	}
	name, script := "evalsha", redisNodeScript.Hash()
	if eval {
		name, script = "eval", redisNodeLua
	}
	nk, na := 0, 0
	for _, g := range r.groups {
		nk, na = nk+len(g.keys), na+len(g.args)-1
	}
	args := make([]any, 0, 4+nk+na)
	args = append(args, r.groups[0].args[0], "k", r.id, nk) // the grace, the marker, the master's id, the key count
	for _, g := range r.groups {
		for _, k := range g.keys {
			args = append(args, k)
		}
	}
	for _, g := range r.groups {
		args = append(args, g.args[1:]...)
	}
	return scriptCmd(ctx, name, script, r.groups[0].keys[:1], args)
}

// retryRuns sends again, in one more pipeline per round, the runs whose
// script the node lacked (after a restart or SCRIPT FLUSH: the script
// itself this time) and, one script per slot, the slot groups of node
// runs that found a key not served there. It returns the runs whose
// replies count. A node run sent to a node that lacks its script and
// then finds a key elsewhere takes three rounds; no run goes back to an
// earlier form, so three is the bound.
func (b *batcher) retryRuns(ctx context.Context, runs []*clusterRun) []*clusterRun {
	for range 3 {
		var again []redis.Cmder
		send := func(r *clusterRun) {
			r.cmd = r.command(ctx, true)
			again = append(again, r.cmd)
		}
		out := make([]*clusterRun, 0, len(runs))
		for _, r := range runs {
			err := r.cmd.Err()
			switch {
			case err == nil || !isRedisError(err):
			case redis.HasErrorPrefix(err, "NOSCRIPT"):
				send(r)
			case len(r.groups) > 1 && (notServedHere(err) || scriptUnsupported(err)):
				if scriptUnsupported(err) {
					b.nodeRuns.off.Store(true)
				}
				if redis.HasErrorPrefix(err, "NOTPLANNED") {
					b.ids.forget(r.node) // another node at that address, perhaps
				}
				b.nodeRuns.redone.Add(1)
				for _, g := range r.groups {
					s := slotRun(g)
					send(s)
					out = append(out, s)
				}
				continue
			case len(r.groups) == 1 && len(r.groups[0].keys) > 1 && strings.HasPrefix(err.Error(), "TRYAGAIN "):
				// The slot is moving and holds some of the run's keys
				// but not all: nothing ran. One key per script cannot
				// get TRYAGAIN (a key there runs, one gone is ASKed).
				for _, g := range splitChecks(r.groups[0]) {
					s := slotRun(g)
					send(s)
					out = append(out, s)
				}
				continue
			}
			out = append(out, r)
		}
		runs = out
		if again == nil {
			break
		}
		b.execPipeline(ctx, again)
	}
	return runs
}

// sendRuns sends runs, each master's in a pipeline of its own, all at
// once, and then, for each master as soon as its replies are in, what
// retryRuns sends again (the same master's runs, in one more pipeline).
// The masters must not share a pipeline: go-redis sends again the
// commands of a node it could not connect to (nothing was sent) and,
// when the pipeline's context ends during the wait before such a retry,
// sets that error on every command of the pipeline, replies received
// from the other masters included. And one master slow to fail leaves
// the others their time for their retries. It returns the runs whose
// replies count.
func (b *batcher) sendRuns(ctx context.Context, runs []*clusterRun) []*clusterRun {
	byNode := make(map[string][]*clusterRun, 4)
	for _, r := range runs {
		byNode[r.node] = append(byNode[r.node], r)
	}
	out := make([][]*clusterRun, 0, len(byNode))
	for _, rs := range byNode {
		out = append(out, rs)
	}
	var wg sync.WaitGroup
	for i := 1; i < len(out); i++ {
		wg.Go(func() { out[i] = b.sendNode(ctx, out[i]) })
	}
	if len(out) > 0 {
		out[0] = b.sendNode(ctx, out[0]) // from this goroutine
	}
	wg.Wait()
	runs = runs[:0]
	for _, rs := range out {
		runs = append(runs, rs...)
	}
	return runs
}

// sendNode sends the runs of one master in one pipeline, then again
// those retryRuns picks, and returns the runs whose replies count.
func (b *batcher) sendNode(ctx context.Context, runs []*clusterRun) []*clusterRun {
	cmds := make([]redis.Cmder, len(runs))
	for i, r := range runs {
		r.cmd = r.command(ctx, false)
		cmds[i] = r.cmd
	}
	b.execPipeline(ctx, cmds)
	return b.retryRuns(ctx, runs)
}

// execPipeline sends cmds in one go-redis cluster pipeline; each command
// keeps its own error.
func (b *batcher) execPipeline(ctx context.Context, cmds []redis.Cmder) {
	pipe := b.cluster.Pipeline()
	for _, c := range cmds {
		_ = pipe.Process(ctx, c)
	}
	_, _ = pipe.Exec(ctx)
}

func isRedisError(err error) bool { return !breakerFailure(err) }

// notServedHere reports whether err says that a key of the run is not on
// the node that ran it: the script read a key of a slot served elsewhere,
// or go-redis gave up following redirections.
func notServedHere(err error) bool {
	msg := err.Error()
	for _, p := range []string{"MOVED ", "ASK ", "TRYAGAIN ", "CROSSSLOT ", "NOTPLANNED "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return strings.Contains(msg, "non local key") || strings.Contains(msg, "do not hash to the same slot")
}

// scriptUnsupported reports whether err is a Redis that cannot compile
// the flagged script (before 7.0, "#!" is not Lua).
func scriptUnsupported(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "compiling script") || strings.Contains(msg, "Unknown lua shebang") ||
		strings.Contains(msg, "Unexpected flag") || strings.Contains(msg, "not allowed from script")
}

// splitChecks is g's checks, a slot group each.
func splitChecks(g *slotGroup) []*slotGroup {
	out := make([]*slotGroup, len(g.keys))
	o := 1
	for j, key := range g.keys {
		name, _ := g.args[o].(string)
		nargs, nreply := scriptShape(name)
		out[j] = &slotGroup{slot: g.slot, node: g.node, keys: []string{key}, checks: []int{g.checks[j]},
			args: append([]any{g.args[0]}, g.args[o:o+1+nargs]...), replies: nreply}
		o += 1 + nargs
	}
	return out
}
