package ratelimit

import "strings"

// Entry is one key/value pair of a request descriptor.
type Entry struct{ Key, Value string }

// Override is a descriptor's limit override, sent by the client.
type Override struct {
	Requests uint32 // requests per Unit
	Unit     Unit
}

// Match is the limit that applies to one descriptor.
type Match struct {
	// Rule is the rule the descriptor matched; nil for an override that
	// matched no rule.
	Rule *Rule
	// Limit is the limit to enforce: the rule's, or the override's (with
	// the rule's algorithm when a rule matched, else FixedWindow).
	Limit Limit
	// Override: Limit comes from the request. As in envoyproxy/ratelimit
	// such a limit is never unlimited, in shadow mode, or replaced.
	Override bool
	// StatKey names the metrics: Rule.Key, or with detailed_metric or
	// value_to_metric the key with the request's values, or for an
	// override "domain.key1_value1.key2_value2".
	StatKey string
	// StoreKey is the Check.Key of the descriptor.
	StoreKey string
}

type matchKind uint8

const (
	noMatch matchKind = iota
	exactMatch
	wildcardMatch
	defaultMatch
)

// step is the node one entry matched, and how.
type step struct {
	n    *node
	kind matchKind
}

// Match finds the limit of a descriptor of domain as envoyproxy/ratelimit
// does: entry i is looked up among the children of the node entry i-1
// matched (the domain's descriptors for the first), trying the exact
// key/value, then the wildcard values of that key in configuration order,
// then the key without a value; the walk stops where nothing matches or
// the matched node has no children, and a rule applies only if the last
// entry reached a node with a rate_limit. With an override, the override
// applies to any descriptor of a configured domain. ok is false when no
// limit applies (unknown domain, no match). entries must not hold the
// criticality entry. Pure.
func (c *Config) Match(domain string, entries []Entry, o *Override) (m Match, ok bool) {
	if c == nil || len(entries) == 0 {
		return m, false
	}
	root := c.domains[domain]
	if root == nil {
		return m, false
	}
	var buf [8]step
	steps, rule := root.walk(entries, buf[:0])
	if o != nil {
		alg := FixedWindow
		if rule != nil && !rule.Unlimited {
			alg = rule.Limit.Algorithm
		}
		if alg == SlidingLog && o.Requests > maxLogLimit {
			alg = SlidingWindow
		}
		l := Limit{Algorithm: alg, Requests: o.Requests, Unit: o.Unit, Burst: defaultBurst(alg, o.Requests)}
		return Match{Rule: rule, Limit: l, Override: true,
			StatKey: overrideKey(domain, entries), StoreKey: storeKey(domain, entries, nil)}, true
	}
	if rule == nil {
		return m, false
	}
	return Match{Rule: rule, Limit: rule.Limit,
		StatKey: statKey(rule, domain, entries, steps), StoreKey: storeKey(domain, entries, steps)}, true
}

// walk matches entries from n down; it returns the steps taken and the
// rule reached by the last entry.
func (n *node) walk(entries []Entry, steps []step) ([]step, *Rule) {
	var rule *Rule
	cur := n
	for i, e := range entries {
		next, kind := cur.child(e)
		steps = append(steps, step{next, kind})
		if next == nil {
			break
		}
		if next.rule != nil && i == len(entries)-1 {
			rule = next.rule
		}
		if !next.hasChildren() {
			break
		}
		cur = next
	}
	return steps, rule
}

// child is the child of n that e matches: exact value, first matching
// wildcard, or the key's default.
func (n *node) child(e Entry) (*node, matchKind) {
	if c := n.exact[entryKey{e.Key, e.Value}]; c != nil {
		return c, exactMatch
	}
	for _, w := range n.wildcards {
		if w.key == e.Key && globMatch(w.glob, e.Value) {
			return w, wildcardMatch
		}
	}
	if c := n.defaults[e.Key]; c != nil {
		return c, defaultMatch
	}
	return nil, noMatch
}

// shared is the value that stands for entry i in keys: the wildcard
// pattern when the entry matched a wildcard with share_threshold (all
// matching values share one bucket and one metric), else "".
func shared(steps []step, i int) string {
	if i < len(steps) && steps[i].kind == wildcardMatch && steps[i].n.shareThreshold {
		return steps[i].n.value
	}
	return ""
}

// StoreKey is envoyproxy/ratelimit's cache key of a descriptor without
// the window start: "domain_key1_value1_key2_value2_".
func storeKey(domain string, entries []Entry, steps []step) string {
	size := len(domain) + 1
	for _, e := range entries {
		size += len(e.Key) + len(e.Value) + 2
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(domain)
	b.WriteByte('_')
	for i, e := range entries {
		v := e.Value
		if p := shared(steps, i); p != "" {
			v = p
		}
		b.WriteString(e.Key)
		b.WriteByte('_')
		b.WriteString(v)
		b.WriteByte('_')
	}
	return b.String()
}

// statKey is the metric key of a rule matched through steps, as
// envoyproxy/ratelimit builds it for detailed_metric and value_to_metric.
func statKey(r *Rule, domain string, entries []Entry, steps []step) string {
	if !r.DetailedMetric && !r.valueToMetric {
		return r.Key
	}
	var b strings.Builder
	b.WriteString(domain)
	for i, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.Key)
		p := shared(steps, i)
		switch {
		case p != "":
			b.WriteByte('_')
			b.WriteString(p)
		case r.DetailedMetric:
			b.WriteByte('_')
			b.WriteString(e.Value)
		case steps[i].kind == wildcardMatch && !steps[i].n.valueToMetric:
			b.WriteByte('_')
			b.WriteString(steps[i].n.value)
		case steps[i].kind == exactMatch || steps[i].n.valueToMetric:
			if e.Value != "" {
				b.WriteByte('_')
				b.WriteString(e.Value)
			}
		}
	}
	return b.String()
}

// overrideKey is the metric key of an override:
// "domain.key1_value1.key2".
func overrideKey(domain string, entries []Entry) string {
	var b strings.Builder
	b.WriteString(domain)
	for _, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.Key)
		if e.Value != "" {
			b.WriteByte('_')
			b.WriteString(e.Value)
		}
	}
	return b.String()
}
