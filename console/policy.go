package console

import (
	"fmt"
	"maps"
	"slices"

	"github.com/xds-server/xds-server/policy"
)

// PolicyView is a service's traffic policy in brief, from Consul's config
// entries (each the last good version), and the entries of the service
// whose current version is rejected.
type PolicyView struct {
	Protocol      string          `json:"protocol,omitempty"`
	DefaultSubset string          `json:"default_subset,omitempty"`
	Subsets       []PolicySubset  `json:"subsets"`
	Redirect      string          `json:"redirect,omitempty"` // service[/subset][@datacenter]
	Splits        []PolicySplit   `json:"splits"`
	Routes        int             `json:"routes"`
	Entries       []string        `json:"entries"` // kind/name of the entries in use
	Rejected      []RejectedEntry `json:"rejected"`
}

// PolicySubset is one resolver subset.
type PolicySubset struct {
	Name        string `json:"name"`
	Filter      string `json:"filter,omitempty"` // "": every instance
	OnlyPassing bool   `json:"only_passing,omitempty"`
}

// PolicySplit is one share of a splitter.
type PolicySplit struct {
	Weight  float32 `json:"weight"` // percent
	Service string  `json:"service,omitempty"`
	Subset  string  `json:"subset,omitempty"`
}

// RejectedEntry is one config entry whose current version is rejected
// (its last good version, if any, is in use).
type RejectedEntry struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Field  string `json:"field"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// policyOf is service's policy view; nil without a Policies source.
func (c *Console) policyOf(service string) *PolicyView {
	if c.cfg.Policies == nil {
		return nil
	}
	p := c.cfg.Policies.Policy(service)
	v := &PolicyView{Protocol: p.Protocol, Subsets: []PolicySubset{}, Splits: []PolicySplit{}, Routes: len(p.Routes),
		Entries: []string{}, Rejected: []RejectedEntry{}}
	if r := p.Resolver; r != nil {
		v.DefaultSubset = r.DefaultSubset
		for _, s := range r.Subsets {
			ps := PolicySubset{Name: s.Name, OnlyPassing: s.OnlyPassing}
			if s.Filter != nil {
				ps.Filter = s.Filter.String()
			}
			v.Subsets = append(v.Subsets, ps)
		}
		if rd := r.Redirect; rd != nil {
			v.Redirect = redirectText(rd)
		}
	}
	for _, s := range p.Splits {
		v.Splits = append(v.Splits, PolicySplit{Weight: s.Weight, Service: s.Service, Subset: s.ServiceSubset})
	}
	for _, e := range p.Entries {
		v.Entries = append(v.Entries, e.Kind+"/"+e.Name)
	}
	for _, r := range c.cfg.Policies.Rejections() {
		if r.Name == service {
			v.Rejected = append(v.Rejected, rejectedEntry(r))
		}
	}
	return v
}

func redirectText(rd *policy.Redirect) string {
	s := rd.Service
	if rd.ServiceSubset != "" {
		s += "/" + rd.ServiceSubset
	}
	if rd.Datacenter != "" {
		s += "@" + rd.Datacenter
	}
	return s
}

// rejections lists every rejected entry (never nil).
func (c *Console) rejections() []RejectedEntry {
	out := []RejectedEntry{}
	if c.cfg.Policies == nil {
		return out
	}
	for _, r := range c.cfg.Policies.Rejections() {
		out = append(out, rejectedEntry(r))
	}
	return out
}

func rejectedEntry(r policy.Rejection) RejectedEntry {
	return RejectedEntry{Kind: r.Kind, Name: r.Name, Field: r.Field, Reason: r.Reason, Detail: r.Detail}
}

// text is the fleet page's problem line of e.
func (e RejectedEntry) text() string {
	return fmt.Sprintf("config entry %s %s rejected (%s): %s: %s; its last good version stays in use", e.Kind, e.Name, e.Reason, e.Field, e.Detail)
}

// UnservedPolicy is a traffic policy the xDS server cannot serve.
type UnservedPolicy struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

// policyErrors is what a Fleet tells of unserved policies (*xds.Server).
type policyErrors interface{ PolicyErrors() map[string]string }

// unserved lists the unserved policies, sorted by name (none when the
// fleet cannot tell).
func (c *Console) unserved() []UnservedPolicy {
	out := []UnservedPolicy{}
	pe, ok := c.cfg.Fleet.(policyErrors)
	if !ok {
		return out
	}
	errs := pe.PolicyErrors()
	for _, name := range slices.Sorted(maps.Keys(errs)) {
		out = append(out, UnservedPolicy{Name: name, Error: errs[name]})
	}
	return out
}
