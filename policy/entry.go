package policy

import (
	"fmt"
	"slices"

	"github.com/hashicorp/consul/api"
)

// Reasons a config entry is rejected: the "reason" label of
// xds_policy_rejections_total.
const (
	ReasonUnsupported = "unsupported_field" // a field set that xds-server does not implement
	ReasonBadFilter   = "bad_filter"        // a subset filter go-bexpr cannot parse, or with an unsupported selector
	ReasonBadValue    = "bad_value"         // a value out of range or inconsistent (weights, regexes, names)
	ReasonTooMany     = "too_many"          // beyond one of the bounds (MaxSubsets, ...)
	ReasonBadKind     = "bad_kind"          // not one of Kinds
)

// Entry is one config entry made into this package's model: the part of
// a Policy it sets.
type Entry struct {
	Kind, Name  string
	ModifyIndex uint64
	Protocol    string    // KindDefaults
	Resolver    *Resolver // KindResolver
	Splits      []Split   // KindSplitter
	Routes      []Route   // KindRouter
}

// Ref names e.
func (e Entry) Ref() EntryRef {
	return EntryRef{Kind: e.Kind, Name: e.Name, ModifyIndex: e.ModifyIndex}
}

// Rejection says why one config entry is not used: the entry, the field
// (a path such as "Subsets[v2].Filter") and the reason.
type Rejection struct {
	Kind, Name  string
	ModifyIndex uint64
	Field       string
	Reason      string // one of the Reason constants
	Detail      string
}

// Error formats r for logs and validate.
func (r *Rejection) Error() string {
	return fmt.Sprintf("policy: %s %q: %s: %s (%s)", r.Kind, r.Name, r.Field, r.Detail, r.Reason)
}

// fieldErr is a rejection before the entry's identity is filled in.
func fieldErr(field, reason, format string, args ...any) *Rejection {
	return &Rejection{Field: field, Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Parse makes a Consul config entry into an Entry, or says why it cannot
// be used. Fields listed as ignored in the README are ignored; any other
// field set but not implemented is a rejection.
func Parse(ce api.ConfigEntry) (Entry, *Rejection) {
	if ce == nil {
		return Entry{}, &Rejection{Field: "Kind", Reason: ReasonBadKind, Detail: "nil entry"}
	}
	e := Entry{Kind: ce.GetKind(), Name: ce.GetName(), ModifyIndex: ce.GetModifyIndex()}
	var rej *Rejection
	if rej = checkTenancy("", ce.GetNamespace(), ce.GetPartition()); rej == nil {
		switch x := ce.(type) {
		case *api.ServiceConfigEntry:
			e.Protocol, rej = parseDefaults(x)
		case *api.ServiceResolverConfigEntry:
			e.Resolver, rej = parseResolver(x)
		case *api.ServiceSplitterConfigEntry:
			e.Splits, rej = parseSplitter(x)
		case *api.ServiceRouterConfigEntry:
			e.Routes, rej = parseRouter(x)
		default:
			rej = fieldErr("Kind", ReasonBadKind, "kind %q is not read by xds-server", e.Kind)
		}
	}
	if rej != nil {
		rej.Kind, rej.Name, rej.ModifyIndex = e.Kind, e.Name, e.ModifyIndex
		return Entry{}, rej
	}
	return e, nil
}

// checkTenancy rejects namespaces and admin partitions other than the
// default (Consul Enterprise; xds-server reads the default ones only).
func checkTenancy(prefix, namespace, partition string) *Rejection {
	if namespace != "" && namespace != "default" {
		return fieldErr(prefix+"Namespace", ReasonUnsupported, "namespace %q: only the default namespace is read", namespace)
	}
	if partition != "" && partition != "default" {
		return fieldErr(prefix+"Partition", ReasonUnsupported, "partition %q: only the default partition is read", partition)
	}
	return nil
}

// protocols are the service-defaults protocols Consul knows.
var protocols = []string{"", "tcp", "http", "http2", "grpc"}

// parseDefaults reads a service-defaults entry's Protocol. Its other
// fields configure Connect sidecars (inbound listeners, mesh gateways,
// transparent proxy, ...), which xds-server does not run: ignored.
func parseDefaults(x *api.ServiceConfigEntry) (string, *Rejection) {
	if !slices.Contains(protocols, x.Protocol) {
		return "", fieldErr("Protocol", ReasonBadValue, "protocol %q is not one of tcp, http, http2, grpc", x.Protocol)
	}
	return x.Protocol, nil
}

// headerMods rejects request or response header modifiers (not yet
// translated).
func headerMods(prefix string, req, resp *api.HTTPHeaderModifiers) *Rejection {
	if req != nil && !emptyMods(req) {
		return fieldErr(prefix+"RequestHeaders", ReasonUnsupported, "header modifiers are not supported yet")
	}
	if resp != nil && !emptyMods(resp) {
		return fieldErr(prefix+"ResponseHeaders", ReasonUnsupported, "header modifiers are not supported yet")
	}
	return nil
}

func emptyMods(m *api.HTTPHeaderModifiers) bool {
	return len(m.Add) == 0 && len(m.Set) == 0 && len(m.Remove) == 0
}
