package ratelimit

// Observer sees every descriptor the store (or the local over-limit
// cache) decided: once per descriptor, on the request's goroutine, so it
// must be cheap, safe for concurrent use, and must not retain anything
// beyond the strings (which are immutable). The web console's statistics
// implement it; ServiceConfig.Observer is nil by default.
type Observer interface {
	ObserveDecision(d Decision)
}

// Decision is one decided descriptor, as an Observer sees it.
type Decision struct {
	Domain string
	// Key is the descriptor's store key: the domain, the entries and
	// their values ("d_user_alice_"); Rule is the rule's key
	// ("d.user"), "" for a request override that matched no rule.
	Key, Rule string
	Class     Criticality
	Hits      uint32 // hits asked for (hits_addend)
	// Used is the usage after the decision and Limit the capacity, in
	// requests (tokens for the buckets); Used is at least Limit when the
	// local over-limit cache refused.
	Used, Limit uint64
	Allowed     bool
}

// observe reports one decided item to the observer, if any.
func (s *Service) observe(domain string, it *item) {
	o := s.cfg.Observer
	if o == nil {
		return
	}
	d := Decision{Domain: domain, Key: it.m.StoreKey, Class: it.class, Hits: it.hits,
		Used: it.res.Used, Limit: uint64(it.m.Limit.Capacity()), Allowed: it.res.Allowed}
	if it.m.Rule != nil {
		d.Rule = it.m.Rule.Key
	}
	if it.kind == itemCached {
		d.Used = max(d.Used, d.Limit)
	}
	o.ObserveDecision(d)
}
