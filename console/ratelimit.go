package console

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/internal/metricreg"
	"github.com/xds-server/xds-server/ratelimit"
)

// Bounds of the rate-limit statistics.
const (
	// MaxDomains is how many domains get statistics; decisions of further
	// domains are counted in console_ratelimit_domains_dropped_total.
	MaxDomains = 64
	// TopK is how many keys nearest their limit are kept per domain.
	TopK = 20
	// MaxKeyBytes is the most of a key the top-k keeps (and shows, marked
	// truncated): keys carry descriptor values clients send.
	MaxKeyBytes = 256
	// topKAge: a key not decided for this long leaves the top-k.
	topKAge = time.Minute
	// rateWindow is how many stats ticks (seconds) decisions/s is over.
	rateWindow = 10
	numClasses = 4
)

// Stats counts rate-limit decisions per domain for the console; it is a
// ratelimit.Observer. ObserveDecision takes no lock that can block (the
// top-k is updated under TryLock, skipped when busy) and allocates
// nothing but when a domain is first seen.
type Stats struct {
	domains atomic.Pointer[map[string]*domainStats] // copied on write, at most MaxDomains
	addMu   sync.Mutex
	now     atomic.Int64 // unix nanoseconds of the last Tick: a coarse clock
	dropped prometheus.Counter
}

type domainStats struct {
	stripes [numStripes]stripe // counters, spread so cores do not share a cache line

	topMu sync.Mutex
	top   []topEntry                // at most TopK
	floor atomic.Uint64             // float64 bits: the smallest ratio in a full top-k, else 0
	rates [rateWindow + 1]ratePoint // ring of totals per tick; guarded by topMu
	head  int
}

// numStripes is how many copies of a domain's counters decisions are
// spread over (at random), a power of two.
const numStripes = 8

// stripe is one copy of a domain's counters, padded to its own cache lines.
type stripe struct {
	decisions, over atomic.Uint64
	classes         [numClasses][2]atomic.Uint64 // hits admitted, refused per class
	_               [128 - 10*8]byte
}

// totals sums the stripes: decisions, over-limit decisions, and hits
// admitted and refused per class.
func (ds *domainStats) totals() (decisions, over uint64, classes [numClasses][2]uint64) {
	for i := range ds.stripes {
		st := &ds.stripes[i]
		decisions += st.decisions.Load()
		over += st.over.Load()
		for c := range numClasses {
			classes[c][0] += st.classes[c][0].Load()
			classes[c][1] += st.classes[c][1].Load()
		}
	}
	return decisions, over, classes
}

type ratePoint struct {
	at              int64 // unix nanoseconds; 0 unset
	decisions, over uint64
}

type topEntry struct {
	key, rule   string // key: at most MaxKeyBytes, a copy once in the top-k
	truncated   bool   // key is the start of a longer one
	used, limit uint64
	ratio       float64 // used / limit
	at          int64   // unix nanoseconds
}

// NewStats returns empty statistics; console_ratelimit_domains_dropped_total
// (decisions of domains beyond MaxDomains) is registered on reg unless
// it is nil.
func NewStats(reg prometheus.Registerer) (*Stats, error) {
	s := &Stats{dropped: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "console_ratelimit_domains_dropped_total",
		Help: "Rate-limit decisions of domains beyond the console's bound (64 domains), not in its statistics.",
	})}
	if err := metricreg.Register(reg, s.dropped); err != nil {
		return nil, fmt.Errorf("console: metrics: %w", err)
	}
	m := map[string]*domainStats{}
	s.domains.Store(&m)
	return s, nil
}

// ObserveDecision implements ratelimit.Observer.
func (s *Stats) ObserveDecision(d ratelimit.Decision) {
	ds := s.domain(d.Domain)
	if ds == nil {
		return
	}
	st := &ds.stripes[rand.Uint32()&(numStripes-1)] // the runtime's per-thread generator: no shared state
	st.decisions.Add(1)
	refused := 0
	if !d.Allowed {
		st.over.Add(1)
		refused = 1
	}
	if c := int(d.Class); c < numClasses {
		st.classes[c][refused].Add(uint64(d.Hits))
	}
	if d.Limit == 0 {
		return
	}
	ratio := float64(d.Used) / float64(d.Limit)
	if ratio < math.Float64frombits(ds.floor.Load()) || !ds.topMu.TryLock() {
		return
	}
	ds.offer(topEntry{key: d.Key, rule: d.Rule, used: d.Used, limit: d.Limit, ratio: ratio, at: s.now.Load()})
	ds.topMu.Unlock()
}

