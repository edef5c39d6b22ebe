package ratelimit

import (
	"math"
	"slices"
	"time"
	"unicode/utf8"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// itemKind is how one descriptor is answered.
type itemKind uint8

const (
	itemNone      itemKind = iota // no limit: unknown domain, no match, or replaced
	itemUnlimited                 // an unlimited rule
	itemCached                    // refused by the local over-limit cache
	itemStore                     // decided by the store
)

// item is the plan for one descriptor.
type item struct {
	kind    itemKind
	m       Match
	class   Criticality
	hits    uint32
	tracked bool // its key's demand per class is tracked: observe the decision
	failed  bool // the store failed its check alone (PartialError): the failure mode answers
	res     Result
}

// inlineDescriptors is how many descriptors a request may have for its
// plan, Redis call and response to take one allocation each; larger
// requests take a few more.
const inlineDescriptors = 3

// room returns n elements: inline's when they fit, else new ones.
func room[T any](inline []T, n int) []T {
	if n <= len(inline) {
		return inline[:n]
	}
	return make([]T, n)
}

// plan is the work of one request: an item per descriptor and the checks
// for the store (checkItem[i] is the item of checks[i]).
type plan struct {
	items     []item
	checks    []Check
	checkItem []int
	failed    bool // the store failed: the failure mode answers the checks

	// Room for a request of up to inlineDescriptors descriptors of up to
	// two entries each (most requests): one allocation for the plan.
	itemBuf      [inlineDescriptors]item
	entryBuf     [2 * inlineDescriptors]Entry
	checkBuf     [inlineDescriptors]Check
	checkItemBuf [inlineDescriptors]int
}

// validate returns an InvalidArgument status for a malformed request.
func (s *Service) validate(req *rlsv3.RateLimitRequest) error {
	bad := func(format string, args ...any) error {
		return status.Errorf(codes.InvalidArgument, "ratelimit: "+format, args...)
	}
	if req != nil {
		if reason, ok := malformed(req); ok {
			return bad("malformed request: %s", reason)
		}
	}
	switch {
	case req == nil || req.Domain == "":
		return bad("domain must not be empty")
	case len(req.Domain) > s.cfg.MaxValueBytes:
		return bad("domain is longer than %d bytes", s.cfg.MaxValueBytes)
	case !utf8.ValidString(req.Domain):
		return bad("domain is not valid UTF-8")
	case len(req.Descriptors) == 0:
		return bad("descriptors must not be empty")
	case len(req.Descriptors) > s.cfg.MaxDescriptors:
		return bad("%d descriptors exceed the maximum of %d", len(req.Descriptors), s.cfg.MaxDescriptors)
	}
	for i, d := range req.Descriptors {
		switch {
		case d == nil || len(d.Entries) == 0:
			return bad("descriptor %d has no entries", i)
		case len(d.Entries) > s.cfg.MaxEntries:
			return bad("descriptor %d has %d entries, more than the maximum of %d", i, len(d.Entries), s.cfg.MaxEntries)
		case d.HitsAddend != nil && d.HitsAddend.Value > math.MaxUint32:
			return bad("descriptor %d: hits_addend %d exceeds %d", i, d.HitsAddend.Value, uint32(math.MaxUint32))
		}
		if l := d.Limit; l != nil {
			if _, ok := overrideUnit(l.Unit); !ok {
				return bad("descriptor %d: limit override has no valid unit (%s)", i, l.Unit)
			}
		}
		for j, e := range d.Entries {
			switch {
			case e == nil || e.Key == "":
				return bad("descriptor %d entry %d has an empty key", i, j)
			case len(e.Key) > s.cfg.MaxValueBytes || len(e.Value) > s.cfg.MaxValueBytes:
				return bad("descriptor %d entry %d: key or value longer than %d bytes", i, j, s.cfg.MaxValueBytes)
			case !utf8.ValidString(e.Key) || !utf8.ValidString(e.Value):
				return bad("descriptor %d entry %d: key or value is not valid UTF-8", i, j)
			}
		}
	}
	return nil
}

// plan matches every descriptor of a valid request, applies replaces and
// the local over-limit cache, and lists the checks for the store.
func (s *Service) plan(cfg *Config, req *rlsv3.RateLimitRequest, now time.Time) *plan {
	p := &plan{}
	nd := len(req.Descriptors)
	p.items, p.checks, p.checkItem = room(p.itemBuf[:], nd), room(p.checkBuf[:], nd)[:0], room(p.checkItemBuf[:], nd)[:0]
	n := 0
	for _, d := range req.Descriptors {
		n += len(d.Entries)
	}
	replaced := s.matchItems(p, cfg, req, room(p.entryBuf[:], n)[:0])
	t := now.UnixNano()
	for i := range p.items {
		s.planItem(p, i, replaced, t)
	}
	return p
}

// matchItems matches each descriptor of req against cfg into p.items,
// its entries appended to buf, and returns the names of the rules the
// matched rules replace.
func (s *Service) matchItems(p *plan, cfg *Config, req *rlsv3.RateLimitRequest, buf []Entry) (replaced []string) {
	for i, d := range req.Descriptors {
		it := &p.items[i]
		it.hits = hitsOf(req, d)
		var entries []Entry
		buf, entries, it.class = s.entries(buf, d)
		var o *Override
		if d.Limit != nil {
			u, _ := overrideUnit(d.Limit.Unit)
			o = &Override{Requests: d.Limit.RequestsPerUnit, Unit: u}
		}
		m, ok := cfg.Match(req.Domain, entries, o)
		if !ok {
			continue
		}
		it.m, it.kind = m, itemStore
		if !m.Override {
			replaced = append(replaced, m.Rule.Replaces...)
			if m.Rule.Unlimited {
				it.kind = itemUnlimited
			}
		}
	}
	return replaced
}

// planItem settles how item i is answered at t (Unix ns): not at all
// when another matched rule replaces its rule, from the over-limit cache,
// or by a check appended to p.checks.
func (s *Service) planItem(p *plan, i int, replaced []string, t int64) {
	it := &p.items[i]
	if it.kind == itemNone {
		return
	}
	if !it.m.Override && it.m.Rule.Name != "" && slices.Contains(replaced, it.m.Rule.Name) {
		it.kind = itemNone // as envoyproxy/ratelimit: a replaced rule is not checked at all
		return
	}
	if it.kind != itemStore {
		return
	}
	var above float64 // demand of the classes above it.class, counting this request's
	if s.demand != nil && (it.m.Rule == nil || !it.m.Rule.CriticalityOff) {
		above, it.tracked = s.demand.add(it.m.StoreKey, it.m.Limit.Unit, it.class, it.hits, t)
	}
	if s.cache != nil {
		if d, ok := s.cache.get(it.m.StoreKey, it.m.Limit, t); ok {
			reset := d
			if it.m.Limit.Algorithm == FixedWindow { // whole seconds, as the store answers
				reset = (d + time.Second - 1).Truncate(time.Second)
			}
			it.kind, it.res = itemCached, Result{Reset: reset, Exhausted: d}
			return
		}
	}
	limitCap := s.admissionOf(it.m).Cap(it.class, it.m.Limit.Capacity())
	if above > 0 {
		limitCap = min(limitCap, adaptiveCap(it.m.Limit, above, t))
	}
	p.checks = append(p.checks, Check{Key: it.m.StoreKey, Limit: it.m.Limit, Cap: limitCap, Hits: it.hits})
	p.checkItem = append(p.checkItem, i)
}

// entries appends d's entries, without the criticality entry, to buf and
// returns them with the descriptor's class (Critical when absent or
// unknown).
func (s *Service) entries(buf []Entry, d *rlcommonv3.RateLimitDescriptor) ([]Entry, []Entry, Criticality) {
	start, class, seen := len(buf), Critical, false
	for _, e := range d.Entries {
		if e.Key == s.cfg.Criticality.Key {
			if !seen {
				class, _ = ParseCriticality(e.Value)
				seen = true
			}
			continue
		}
		buf = append(buf, Entry{Key: e.Key, Value: e.Value})
	}
	return buf, buf[start:len(buf):len(buf)], class
}

// admissionOf is the criticality settings that apply to m.
func (s *Service) admissionOf(m Match) *Admission {
	r := m.Rule
	switch {
	case r == nil:
		return s.admission
	case r.CriticalityOff:
		return nil
	case r.Admission != nil:
		return r.Admission
	case r.CriticalityOn:
		return s.shares
	}
	return s.admission
}

// hitsOf is a descriptor's hits: its own hits_addend when set (0 checks
// without incrementing), else the request's, where 0 means 1.
func hitsOf(req *rlsv3.RateLimitRequest, d *rlcommonv3.RateLimitDescriptor) uint32 {
	if d.HitsAddend != nil {
		return uint32(d.HitsAddend.Value)
	}
	return max(req.HitsAddend, 1)
}

// overrideUnit maps a limit override's unit to a Unit.
func overrideUnit(u typev3.RateLimitUnit) (Unit, bool) {
	switch u {
	case typev3.RateLimitUnit_SECOND:
		return Second, true
	case typev3.RateLimitUnit_MINUTE:
		return Minute, true
	case typev3.RateLimitUnit_HOUR:
		return Hour, true
	case typev3.RateLimitUnit_DAY:
		return Day, true
	case typev3.RateLimitUnit_MONTH:
		return Month, true
	case typev3.RateLimitUnit_YEAR:
		return Year, true
	}
	return UnitUnknown, false
}

// protoUnit maps a Unit to the response's unit.
func protoUnit(u Unit) rlsv3.RateLimitResponse_RateLimit_Unit {
	switch u {
	case Second:
		return rlsv3.RateLimitResponse_RateLimit_SECOND
	case Minute:
		return rlsv3.RateLimitResponse_RateLimit_MINUTE
	case Hour:
		return rlsv3.RateLimitResponse_RateLimit_HOUR
	case Day:
		return rlsv3.RateLimitResponse_RateLimit_DAY
	case Week:
		return rlsv3.RateLimitResponse_RateLimit_WEEK
	case Month:
		return rlsv3.RateLimitResponse_RateLimit_MONTH
	case Year:
		return rlsv3.RateLimitResponse_RateLimit_YEAR
	}
	return rlsv3.RateLimitResponse_RateLimit_UNKNOWN
}
