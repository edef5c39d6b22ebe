package policy

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/consul/api"
)

// FileService is what the file's services.<name> section says of traffic
// policy, in plain types (config converts its section to it; policy does
// not import config). FromFile makes it a Policy.
type FileService struct {
	Subsets       map[string]FileSubset // subset name -> filter
	DefaultSubset string
	Redirect      *Redirect // Service, ServiceSubset; Datacenter unused
	LBPolicy      string    // services.<name>.lb_policy
	HashPolicies  []FileHashPolicy
}

// IsDefault reports whether f says nothing a Resolver would carry.
func (f FileService) IsDefault() bool {
	return len(f.Subsets) == 0 && f.DefaultSubset == "" && f.Redirect == nil && len(f.HashPolicies) == 0
}

// FileSubset is services.<name>.subsets.<subset>.
type FileSubset struct {
	Filter      string // Consul's filter language; "": every instance
	OnlyPassing bool
}

// FileHashPolicy is one services.<name>.hash_policies item: field and
// field_value, or source_ip.
type FileHashPolicy struct {
	Field, FieldValue  string // field: header, cookie or query_parameter
	SourceIP, Terminal bool
}

// FromFile converts service's file settings into a Policy whose Resolver
// carries them (nil when f.IsDefault()), with every problem joined into
// the error, each "<field>: <reason>" (field as in the file, relative to
// services.<name>). The Policy is usable for the fields without a problem.
func FromFile(service string, f FileService) (Policy, error) {
	p := Policy{Service: service}
	if f.IsDefault() {
		return p, nil
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	r := &Resolver{DefaultSubset: f.DefaultSubset}
	if len(f.Subsets) > MaxSubsets {
		bad("subsets", "%d subsets, more than %d", len(f.Subsets), MaxSubsets)
	}
	for _, name := range sortedNames(f.Subsets) {
		s := Subset{Name: name, OnlyPassing: f.Subsets[name].OnlyPassing}
		if !subsetName.MatchString(name) {
			bad("subsets."+name, "is not a subset name (lower-case letters, digits and '-', as Consul's)")
			continue
		}
		if expr := f.Subsets[name].Filter; expr != "" {
			filter, err := CompileFilter(expr)
			if err != nil {
				bad("subsets."+name+".filter", "%v", strings.TrimPrefix(err.Error(), "policy: "))
				continue
			}
			s.Filter = filter
		}
		r.Subsets = append(r.Subsets, s)
	}
	if f.DefaultSubset != "" {
		if _, ok := f.Subsets[f.DefaultSubset]; !ok {
			bad("default_subset", "%q is not one of the service's subsets (%s)", f.DefaultSubset, strings.Join(sortedNames(f.Subsets), ", "))
		}
	}
	if rd := f.Redirect; rd != nil {
		errs = append(errs, checkRedirect(service, *rd, f.Subsets)...)
		r.Redirect = &Redirect{Service: rd.Service, ServiceSubset: rd.ServiceSubset}
	}
	if lb, err := fileLoadBalancer(f); err != nil {
		errs = append(errs, err)
	} else {
		r.LoadBalancer = lb
	}
	p.Resolver = r
	return p, errors.Join(errs...)
}

// checkRedirect rejects an empty redirect, and one to the service itself
// (a loop) unless it names another subset of it.
func checkRedirect(service string, rd Redirect, subsets map[string]FileSubset) []error {
	switch {
	case rd.Service == "" && rd.ServiceSubset == "":
		return []error{errors.New("redirect: names neither a service nor a subset")}
	case rd.Service == "" || strings.EqualFold(rd.Service, service):
		if rd.ServiceSubset == "" {
			return []error{fmt.Errorf("redirect: %q redirects to itself", service)}
		}
		if _, ok := subsets[rd.ServiceSubset]; !ok {
			return []error{fmt.Errorf("redirect.subset: %q is not one of the service's subsets (%s)", rd.ServiceSubset, strings.Join(sortedNames(subsets), ", "))}
		}
	}
	return nil
}

// fileLoadBalancer is the LoadBalancer of the hash policies (nil without
// any); they need lb_policy ring_hash or maglev.
func fileLoadBalancer(f FileService) (*LoadBalancer, error) {
	if len(f.HashPolicies) == 0 {
		return nil, nil
	}
	var errs []error
	if f.LBPolicy != "ring_hash" && f.LBPolicy != "maglev" {
		errs = append(errs, fmt.Errorf("hash_policies: need lb_policy ring_hash or maglev (it is %q)", f.LBPolicy))
	}
	if len(f.HashPolicies) > MaxHashPolicies {
		errs = append(errs, fmt.Errorf("hash_policies: %d items, more than %d", len(f.HashPolicies), MaxHashPolicies))
	}
	lb := &LoadBalancer{Policy: f.LBPolicy}
	for i, h := range f.HashPolicies {
		at := fmt.Sprintf("hash_policies[%d]", i)
		switch {
		case h.SourceIP && (h.Field != "" || h.FieldValue != ""):
			errs = append(errs, fmt.Errorf("%s: set source_ip or field and field_value, not both", at))
		case !h.SourceIP && !slices.Contains([]string{"header", "cookie", "query_parameter"}, h.Field):
			errs = append(errs, fmt.Errorf("%s.field: %q is not header, cookie or query_parameter (or set source_ip)", at, h.Field))
		case !h.SourceIP && h.FieldValue == "":
			errs = append(errs, fmt.Errorf("%s.field_value: is empty (the %s to hash)", at, h.Field))
		}
		lb.HashPolicies = append(lb.HashPolicies, api.HashPolicy{Field: h.Field, FieldValue: h.FieldValue, SourceIP: h.SourceIP, Terminal: h.Terminal})
	}
	return lb, errors.Join(errs...)
}

// subsetName is what Consul accepts as a subset name (a DNS label).
var subsetName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func sortedNames(m map[string]FileSubset) []string { return slices.Sorted(maps.Keys(m)) }

// The sources of a service's resolver, as Merge reports them.
const (
	SourceNone    = ""
	SourceFile    = "file"
	SourceEntries = "config entries"
)

// Merge is the precedence rule between the file and Consul's config
// entries, per kind: a service-resolver entry, when Consul has one for
// the service, is used whole and the file's subsets, default_subset,
// redirect and hash_policies are ignored; without one, the file's are
// used. The other kinds (service-defaults, -splitter, -router) come from
// the entries only. It returns the merged policy and the source of its
// Resolver.
func Merge(file, entries Policy) (Policy, string) {
	out := entries
	switch {
	case entries.Resolver != nil:
		return out, SourceEntries
	case file.Resolver != nil:
		out.Resolver = file.Resolver
		return out, SourceFile
	}
	return out, SourceNone
}