// domain returns the statistics of name, adding them if there is room.
func (s *Stats) domain(name string) *domainStats {
	if ds := (*s.domains.Load())[name]; ds != nil {
		return ds
	}
	s.addMu.Lock()
	defer s.addMu.Unlock()
	old := *s.domains.Load()
	if ds := old[name]; ds != nil {
		return ds
	}
	if len(old) >= MaxDomains {
		s.dropped.Inc()
		return nil
	}
	m := make(map[string]*domainStats, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	ds := &domainStats{top: make([]topEntry, 0, TopK)}
	ds.rates[0].at = s.now.Load() // decisions/s counts from here
	m[name] = ds
	s.domains.Store(&m)
	return ds
}

// offer puts e in the top-k: it updates the key's entry, fills a free
// place, or replaces the entry with the smallest ratio if e's is larger.
// ds.topMu must be held.
func (ds *domainStats) offer(e topEntry) {
	if len(e.key) > MaxKeyBytes {
		e.key, e.truncated = cutUTF8(e.key, MaxKeyBytes), true // a substring: no copy yet
	}
	low := -1
	for i := range ds.top {
		if ds.top[i].key == e.key {
			e.key = ds.top[i].key // keep the copy held, not the caller's string
			ds.top[i] = e
			ds.setFloor()
			return
		}
		if low < 0 || ds.top[i].ratio < ds.top[low].ratio {
			low = i
		}
	}
	if len(ds.top) == TopK && e.ratio <= ds.top[low].ratio {
		return
	}
	if e.truncated {
		e.key = strings.Clone(e.key) // do not hold the whole key's memory
	}
	if len(ds.top) < TopK {
		ds.top = append(ds.top, e)
	} else {
		ds.top[low] = e
	}
	ds.setFloor()
}

// cutUTF8 is the longest prefix of s of at most n bytes that does not
// split a UTF-8 sequence.
func cutUTF8(s string, n int) string {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// setFloor publishes the smallest ratio of a full top-k. ds.topMu must be held.
func (ds *domainStats) setFloor() {
	f := 0.0
	if len(ds.top) == TopK {
		f = math.Inf(1)
		for _, t := range ds.top {
			f = min(f, t.ratio)
		}
	}
	ds.floor.Store(math.Float64bits(f))
}

// Tick advances the coarse clock, records the totals for decisions/s and
// ages the top-k; Run calls it every second.
func (s *Stats) Tick(now time.Time) {
	t := now.UnixNano()
	s.now.Store(t)
	for _, ds := range *s.domains.Load() {
		ds.topMu.Lock()
		ds.head = (ds.head + 1) % len(ds.rates)
		n, over, _ := ds.totals()
		ds.rates[ds.head] = ratePoint{at: t, decisions: n, over: over}
		ds.top = slices.DeleteFunc(ds.top, func(e topEntry) bool { return t-e.at > int64(topKAge) })
		ds.setFloor()
		ds.topMu.Unlock()
	}
}

// DomainStats is one domain's statistics on /ui/api/ratelimit.
type DomainStats struct {
	Domain      string      `json:"domain"`
	Decisions   uint64      `json:"decisions"`            // descriptors decided since start
	OverLimit   uint64      `json:"over_limit"`           // of which refused (or over in shadow mode)
	PerSecond   float64     `json:"decisions_per_second"` // over the last 10 s
	OverShare   float64     `json:"over_limit_share"`     // over the last 10 s, in [0, 1]
	Nearest     []KeyStat   `json:"nearest"`              // at most TopK, nearest first
	Criticality []ClassStat `json:"criticality"`          // lowest class first
}

// KeyStat is one key near its limit.
type KeyStat struct {
	Key        string  `json:"key"`                 // at most MaxKeyBytes
	Truncated  bool    `json:"truncated,omitempty"` // Key is the start of a longer key
	Rule       string  `json:"rule,omitempty"`
	Used       uint64  `json:"used"`
	Limit      uint64  `json:"limit"`
	Ratio      float64 `json:"ratio"` // used / limit
	AgeSeconds float64 `json:"age_seconds"`
}

// ClassStat is one criticality class's hits.
type ClassStat struct {
	Class    string  `json:"class"`
	Admitted uint64  `json:"admitted"`
	Refused  uint64  `json:"refused"`
	Accepted float64 `json:"acceptance"` // admitted share; 1 without hits
}

// Domains returns the statistics of every observed domain, by name.
func (s *Stats) Domains() []DomainStats {
	now := s.now.Load()
	var out []DomainStats
	for name, ds := range *s.domains.Load() {
		out = append(out, ds.view(name, now))
	}
	slices.SortFunc(out, func(a, b DomainStats) int { return strings.Compare(a.Domain, b.Domain) })
	return out
}

func (ds *domainStats) view(name string, now int64) DomainStats {
	n, over, classes := ds.totals()
	v := DomainStats{Domain: name, Decisions: n, OverLimit: over,
		Nearest: []KeyStat{}, Criticality: make([]ClassStat, 0, numClasses)}
	ds.topMu.Lock()
	last := ds.rates[ds.head]
	first := last
	for k := 1; k < len(ds.rates); k++ {
		if p := ds.rates[(ds.head+k)%len(ds.rates)]; p.at != 0 {
			first = p
			break
		}
	}
	for _, e := range ds.top {
		v.Nearest = append(v.Nearest, KeyStat{Key: e.key, Truncated: e.truncated, Rule: e.rule, Used: e.used, Limit: e.limit,
			Ratio: e.ratio, AgeSeconds: max(0, float64(now-e.at)/1e9)})
	}
	ds.topMu.Unlock()
	if dt := float64(last.at-first.at) / 1e9; dt > 0 {
		n := last.decisions - first.decisions
		v.PerSecond = float64(n) / dt
		if n > 0 {
			v.OverShare = float64(last.over-first.over) / float64(n)
		}
	}
	slices.SortFunc(v.Nearest, func(a, b KeyStat) int {
		if a.Ratio != b.Ratio {
			if a.Ratio > b.Ratio {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Key, b.Key)
	})
	for c := range numClasses {
		a, r := classes[c][0], classes[c][1]
		cs := ClassStat{Class: ratelimit.Criticality(c).String(), Admitted: a, Refused: r, Accepted: 1}
		if a+r > 0 {
			cs.Accepted = float64(a) / float64(a+r)
		}
		v.Criticality = append(v.Criticality, cs)
	}
	return v
}
