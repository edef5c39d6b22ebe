package ratelimit

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalidConfig is wrapped by every error of Load: each joined error
// names the file, line, YAML path and reason.
var ErrInvalidConfig = errors.New("ratelimit: invalid config")

// maxLogLimit bounds requests_per_unit of sliding_log rules: the log
// keeps one timestamp (8 bytes) per admitted hit.
const maxLogLimit = 100_000

// File is one configuration file: its name (for messages) and content.
type File struct {
	Name string
	Data []byte
}

// Config is a loaded rate-limit configuration: the descriptor tree of each
// domain. Immutable and safe for concurrent use; the zero Config (or nil)
// has no domains.
type Config struct {
	domains map[string]*node
	rules   []*Rule
}

// Rule is one configured rate_limit.
type Rule struct {
	Domain string
	// Key is envoyproxy/ratelimit's full key of the rule: the domain and
	// the descriptor path, "domain.key1_value1.key2" (a level without a
	// value is its key alone). It names the rule's metrics.
	Key  string
	Name string // rate_limit.name, for replaces; may be empty
	// Limit is the rule's limit (zero when Unlimited), with Burst
	// resolved for the bucket algorithms.
	Limit      Limit
	Unlimited  bool
	ShadowMode bool
	// QuotaMode (envoyproxy/ratelimit's quota_mode): over its limit the
	// descriptor is answered OK, and counted in over_limit.
	QuotaMode bool
	Replaces  []string // names of the rules this one replaces
	// DetailedMetric: metrics are keyed by the request's values
	// (detailed_metric).
	DetailedMetric bool
	// Admission is the rule's criticality settings; nil means the
	// service's (CriticalityConfig.Shares with CriticalityOn, none with
	// CriticalityOff, else none unless CriticalityConfig.Enabled).
	Admission      *Admission
	CriticalityOn  bool // criticality: true
	CriticalityOff bool // criticality: false
	// Source is "file:line" of the rule's descriptor.
	Source string

	valueToMetric bool // a descriptor on the rule's path has value_to_metric
}

// node is one descriptor of a domain's tree (the domain itself is the
// root node).
type node struct {
	key, value     string
	glob           []string // value split at '*' when it is a wildcard
	rule           *Rule
	valueToMetric  bool
	shareThreshold bool
	source         string

	children  []*node // in configuration order
	exact     map[entryKey]*node
	defaults  map[string]*node
	wildcards []*node // in configuration order: the first match wins
}

type entryKey struct{ key, value string }

// LoadOptions says how Load combines files; the zero value is
// envoyproxy/ratelimit's default.
type LoadOptions struct {
	// MergeDomains merges the descriptors of files that share a domain
	// (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG); a descriptor defined
	// twice at the same level is still an error. Off, a second file for a
	// domain is an error naming both files.
	MergeDomains bool
	// AllowEmpty lets LoadPath load a file or directory that defines no
	// domain (every request is then OK). Off, that is ErrEmptyConfig: an
	// empty directory is more often a mount gone wrong than a wish to
	// limit nothing.
	AllowEmpty bool
}

// Load parses and validates files (envoyproxy/ratelimit's YAML, one domain
// per file) into a Config with the default LoadOptions.
func Load(files ...File) (*Config, error) { return LoadOptions{}.Load(files...) }

// Load parses and validates files (envoyproxy/ratelimit's YAML, one domain
// per file unless o.MergeDomains) into a Config. Every problem is
// reported, each naming its file (and line and YAML path where it has
// one); the error wraps ErrInvalidConfig. Pure: no I/O.
func (o LoadOptions) Load(files ...File) (*Config, error) {
	c := &Config{domains: map[string]*node{}}
	var errs []error
	for _, f := range files {
		w := &walker{file: f.Name}
		domain, top := w.parse(f.Data)
		errs = append(errs, w.errs...)
		if domain == "" {
			continue
		}
		root := c.domains[domain]
		switch {
		case root == nil:
			root = &node{source: f.Name} // the file that defined the domain first
			c.domains[domain] = root
		case !o.MergeDomains:
			errs = append(errs, fmt.Errorf("domain %q in %s is already defined in %s (set ratelimit.merge_domains: true to merge)",
				domain, f.Name, root.source))
			continue
		}
		for _, d := range top.children {
			if err := root.add(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w:\n%w", ErrInvalidConfig, errors.Join(errs...))
	}
	for _, root := range c.domains {
		c.rules = root.collect(c.rules)
	}
	slices.SortFunc(c.rules, func(a, b *Rule) int { return strings.Compare(a.Key, b.Key) })
	return c, nil
}

// Domains returns the configured domains, sorted.
func (c *Config) Domains() []string {
	if c == nil {
		return nil
	}
	ds := make([]string, 0, len(c.domains))
	for d := range c.domains {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds
}

// Rules returns every rule, sorted by Key.
func (c *Config) Rules() []*Rule {
	if c == nil {
		return nil
	}
	return slices.Clone(c.rules)
}

// add inserts child under n; a descriptor with the same key and value at
// the same level is an error (also across merged files).
func (n *node) add(child *node) error {
	if prev := n.find(child.key, child.value); prev != nil {
		return fmt.Errorf("%s: duplicate descriptor key %q value %q (first defined at %s)",
			child.source, child.key, child.value, prev.source)
	}
	n.children = append(n.children, child)
	switch {
	case child.glob != nil:
		n.wildcards = append(n.wildcards, child)
	case child.value == "":
		if n.defaults == nil {
			n.defaults = map[string]*node{}
		}
		n.defaults[child.key] = child
	default:
		if n.exact == nil {
			n.exact = map[entryKey]*node{}
		}
		n.exact[entryKey{child.key, child.value}] = child
	}
	return nil
}

// find returns the child of n configured with exactly key and value.
func (n *node) find(key, value string) *node {
	if value == "" {
		return n.defaults[key]
	}
	if c := n.exact[entryKey{key, value}]; c != nil {
		return c
	}
	for _, w := range n.wildcards {
		if w.key == key && w.value == value {
			return w
		}
	}
	return nil
}

func (n *node) hasChildren() bool {
	return len(n.exact) > 0 || len(n.defaults) > 0 || len(n.wildcards) > 0
}

// collect appends the rules of n's subtree to rules.
func (n *node) collect(rules []*Rule) []*Rule {
	if n.rule != nil {
		rules = append(rules, n.rule)
	}
	for _, c := range n.children {
		rules = c.collect(rules)
	}
	return rules
}

// compileGlob splits a wildcard value at its stars; nil when value has
// none.
func compileGlob(value string) []string {
	if !strings.Contains(value, "*") {
		return nil
	}
	return strings.Split(value, "*")
}

// globMatch reports whether s matches the split pattern: each '*' stands
// for any run of characters, possibly empty.
func globMatch(parts []string, s string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return true
}
