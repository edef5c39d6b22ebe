package ratelimit

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// rateLimit parses a rate_limit block; nil when unusable.
func (w *walker) rateLimit(n *yaml.Node, path string) *Rule {
	before := len(w.errs)
	f := w.fields(n, path, rateLimitKeys)
	r := &Rule{
		Unlimited: w.boolean(f["unlimited"], path+".unlimited"),
		Name:      w.str(f["name"], path+".name"),
	}
	r.Replaces = w.replaces(f["replaces"], path+".replaces", r.Name)
	if r.Unlimited {
		// requests_per_unit is ignored, as envoyproxy/ratelimit does.
		for _, k := range []string{"unit", "algorithm", "burst", "criticality"} {
			if f[k] != nil {
				w.errorf(f[k], path+"."+k, "an unlimited rate_limit takes no %s", k)
			}
		}
		return r
	}
	r.Limit = w.limit(n, f, path)
	w.criticality(f["criticality"], path+".criticality", r)
	if len(w.errs) > before {
		return nil
	}
	return r
}

// limit parses unit, requests_per_unit, algorithm and burst.
func (w *walker) limit(n *yaml.Node, f map[string]*yaml.Node, path string) Limit {
	var l Limit
	if f["unit"] == nil {
		w.errorf(n, path, "missing unit (want second, minute, hour, day, week, month or year), or unlimited: true")
	} else if u, err := ParseUnit(w.str(f["unit"], path+".unit")); err != nil {
		w.errorf(f["unit"], path+".unit", "%v", err)
	} else {
		l.Unit = u
	}
	// A missing requests_per_unit is 0 (refuse all), as in envoyproxy/ratelimit.
	if rpu := f["requests_per_unit"]; rpu != nil {
		l.Requests = w.uint32(rpu, path+".requests_per_unit")
	}
	if a, err := ParseAlgorithm(w.str(f["algorithm"], path+".algorithm")); err != nil {
		w.errorf(f["algorithm"], path+".algorithm", "%v", err)
	} else {
		l.Algorithm = a
	}
	if l.Algorithm == SlidingLog && l.Requests > maxLogLimit {
		w.errorf(f["requests_per_unit"], path+".requests_per_unit",
			"sliding_log keeps one timestamp per request: requests_per_unit %d exceeds %d (use sliding_window)",
			l.Requests, maxLogLimit)
	}
	l.Burst = defaultBurst(l.Algorithm, l.Requests)
	if b := f["burst"]; b != nil {
		switch v := w.uint32(b, path+".burst"); {
		case !l.Algorithm.bucket():
			w.errorf(b, path+".burst", "burst applies to token_bucket and leaky_bucket, not %s", l.Algorithm)
		case v == 0:
			w.errorf(b, path+".burst", "burst must be at least 1")
		default:
			l.Burst = v
		}
	}
	return l
}

// replaces parses a list of {name: ...}.
func (w *walker) replaces(n *yaml.Node, path, self string) []string {
	n = resolve(n)
	if n == nil || isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		w.errorf(n, path, "want a list of {name: ...}, got %s", kindName(n))
		return nil
	}
	var names []string
	for i, item := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		name := w.str(w.fields(resolve(item), p, replacesKeys)["name"], p+".name")
		switch {
		case name == "":
			w.errorf(item, p, "missing or empty name")
		case name == self:
			w.errorf(item, p, "a rate_limit cannot replace itself (name %q)", name)
		default:
			names = append(names, name)
		}
	}
	return names
}

// criticality parses the criticality extension of a rate_limit:
//
//	criticality: true | false          # the service's shares | off for this rule
//	criticality:
//	  shares: {SHEDDABLE: 0.5, ...}    # share of the capacity per class, in [0, 1]
//	  limits: {SHEDDABLE: 20, ...}     # absolute cap per class, in requests per unit (tokens for buckets)
//
// Classes left out of shares take DefaultShares.
func (w *walker) criticality(n *yaml.Node, path string, r *Rule) {
	n = resolve(n)
	if n == nil {
		return
	}
	a := &Admission{Shares: DefaultShares}
	switch {
	case isNull(n):
	case n.Kind == yaml.ScalarNode:
		if w.boolean(n, path) {
			r.CriticalityOn = true
		} else {
			r.CriticalityOff = true
		}
		return
	default:
		f := w.fields(n, path, criticalityKey)
		w.classes(f["shares"], path+".shares", func(c Criticality, v *yaml.Node, p string) {
			a.Shares[c] = w.float(v, p)
		})
		w.classes(f["limits"], path+".limits", func(c Criticality, v *yaml.Node, p string) {
			a.Limits[c] = w.uint32(v, p)
		})
	}
	if err := a.validate(r.Limit.Capacity()); err != nil {
		w.errorf(n, path, "%v", err)
		return
	}
	r.Admission = a
}

// classes calls set for each entry of a mapping from class name to value.
func (w *walker) classes(n *yaml.Node, path string, set func(Criticality, *yaml.Node, string)) {
	n = resolve(n)
	if n == nil || isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		w.errorf(n, path, "want a mapping from criticality to value, got %s", kindName(n))
		return
	}
	seen := map[Criticality]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		c, ok := parseCriticalityName(k.Value)
		switch {
		case !ok:
			w.errorf(k, path, "unknown criticality %q (want SHEDDABLE, SHEDDABLE_PLUS, CRITICAL or CRITICAL_PLUS)", k.Value)
		case seen[c]:
			w.errorf(k, path, "duplicate criticality %q", k.Value)
		default:
			seen[c] = true
			set(c, n.Content[i+1], path+"."+k.Value)
		}
	}
}
