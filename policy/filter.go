package policy

import (
	"fmt"
	"strings"

	"github.com/hashicorp/go-bexpr"
	"github.com/hashicorp/go-bexpr/grammar"
)

// Instance is what a subset filter sees of one service instance: the
// fields of Consul's CheckServiceNode that the discovery model keeps, under
// the same selectors ("Service.Meta.version", "Service.Tags", "Node.Node").
type Instance struct {
	Node    InstanceNode
	Service InstanceService
}

// InstanceNode is the node part of an Instance.
type InstanceNode struct {
	Node       string // node name
	Datacenter string
}

// InstanceService is the service part of an Instance.
type InstanceService struct {
	ID, Service, Address string
	Port                 int
	Tags                 []string
	Meta                 map[string]string
}

// supportedSelectors are the selector paths a filter may use (a path with
// more parts must start with one ending in "*"). Consul accepts others
// (Node.Meta, Node.Address, Checks, Service.Weights, ...): the discovery
// model does not keep them, so a filter naming them is rejected rather
// than silently matching nothing.
var supportedSelectors = []string{
	"Service.ID", "Service.Service", "Service.Address", "Service.Port", "Service.Tags",
	"Service.Meta", "Service.Meta.*", "Node.Node", "Node.Datacenter",
}

// maxParseSteps bounds go-bexpr's parser (its "expressions" are parser
// steps, not terms); MaxFilterBytes bounds it well below this.
const maxParseSteps = 1 << 20

// Filter is a compiled subset filter: Consul's filter language, parsed and
// evaluated by go-bexpr.
type Filter struct {
	expr string
	eval *bexpr.Evaluator
}

// CompileFilter parses expr with go-bexpr and checks that it names only
// supported selectors (see Instance). An empty expr is an error: a subset
// without a filter has a nil *Filter.
func CompileFilter(expr string) (*Filter, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("policy: filter: empty")
	}
	if len(expr) > MaxFilterBytes {
		return nil, fmt.Errorf("policy: filter: %d bytes, more than %d", len(expr), MaxFilterBytes)
	}
	ast, err := grammar.Parse("", []byte(expr), grammar.MaxExpressions(maxParseSteps))
	if err != nil {
		return nil, fmt.Errorf("policy: filter %q: %w", expr, err)
	}
	terms := 0
	if err := checkSelectors(ast.(grammar.Expression), nil, &terms); err != nil {
		return nil, fmt.Errorf("policy: filter %q: %w", expr, err)
	}
	eval, err := bexpr.CreateEvaluator(expr, bexpr.WithMaxExpressions(maxParseSteps))
	if err != nil {
		return nil, fmt.Errorf("policy: filter %q: %w", expr, err)
	}
	return &Filter{expr: expr, eval: eval}, nil
}

// String returns the filter's expression.
func (f *Filter) String() string { return f.expr }

// Match reports whether inst is selected. A nil Filter selects every
// instance; an evaluation error (a value of the wrong type, say) selects
// none, as Consul's filtered queries drop what they cannot evaluate.
func (f *Filter) Match(inst Instance) bool {
	if f == nil {
		return true
	}
	if inst.Service.Meta == nil {
		inst.Service.Meta = map[string]string{}
	}
	ok, err := f.eval.Evaluate(inst)
	return err == nil && ok
}

// checkSelectors walks a go-bexpr syntax tree and fails on the first
// selector outside supportedSelectors; names bound by a collection
// expression ("all Service.Tags as t { t != x }") are allowed inside it.
// It counts match and collection expressions in *terms, failing beyond
// MaxFilterTerms.
func checkSelectors(e grammar.Expression, bound []string, terms *int) error {
	switch x := e.(type) {
	case *grammar.UnaryExpression:
		return checkSelectors(x.Operand, bound, terms)
	case *grammar.BinaryExpression:
		if err := checkSelectors(x.Left, bound, terms); err != nil {
			return err
		}
		return checkSelectors(x.Right, bound, terms)
	case *grammar.MatchExpression:
		if *terms++; *terms > MaxFilterTerms {
			return fmt.Errorf("more than %d terms", MaxFilterTerms)
		}
		return checkSelector(x.Selector.Path, bound)
	case *grammar.CollectionExpression:
		if *terms++; *terms > MaxFilterTerms {
			return fmt.Errorf("more than %d terms", MaxFilterTerms)
		}
		if err := checkSelector(x.Selector.Path, bound); err != nil {
			return err
		}
		b := x.NameBinding
		return checkSelectors(x.Inner, append(bound[:len(bound):len(bound)], b.Default, b.Index, b.Value), terms)
	default:
		return fmt.Errorf("unsupported expression %T", e)
	}
}

// checkSelector checks one selector path (see checkSelectors).
func checkSelector(path []string, bound []string) error {
	if len(path) == 0 {
		return fmt.Errorf("empty selector")
	}
	for _, b := range bound {
		if b != "" && path[0] == b {
			return nil
		}
	}
	joined := strings.Join(path, ".")
	for _, s := range supportedSelectors {
		if prefix, wild := strings.CutSuffix(s, "*"); wild && len(path) == strings.Count(s, ".")+1 &&
			strings.HasPrefix(joined, prefix) || joined == s {
			return nil
		}
	}
	return fmt.Errorf("selector %q is not supported (supported: %s)", joined, strings.Join(supportedSelectors, ", "))
}
