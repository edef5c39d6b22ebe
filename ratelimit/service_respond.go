package ratelimit

import (
	"math"
	"strconv"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The response headers (the IETF RateLimit header fields draft, as
// envoyproxy/ratelimit sends them).
const (
	HeaderLimit     = "RateLimit-Limit"
	HeaderRemaining = "RateLimit-Remaining"
	HeaderReset     = "RateLimit-Reset"
)

// response is a response with room for the statuses of up to
// inlineDescriptors descriptors: one allocation for all its messages.
type response struct {
	resp     rlsv3.RateLimitResponse
	statuses [inlineDescriptors]*rlsv3.RateLimitResponse_DescriptorStatus
	parts    [inlineDescriptors]statusParts
}

// statusParts are the messages of one descriptor's status.
type statusParts struct {
	status rlsv3.RateLimitResponse_DescriptorStatus
	limit  rlsv3.RateLimitResponse_RateLimit
	reset  durationpb.Duration
}

// respond builds the response of a decided plan and counts its metrics.
func (s *Service) respond(domain string, p *plan) *rlsv3.RateLimitResponse {
	r := &response{}
	resp, parts := &r.resp, room(r.parts[:], len(p.items))
	resp.OverallCode, resp.Statuses = rlsv3.RateLimitResponse_OK, room(r.statuses[:], len(p.items))
	var closest *rlsv3.RateLimitResponse_DescriptorStatus
	for i := range p.items {
		st := s.status(&parts[i], domain, &p.items[i], p.failed)
		resp.Statuses[i] = st
		over := st.Code == rlsv3.RateLimitResponse_OVER_LIMIT
		if over {
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		// As envoyproxy/ratelimit: the last descriptor over its limit, else
		// the first with the least remaining.
		if s.cfg.Headers && st.CurrentLimit != nil && st.DurationUntilReset != nil &&
			(over || closest == nil || (closest.Code != rlsv3.RateLimitResponse_OVER_LIMIT &&
				st.LimitRemaining < closest.LimitRemaining)) {
			closest = st
		}
	}
	if closest != nil {
		resp.ResponseHeadersToAdd = rateLimitHeaders(closest)
	}
	return resp
}

// status answers one item, in sp, and counts its metrics.
func (s *Service) status(sp *statusParts, domain string, it *item, failed bool) *rlsv3.RateLimitResponse_DescriptorStatus {
	ds := &sp.status
	ds.Code = rlsv3.RateLimitResponse_OK
	switch it.kind {
	case itemNone:
		return ds
	case itemUnlimited:
		rc := s.m.match(domain, it.m)
		rc.hits.Add(float64(it.hits))
		rc.within.Add(float64(it.hits))
		ds.LimitRemaining = math.MaxUint32
		return ds
	}
	ds.CurrentLimit = &sp.limit
	sp.limit.RequestsPerUnit, sp.limit.Unit = it.m.Limit.Requests, protoUnit(it.m.Limit.Unit)
	if !it.m.Override {
		sp.limit.Name = it.m.Rule.Name
	}
	rc := s.m.match(domain, it.m)
	rc.hits.Add(float64(it.hits))
	if it.kind == itemStore && (failed || it.failed) {
		if s.cfg.FailureMode == FailClosed && !s.shadow(it) { // a shadow rule never refuses
			ds.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		return ds
	}
	r := it.res
	s.observe(domain, it)
	ds.DurationUntilReset = &sp.reset
	sp.reset.Seconds, sp.reset.Nanos = int64(r.Reset/time.Second), int32(r.Reset%time.Second) // as durationpb.New
	if r.Allowed {
		ds.LimitRemaining = r.Remaining
		rc.within.Add(float64(it.hits))
		s.m.classHits[it.class][0].Add(float64(it.hits))
		thr := uint64(math.Floor(float64(it.m.Limit.Capacity()) * s.cfg.NearLimitRatio))
		if r.Used > thr {
			rc.near.Add(float64(min(uint64(it.hits), r.Used-thr)))
		}
		return ds
	}
	rc.over.Add(float64(it.hits))
	s.m.classHits[it.class][1].Add(float64(it.hits))
	if it.kind == itemCached {
		rc.overLocal.Add(float64(it.hits))
	}
	if s.shadow(it) {
		rc.shadow.Add(float64(it.hits))
		return ds // shadow mode: counted, never refused
	}
	if !it.m.Override && it.m.Rule.QuotaMode {
		return ds // quota mode: counted, answered OK
	}
	ds.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	return ds
}

// shadow reports whether it is in shadow mode: counted, never refused.
func (s *Service) shadow(it *item) bool {
	return s.cfg.ShadowMode || (!it.m.Override && it.m.Rule.ShadowMode)
}

// rateLimitHeaders are the RateLimit-* headers of one status:
// "RateLimit-Limit: 10, 10;w=60[;name="..."]", the remaining hits, and
// the seconds until reset, rounded up.
func rateLimitHeaders(ds *rlsv3.RateLimitResponse_DescriptorStatus) []*corev3.HeaderValue {
	l := ds.CurrentLimit
	n := strconv.FormatUint(uint64(l.RequestsPerUnit), 10)
	v := n + ", " + n + ";w=" + strconv.FormatInt(unitSecondsOf(l.Unit), 10)
	if l.Name != "" {
		v += ";name=" + strconv.Quote(l.Name)
	}
	d := ds.DurationUntilReset.AsDuration()
	reset := int64((d + time.Second - 1) / time.Second)
	return []*corev3.HeaderValue{
		{Key: HeaderLimit, Value: v},
		{Key: HeaderRemaining, Value: strconv.FormatUint(uint64(ds.LimitRemaining), 10)},
		{Key: HeaderReset, Value: strconv.FormatInt(reset, 10)},
	}
}

// unitSecondsOf is the length of a response unit in seconds.
func unitSecondsOf(u rlsv3.RateLimitResponse_RateLimit_Unit) int64 {
	for x := Second; x <= Year; x++ {
		if protoUnit(x) == u {
			return x.Seconds()
		}
	}
	return 0
}

// logLimiter lets one log line through per interval and counts the
// others.
type logLimiter struct {
	every      time.Duration
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// allow reports whether to log at now, and how many lines were suppressed
// since the last one logged.
func (l *logLimiter) allow(now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed++
		return false, 0
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	return true, n
}
