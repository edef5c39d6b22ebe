package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of the Redis batching.
const (
	// DefaultRedisPipelines is how many script runs may be in flight at
	// once: while they are, new calls queue and go together in the next.
	// One gives the largest batches, which costs Redis and this process
	// the least per decision (on 2 cores, 64 requests in flight: 32k
	// decisions/s with 1, 27k with 4).
	DefaultRedisPipelines = 1
	// redisMaxBatchChecks bounds the checks of one script run (keys and
	// 8 arguments each), so that no run holds Redis for long.
	redisMaxBatchChecks = 512
)

// redisCall is one Decide call waiting for a script run: its keys, their
// arguments (the algorithm's name first) and how many reply values they
// get (replyLen of each).
type redisCall struct {
	keys     []string
	args     []any
	replies  int
	deadline int64           // monoNow at the call's start plus the timeout
	done     chan redisReply // buffered: a caller that gave up leaves the reply behind

	// Room for a call of up to inlineDescriptors checks: one allocation
	// for the lot.
	res     [inlineDescriptors]Result
	keyBuf  [inlineDescriptors]string
	argBuf  [inlineDescriptors * redisArgsPerCheck]any
	sentBuf [inlineDescriptors]int

	split *split // cluster mode: checks on several masters (redis_cluster_lanes.go)
}

// redisReply is the part of a script run's reply for one call.
type redisReply struct {
	vals []any
	err  error
}

// batcher runs the script for many Decide calls at once. Calls queue on
// calls; each of its pipelines takes the first waiting call and whatever
// else is queued then (up to redisMaxBatchChecks checks), runs the script
// once over all their checks and hands each call its part of the reply.
// There is no waiting to fill a batch: a batch is what queued while the
// previous runs were in flight, so under light load every call runs
// alone, and under heavy load one round trip (and one script invocation
// in Redis) serves many calls. The script decides each check on its own,
// so a batch gives the same answers as the calls one by one, in queue
// order, atomically.
type batcher struct {
	client   *redis.Client        // single and sentinel modes
	cluster  *redis.ClusterClient // cluster mode: one script per slot (runSlots)
	nodes    nodeBreakers         // cluster mode: each master's breaker (br never opens)
	stats    clusterStats
	nodeRuns nodeRunStats // cluster mode: one script per master
	ids      nodeIDs      // cluster mode: the masters' ids, for their node runs
	lanes    lanes        // cluster mode: each master's runs (redis_cluster_lanes.go)
	br       *breaker     // told the outcome of every run
	timeout  time.Duration
	calls    chan *redisCall // single and sentinel modes: the calls waiting for a pipeline
	stop     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
}

func newBatcher(client *redis.Client, br *breaker, timeout time.Duration, pipelines int, cluster *redis.ClusterClient) *batcher {
	b := &batcher{client: client, cluster: cluster, br: br, timeout: timeout, stop: make(chan struct{})}
	if cluster != nil { // the masters' lanes run the calls, started on first use
		b.lanes.pipelines = pipelines
		return b
	}
	b.calls = make(chan *redisCall, 1024)
	for range pipelines {
		b.wg.Add(1)
		go b.pipeline()
	}
	return b
}

// errStoreClosed answers the calls of a closed store, errQueueTimeout the
// calls whose deadline passed while they waited for a run.
var (
	errStoreClosed  = errors.New("store closed")
	errQueueTimeout = errors.New("timed out waiting for the script run in flight")
)

// do queues call and waits for its reply or the batcher's end. Once
// queued, a call is not abandoned when ctx ends: it is answered by its
// deadline (and waiting on ctx would cost every call a channel).
func (b *batcher) do(ctx context.Context, call *redisCall) ([]any, error) {
	select {
	case <-b.stop:
		return nil, errStoreClosed
	default:
	}
	call.done = replyChans.Get().(chan redisReply)
	if b.cluster != nil {
		b.route(ctx, call)
		return b.await(call)
	}
	select {
	case b.calls <- call:
	default: // the queue is full
		select {
		case b.calls <- call:
		case <-ctx.Done():
			replyChans.Put(call.done)
			return nil, ctx.Err()
		case <-b.stop:
			replyChans.Put(call.done)
			return nil, errStoreClosed
		}
	}
	return b.await(call)
}

// await waits for call's reply or the batcher's end.
func (b *batcher) await(call *redisCall) ([]any, error) {
	select {
	case r := <-call.done:
		replyChans.Put(call.done) // empty again, and no run holds the call any more
		return r.vals, r.err
	case <-b.stop:
		select {
		case r := <-call.done: // its run finished as the store closed
			return r.vals, r.err
		default:
			return nil, errStoreClosed // a run may still answer: the channel is not reused
		}
	}
}

