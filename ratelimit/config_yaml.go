package ratelimit

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// The keys of each level of the YAML, and where a key misplaced at
// another level belongs (for messages).
var (
	rootKeys       = []string{"domain", "descriptors"}
	descriptorKeys = []string{"key", "value", "rate_limit", "descriptors", "shadow_mode",
		"quota_mode", "detailed_metric", "value_to_metric", "share_threshold"}
	rateLimitKeys = []string{"unit", "requests_per_unit", "unlimited", "name", "replaces",
		"algorithm", "burst", "criticality"}
	replacesKeys   = []string{"name"}
	criticalityKey = []string{"shares", "limits"}
	keyHomes       = map[string]string{
		"domain": "the top level", "key": "a descriptor", "value": "a descriptor",
		"shadow_mode": "a descriptor", "quota_mode": "a descriptor", "detailed_metric": "a descriptor",
		"value_to_metric": "a descriptor", "share_threshold": "a descriptor",
		"descriptors": "the top level or a descriptor", "rate_limit": "a descriptor",
		"unit": "rate_limit", "requests_per_unit": "rate_limit", "unlimited": "rate_limit",
		"replaces": "rate_limit", "algorithm": "rate_limit", "burst": "rate_limit",
		"criticality": "rate_limit",
	}
)

// Bounds of one file: YAML aliases can make a short file describe a
// recursive or exponentially large tree.
const (
	MaxDescriptorDepth = 32     // descriptors nested in descriptors
	MaxFileDescriptors = 100000 // descriptors of one file, aliases expanded
)

// walker turns one file's YAML into descriptor nodes, collecting errors.
type walker struct {
	file    string
	errs    []error
	count   int  // descriptors walked so far
	tooMany bool // count passed MaxFileDescriptors (reported once)
}

// ruleCtx is what a descriptor inherits from its parents.
type ruleCtx struct {
	domain    string
	parentKey string // full key of the parent: "domain" or "domain.k_v"
	v2m       bool   // an ancestor has value_to_metric
	depth     int    // of the descriptors being walked; 1 at the top level
}

func (w *walker) errorf(n *yaml.Node, path, format string, args ...any) {
	w.errs = append(w.errs, fmt.Errorf("%s:%d:%d: %s: %s", w.file, n.Line, n.Column, path,
		fmt.Sprintf(format, args...)))
}

func (w *walker) source(n *yaml.Node) string { return fmt.Sprintf("%s:%d", w.file, n.Line) }

// parse returns the file's domain and a root node holding its top-level
// descriptors; domain is "" when the file is unusable.
func (w *walker) parse(data []byte) (string, *node) {
	top := &node{}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		w.errs = append(w.errs, fmt.Errorf("%s: %w", w.file, err))
		return "", top
	}
	if len(doc.Content) == 0 {
		w.errs = append(w.errs, fmt.Errorf("%s: empty file: want a mapping with a domain", w.file))
		return "", top
	}
	root := resolve(doc.Content[0])
	f := w.fields(root, "(top level)", rootKeys)
	domain := w.str(f["domain"], "domain")
	if f["domain"] == nil || domain == "" {
		w.errorf(root, "domain", "missing or empty domain")
		return "", top
	}
	w.descriptors(f["descriptors"], "descriptors", top, ruleCtx{domain: domain, parentKey: domain, depth: 1})
	return domain, top
}

// descriptors adds the descriptors of the sequence n to parent.
func (w *walker) descriptors(n *yaml.Node, path string, parent *node, ctx ruleCtx) {
	n = resolve(n)
	if n == nil || isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		w.errorf(n, path, "want a list of descriptors, got %s", kindName(n))
		return
	}
	if ctx.depth > MaxDescriptorDepth {
		w.errorf(n, path, "descriptors nested more than %d deep (a recursive alias?)", MaxDescriptorDepth)
		return
	}
	for i, item := range n.Content {
		if w.count++; w.count > MaxFileDescriptors {
			if !w.tooMany {
				w.tooMany = true
				w.errorf(n, path, "more than %d descriptors in one file (aliases expanded)", MaxFileDescriptors)
			}
			return
		}
		p := fmt.Sprintf("%s[%d]", path, i)
		d := w.descriptor(resolve(item), p, ctx)
		if d == nil {
			continue
		}
		if err := parent.add(d); err != nil {
			w.errorf(item, p, "%v", strings.TrimPrefix(err.Error(), d.source+": "))
		}
	}
}

