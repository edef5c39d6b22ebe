package xds

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/internal/httpjson"
)

// The stages of a change's path through the server, the stage label of
// xds_change_stage_seconds. The write stages run alongside the cache
// stage (a node's response goes out as soon as its snapshot is set), so
// they are measured from the end of translation: a change takes
// discovery + debounce + translate + last_write from its read to its
// last node.
const (
	// StageDiscovery: the source read the change (Consul's blocking query
	// returned with a new index) -> its snapshot reached the reconcile loop
	// (the source's coalescing, discovery.consul.min_interval, the removal
	// guard and the drains in between).
	StageDiscovery = "discovery"
	// StageDebounce: the snapshot reached the reconcile loop -> the pass
	// started (xds.debounce, or waiting for the pass before it).
	StageDebounce = "debounce"
	// StageTranslate: the pass started -> every service translated and
	// every shared snapshot built.
	StageTranslate = "translate"
	// StageCache: translated -> every node's cache snapshot set.
	StageCache = "cache"
	// StageFirstWrite: translated -> the first response the pass caused
	// handed to a node's stream.
	StageFirstWrite = "first_write"
	// StageLastWrite: translated -> the last one (every node that was
	// given a changed type was sent it).
	StageLastWrite = "last_write"
)

// SourceRead is when a discovery source read the change its next snapshot
// brings, handed in just before that snapshot (SourceRead, then Update).
type SourceRead struct {
	At      time.Time // the read returned (Consul: the blocking query that saw the first change since the last snapshot)
	Emitted time.Time // the source emitted its snapshot
	// IndexFrom and IndexTo are the Consul index of that query before and
	// after; 0 when the source has none.
	IndexFrom, IndexTo uint64
}

// SourceRead records the source read of the snapshot handed to Update
// next; the reconcile pass that takes it measures the discovery stage
// from it. Passes without one (weights, drains through the admin API)
// start at Update.
func (s *Server) SourceRead(r SourceRead) { s.rec.traces.noteRead(r) }

// PassTimes are the time stamps of one reconcile pass (GET
// /debug/changes): wall-clock times, zero when the pass has none.
type PassTimes struct {
	Seq        uint64     `json:"seq"`
	Read       SourceRead `json:"read"`
	Changed    time.Time  `json:"changed_at"`    // the oldest change the pass took reached the loop
	Started    time.Time  `json:"started_at"`    // the debounce fired
	Translated time.Time  `json:"translated_at"` // translation and shared snapshots done
	Cached     time.Time  `json:"cached_at"`     // every node's snapshot set
	Nodes      int        `json:"nodes"`         // nodes given a changed snapshot
	// Awaited counts the (node, type) responses the pass made due; Writes
	// those sent so far and Pending those not yet sent nor found unneeded.
	Awaited    int64     `json:"awaited"`
	Writes     int64     `json:"writes"`
	Pending    int64     `json:"pending"`
	FirstWrite time.Time `json:"first_write_at"`
	LastWrite  time.Time `json:"last_write_at"`
}

// PassObserver is told of reconcile passes: PassStarted when one starts,
// PassDone once every response it made due was handed to its node's
// stream or found unneeded (the same moment the write stages are
// observed), with the nodes it gave a changed snapshot. PassDone may
// come after the next pass started, and from a stream's goroutine:
// neither may block.
type PassObserver interface {
	PassStarted(seq uint64)
	PassDone(seq uint64, nodes int)
}

// passTrace follows one pass: the loop stamps its stages, then the
// streams' responses count down what it made due. The pass is done once
// it is sealed (every snapshot set) and nothing is pending; the write
// stages are observed then.
type passTrace struct {
	t       PassTimes // the loop's stamps, written before seal
	awaited atomic.Int64
	pending atomic.Int64 // awaited not yet sent nor found unneeded, plus 1 until sealed
	writes  atomic.Int64
	first   atomic.Int64 // unix nanoseconds; 0: none yet
	last    atomic.Int64
	hist    *prometheus.HistogramVec
	obs     PassObserver // nil: none
}

// await counts one (node, type) response due.
func (p *passTrace) await() {
	p.awaited.Add(1)
	p.pending.Add(1)
}

// wrote records a due response handed to a stream at.
func (p *passTrace) wrote(at time.Time) {
	ns := at.UnixNano()
	p.first.CompareAndSwap(0, ns)
	for {
		l := p.last.Load()
		if ns <= l || p.last.CompareAndSwap(l, ns) {
			break
		}
	}
	p.writes.Add(1)
	p.settle()
}