// replyChans are the done channels of calls (buffered, one reply),
// reused once their reply has been received: no channel per call.
var replyChans = sync.Pool{New: func() any { return make(chan redisReply, 1) }}

// close stops the pipelines after their runs in flight; calls still
// queued get an error. Only the first call does anything.
func (b *batcher) close() {
	b.once.Do(b.shutdown)
}

func (b *batcher) shutdown() {
	b.lanes.mu.Lock() // a lane starting now has its goroutines counted before the wait
	close(b.stop)
	b.lanes.mu.Unlock()
	b.wg.Wait()
	for {
		select {
		case c := <-b.calls:
			c.done <- redisReply{err: errStoreClosed}
		default:
			return
		}
	}
}

func (b *batcher) pipeline() {
	defer b.wg.Done()
	var batch []*redisCall
	var keys []string
	args := make([]any, 1, 1+redisArgsPerCheck*redisMaxBatchChecks) // args[0]: the TTL grace
	for {
		select {
		case <-b.stop:
			return
		case first := <-b.calls:
			gather(b.calls)
			batch, keys, args = append(batch[:0], first), append(keys[:0], first.keys...), append(args[:1], first.args...)
		collect:
			for len(keys) < redisMaxBatchChecks {
				select {
				case c := <-b.calls:
					batch, keys, args = append(batch, c), append(keys, c.keys...), append(args, c.args...)
				default:
					break collect
				}
			}
			args[0] = redisTTLGrace.Milliseconds()
			b.run(batch, keys, args)
			clear(batch) // let the calls be collected
		}
	}
}

// gatherYields is the most times a pipeline yields, before a run, to
// let handlers about to queue their calls do so.
const gatherYields = 4

// gather lets the handlers that are about to queue calls do so before a
// run: it yields the processor while the queue grows (or is empty), at
// most gatherYields times. Larger batches cost fewer script runs, Redis
// commands and, their replies arriving together, fewer gRPC writes per
// decision; under light load it costs a yield or two. (On 2 cores, 64
// requests in flight: batches of 23 checks became 29, writes per
// decision 0.29 became 0.25.)
func gather[T any](calls chan T) {
	n := len(calls)
	for range gatherYields {
		runtime.Gosched()
		m := len(calls)
		if m == n && m > 0 {
			return
		}
		n = m
	}
}

// run runs the script once for batch, by the earliest deadline of its
// calls, and hands out the reply; calls already past their deadline get
// errQueueTimeout without a run.
func (b *batcher) run(batch []*redisCall, keys []string, args []any) {
	now := monoNow()
	deadline := b.earliest(batch, now)
	if deadline <= now {
		if batch, keys, args = expire(batch, keys, args, now); len(batch) == 0 {
			return
		}
		deadline = b.earliest(batch, now)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(deadline-now))
	reply, err := redisScript.Run(ctx, b.client, keys, args...).Slice()
	cancel()
	b.br.record(err, monoNow())
	want := 0
	for _, c := range batch {
		want += c.replies
	}
	if err == nil && len(reply) != want {
		err = fmt.Errorf("%d values in the reply for %d checks (want %d)", len(reply), len(keys), want)
	}
	off := 0
	for _, c := range batch {
		n := c.replies
		if err != nil {
			c.done <- redisReply{err: err}
			continue
		}
		c.done <- redisReply{vals: reply[off : off+n]}
		off += n
	}
}

// earliest is the earliest deadline of batch's calls, at most a timeout
// after now (monoNow's).
func (b *batcher) earliest(batch []*redisCall, now int64) int64 {
	d := now + int64(b.timeout)
	for _, c := range batch {
		d = min(d, c.deadline)
	}
	return d
}

// expire answers the calls of batch past their deadline at now with
// errQueueTimeout and returns the others with their keys and arguments
// (args[0], the TTL grace, kept).
func expire(batch []*redisCall, keys []string, args []any, now int64) ([]*redisCall, []string, []any) {
	live, nk, na := batch[:0], 0, 1
	for i, c := range batch {
		if c.deadline <= now {
			c.done <- redisReply{err: errQueueTimeout}
			batch[i] = nil
			continue
		}
		nk += copy(keys[nk:], c.keys)
		na += copy(args[na:], c.args)
		live = append(live, c)
	}
	return live, keys[:nk], args[:na]
}

// monoStart anchors monoNow.
var monoStart = time.Now()

// monoNow is the monotonic clock in ns since the process started (a
// deadline in 8 bytes, immune to wall-clock steps).
func monoNow() int64 { return int64(time.Since(monoStart)) }