// descriptor parses one descriptor and its subtree; nil when unusable.
func (w *walker) descriptor(n *yaml.Node, path string, ctx ruleCtx) *node {
	if n.Kind != yaml.MappingNode {
		w.errorf(n, path, "want a descriptor (a mapping with key, value, rate_limit, descriptors), got %s", kindName(n))
		return nil
	}
	f := w.fields(n, path, descriptorKeys)
	key := w.str(f["key"], path+".key")
	if key == "" {
		w.errorf(n, path, "missing or empty key")
		return nil
	}
	d := &node{
		key:            key,
		value:          w.str(f["value"], path+".value"),
		source:         w.source(n),
		valueToMetric:  w.boolean(f["value_to_metric"], path+".value_to_metric"),
		shareThreshold: w.boolean(f["share_threshold"], path+".share_threshold"),
	}
	d.glob = compileGlob(d.value)
	if d.shareThreshold && d.glob == nil {
		w.errorf(f["share_threshold"], path+".share_threshold",
			"share_threshold needs a wildcard value (with '*'), got value %q", d.value)
	}
	full := ctx.parentKey + "." + key
	if d.value != "" {
		full += "_" + d.value
	}
	child := ruleCtx{domain: ctx.domain, parentKey: full, v2m: ctx.v2m || d.valueToMetric, depth: ctx.depth + 1}
	if rl := f["rate_limit"]; rl != nil && !isNull(resolve(rl)) {
		d.rule = w.rateLimit(resolve(rl), path+".rate_limit")
		if d.rule != nil {
			d.rule.Domain, d.rule.Key, d.rule.Source = ctx.domain, full, d.source
			d.rule.ShadowMode = w.boolean(f["shadow_mode"], path+".shadow_mode")
			d.rule.QuotaMode = w.boolean(f["quota_mode"], path+".quota_mode")
			d.rule.DetailedMetric = w.boolean(f["detailed_metric"], path+".detailed_metric")
			d.rule.valueToMetric = child.v2m
		}
	} else {
		w.boolean(f["shadow_mode"], path+".shadow_mode")
		w.boolean(f["quota_mode"], path+".quota_mode")
		w.boolean(f["detailed_metric"], path+".detailed_metric")
	}
	w.descriptors(f["descriptors"], path+".descriptors", d, child)
	return d
}

// fields returns the values of mapping n by key, reporting unknown and
// duplicate keys (merge keys "<<" are expanded).
func (w *walker) fields(n *yaml.Node, path string, known []string) map[string]*yaml.Node {
	f := map[string]*yaml.Node{}
	if n == nil || isNull(n) {
		return f
	}
	if n.Kind != yaml.MappingNode {
		w.errorf(n, path, "want a mapping, got %s", kindName(n))
		return f
	}
	var merged []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Value == "<<" && k.Tag == "!!merge":
			merged = append(merged, resolve(v))
		case f[k.Value] != nil:
			w.errorf(k, path, "duplicate key %q (first at line %d)", k.Value, f[k.Value].Line)
		case !slices.Contains(known, k.Value):
			w.unknown(k, path, known)
		default:
			f[k.Value] = v
		}
	}
	for _, m := range merged {
		for k, v := range w.fields(m, path, known) {
			if f[k] == nil {
				f[k] = v
			}
		}
	}
	return f
}

func (w *walker) unknown(k *yaml.Node, path string, known []string) {
	msg := fmt.Sprintf("unknown key %q (want one of %s)", k.Value, strings.Join(known, ", "))
	if home, ok := keyHomes[k.Value]; ok {
		msg = fmt.Sprintf("key %q does not belong here: it goes in %s", k.Value, home)
	}
	w.errorf(k, path, "%s", msg)
}

// str returns scalar n's text ("" for null or absent).
func (w *walker) str(n *yaml.Node, path string) string {
	n = resolve(n)
	if n == nil || isNull(n) {
		return ""
	}
	if n.Kind != yaml.ScalarNode {
		w.errorf(n, path, "want a string, got %s", kindName(n))
		return ""
	}
	return n.Value
}

func (w *walker) boolean(n *yaml.Node, path string) bool {
	n = resolve(n)
	if n == nil || isNull(n) {
		return false
	}
	var b bool
	if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
		w.errorf(n, path, "want true or false, got %s", kindName(n))
	}
	return b
}

func (w *walker) uint32(n *yaml.Node, path string) uint32 {
	n = resolve(n)
	var v uint64
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&v) != nil || v > math.MaxUint32 {
		w.errorf(n, path, "want an integer in [0, %d], got %s", uint32(math.MaxUint32), kindName(n))
		return 0
	}
	return uint32(v)
}

func (w *walker) float(n *yaml.Node, path string) float64 {
	n = resolve(n)
	var v float64
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&v) != nil {
		w.errorf(n, path, "want a number, got %s", kindName(n))
		return math.NaN()
	}
	return v
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}