// settle counts one due response off (sent, unneeded or its node gone),
// or the seal; the last one observes the write stages.
func (p *passTrace) settle() {
	if p.pending.Add(-1) != 0 {
		return
	}
	if p.obs != nil {
		p.obs.PassDone(p.t.Seq, p.t.Nodes) // written before the seal, which counts down last or earlier
	}
	if p.hist == nil {
		return
	}
	if first, last := p.first.Load(), p.last.Load(); first != 0 {
		p.hist.WithLabelValues(StageFirstWrite).Observe(max(time.Unix(0, first).Sub(p.t.Translated), 0).Seconds())
		p.hist.WithLabelValues(StageLastWrite).Observe(max(time.Unix(0, last).Sub(p.t.Translated), 0).Seconds())
	}
}

// times returns a copy of the pass's stamps and counts.
func (p *passTrace) times() PassTimes {
	t := p.t
	t.Awaited, t.Writes, t.Pending = p.awaited.Load(), p.writes.Load(), max(p.pending.Load(), 0)
	if ns := p.first.Load(); ns != 0 {
		t.FirstWrite = time.Unix(0, ns)
	}
	if ns := p.last.Load(); ns != 0 {
		t.LastWrite = time.Unix(0, ns)
	}
	return t
}

// passLogLen is how many passes GET /debug/changes shows.
const passLogLen = 64

// passTraces hands out pass traces and keeps the latest passLogLen.
type passTraces struct {
	hist *prometheus.HistogramVec // xds_change_stage_seconds; nil: not observed
	obs  PassObserver             // nil: none

	mu      sync.Mutex
	read    SourceRead // noted for the next update; zero: none
	pending SourceRead // taken by the update, for the next pass
	changed time.Time  // wall time of the oldest change not yet taken by a pass
	seq     uint64
	log     [passLogLen]*passTrace
}

// noteRead keeps r for the next update.
func (ts *passTraces) noteRead(r SourceRead) {
	ts.mu.Lock()
	ts.read = r
	ts.mu.Unlock()
}

// updated is called on each change reaching the loop: the first since
// the last pass starts the debounce stage and takes the noted read.
func (ts *passTraces) updated(at time.Time) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.changed.IsZero() {
		ts.changed = at
	}
	if ts.pending.At.IsZero() && !ts.read.At.IsZero() {
		ts.pending = ts.read
	}
	ts.read = SourceRead{}
}

// start opens the trace of a pass starting at, with the change and read
// it takes.
func (ts *passTraces) start(at time.Time) *passTrace {
	p := ts.open(at)
	if ts.obs != nil {
		ts.obs.PassStarted(p.t.Seq)
	}
	return p
}

func (ts *passTraces) open(at time.Time) *passTrace {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.seq++
	p := &passTrace{t: PassTimes{Seq: ts.seq, Read: ts.pending, Changed: ts.changed, Started: at}, hist: ts.hist, obs: ts.obs}
	if p.t.Changed.IsZero() {
		p.t.Changed = at
	}
	p.pending.Store(1) // the seal
	ts.pending, ts.changed = SourceRead{}, time.Time{}
	ts.log[ts.seq%passLogLen] = p
	return p
}

// translated stamps the end of p's translation.
func (ts *passTraces) translated(p *passTrace, at time.Time) {
	ts.mu.Lock()
	p.t.Translated = at
	ts.mu.Unlock()
}

// seal ends the loop's part of p (cached at) and observes its stages;
// the write stages follow once its responses are sent.
func (ts *passTraces) seal(p *passTrace, cachedAt time.Time, nodes int) {
	ts.mu.Lock()
	p.t.Cached, p.t.Nodes = cachedAt, nodes
	ts.mu.Unlock()
	if h := ts.hist; h != nil {
		if !p.t.Read.At.IsZero() {
			h.WithLabelValues(StageDiscovery).Observe(max(p.t.Changed.Sub(p.t.Read.At), 0).Seconds())
		}
		h.WithLabelValues(StageDebounce).Observe(p.t.Started.Sub(p.t.Changed).Seconds())
		h.WithLabelValues(StageTranslate).Observe(p.t.Translated.Sub(p.t.Started).Seconds())
		h.WithLabelValues(StageCache).Observe(cachedAt.Sub(p.t.Translated).Seconds())
	}
	p.settle()
}

// list returns the latest passes, oldest first.
func (ts *passTraces) list() []PassTimes {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := make([]PassTimes, 0, passLogLen)
	for seq := max(ts.seq, passLogLen) - passLogLen + 1; seq <= ts.seq; seq++ {
		if p := ts.log[seq%passLogLen]; p != nil && p.t.Seq == seq {
			out = append(out, p.times())
		}
	}
	return out
}

// Passes returns the time stamps of the latest reconcile passes (at most
// 64), oldest first.
func (s *Server) Passes() []PassTimes { return s.rec.traces.list() }

// servePasses is GET /debug/changes.
func (s *Server) servePasses(w http.ResponseWriter, _ *http.Request) {
	httpjson.Write(w, http.StatusOK, struct {
		Passes []PassTimes `json:"passes"`
	}{s.Passes()})
}
