package xds

import (
	"context"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc/mem"
)

// sendBudget bounds the bytes of encoded responses that wait to be written
// to nodes, over every connection. Each node of a push or a connect storm
// holds its encoded response until its connection has written it; with
// 10,000 nodes and SotW EDS responses of 86 KiB that is most of a
// gigabyte when the nodes read slower than the server encodes. A response
// that would exceed the budget waits for others to be written first
// (first come, first served), at most maxWait, then goes ahead anyway
// (counted), so nodes that stall with responses pending can delay others
// but never block them. The wait comes before the response is encoded:
// a waiting node holds no buffer.
type sendBudget struct {
	sem     *semaphore.Weighted // nil: no limit
	limit   int64
	maxWait time.Duration
	pending prometheus.Gauge       // bytes held
	waits   *prometheus.CounterVec // by outcome
}

// budgetWait is the longest a response waits for the budget: long enough
// for a connect storm of 10,000 nodes to be written through it in turn.
const budgetWait = 10 * time.Second

func newSendBudget(limit int64, reg prometheus.Registerer) *sendBudget {
	b := &sendBudget{limit: limit, maxWait: budgetWait,
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "xds_pending_response_bytes",
			Help: "Bytes of encoded xDS responses waiting to be written to nodes (bounded by xds.max_pending_bytes).",
		}),
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_pending_bytes_waits_total",
			Help: "Responses that waited for xds.max_pending_bytes, by outcome: written (others were written first) or timeout (went ahead after 10s).",
		}, []string{"outcome"}),
	}
	if limit > 0 {
		b.sem = semaphore.NewWeighted(limit)
	}
	if reg != nil {
		reg.MustRegister(b.pending, b.waits)
	}
	return b
}

// hold counts a buffer of n bytes as pending and takes them from the
// budget, waiting for them if need be. The result gives them back.
func (b *sendBudget) hold(n int) *held {
	l := lease{b: b, n: int64(n)}
	if b.sem != nil {
		l.w = b.take(l.n)
	}
	b.pending.Add(float64(l.n)) // once it may be encoded
	h := &held{lease: l}
	h.dropped = runtime.AddCleanup(h, lease.release, l)
	return h
}

// take takes n bytes (at most the whole budget) from the budget, waiting
// at most maxWait for them; it returns the bytes taken, 0 after the
// longest wait.
func (b *sendBudget) take(n int64) int64 {
	w := min(n, b.limit)
	if b.sem.TryAcquire(w) {
		return w
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.maxWait)
	defer cancel()
	if err := b.sem.Acquire(ctx, w); err != nil {
		b.waits.WithLabelValues("timeout").Inc()
		return 0 // goes ahead without the budget
	}
	b.waits.WithLabelValues("written").Inc()
	return w
}

// held is one pending buffer: the buffer's pool. When grpc frees the
// buffer, once written, it goes back to buffers and its bytes back to the
// budget. grpc does not free the buffers a connection had not written
// when it closed (a node that stalled, then went away): it drops them, so
// their bytes go back to the budget once the garbage collector finds the
// held unreachable (dropped; the runtime collects at least every 2
// minutes). Otherwise each such node would shrink the budget for good.
type held struct {
	lease
	dropped runtime.Cleanup
}

// lease is n bytes pending, w of them taken from b's budget.
type lease struct {
	b    *sendBudget
	n, w int64
}

func (l lease) release() {
	l.b.pending.Sub(float64(l.n))
	if l.w > 0 {
		l.b.sem.Release(l.w)
	}
}

func (h *held) Get(n int) *[]byte { return buffers.Get(n) }

func (h *held) Put(buf *[]byte) {
	buffers.Put(buf)
	h.dropped.Stop()
	h.release()
}

var _ mem.BufferPool = (*held)(nil)
