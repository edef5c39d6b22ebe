package policy

import (
	"cmp"
	"maps"
	"slices"

	"github.com/hashicorp/consul/api"
)

// Set holds the entries in use, kind by kind, each the last good version
// of its entry, and the current rejections. It is not safe for concurrent
// use (Watcher guards it).
type Set struct {
	good     map[string]map[string]Entry      // kind -> name -> entry in use
	rejected map[string]map[string]*Rejection // kind -> name -> why its current version is not used
}

// NewSet returns an empty Set: every service at its defaults.
func NewSet() *Set {
	s := &Set{good: map[string]map[string]Entry{}, rejected: map[string]map[string]*Rejection{}}
	for _, k := range Kinds {
		s.good[k], s.rejected[k] = map[string]Entry{}, map[string]*Rejection{}
	}
	return s
}

// Update reports what one Apply changed.
type Update struct {
	Changed  []string     // services whose Policy changed, sorted
	Rejected []*Rejection // rejections new in this Apply (a version not rejected before)
}

// Apply replaces kind's entries with entries, the complete list Consul
// returned. A good entry replaces its last version; a rejected one keeps
// the last good version (if any) and is listed in Rejections until it is
// fixed or deleted; an entry absent from the list is deleted, its service
// back to its defaults for that kind. Entries beyond MaxEntriesPerKind
// (in name order) are rejected. An entry of another kind is rejected.
func (s *Set) Apply(kind string, entries []api.ConfigEntry) Update {
	good, ok := s.good[kind]
	if !ok {
		return Update{}
	}
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b api.ConfigEntry) int { return cmp.Compare(name(a), name(b)) })
	seen := map[string]bool{}
	var up Update
	for i, ce := range entries {
		n := name(ce)
		if ce == nil || seen[n] {
			continue
		}
		seen[n] = true
		e, rej := Parse(ce)
		if rej == nil && e.Kind != kind {
			rej = &Rejection{Kind: e.Kind, Name: n, ModifyIndex: e.ModifyIndex, Field: "Kind", Reason: ReasonBadKind, Detail: "listed as " + kind}
		}
		if rej == nil && i >= MaxEntriesPerKind {
			rej = &Rejection{Kind: kind, Name: n, ModifyIndex: e.ModifyIndex, Field: "Name", Reason: ReasonTooMany, Detail: "beyond MaxEntriesPerKind"}
		}
		if rej != nil {
			if old := s.rejected[kind][n]; old == nil || *old != *rej {
				up.Rejected = append(up.Rejected, rej)
			}
			s.rejected[kind][n] = rej
			continue
		}
		delete(s.rejected[kind], n)
		if old, had := good[n]; !had || old.ModifyIndex != e.ModifyIndex {
			good[n] = e
			up.Changed = append(up.Changed, n)
		}
	}
	for n := range good {
		if !seen[n] {
			delete(good, n)
			up.Changed = append(up.Changed, n)
		}
	}
	for n := range s.rejected[kind] {
		if !seen[n] {
			delete(s.rejected[kind], n)
		}
	}
	slices.Sort(up.Changed)
	return up
}

// name is ce's name ("" for nil).
func name(ce api.ConfigEntry) string {
	if ce == nil {
		return ""
	}
	return ce.GetName()
}

// Policy returns service's effective policy from the entries in use.
func (s *Set) Policy(service string) Policy {
	p := Policy{Service: service}
	for _, k := range Kinds {
		e, ok := s.good[k][service]
		if !ok {
			continue
		}
		p.Entries = append(p.Entries, e.Ref())
		switch k {
		case KindDefaults:
			p.Protocol = e.Protocol
		case KindResolver:
			p.Resolver = e.Resolver
		case KindSplitter:
			p.Splits = e.Splits
		case KindRouter:
			p.Routes = e.Routes
		}
	}
	return p
}

// Services lists the services with at least one entry in use, sorted.
func (s *Set) Services() []string {
	names := map[string]bool{}
	for _, byName := range s.good {
		for n := range byName {
			names[n] = true
		}
	}
	return slices.Sorted(maps.Keys(names))
}

// Rejections lists the current rejections, by kind (Kinds order) and name:
// what a validate-like caller or the console shows.
func (s *Set) Rejections() []Rejection {
	var out []Rejection
	for _, k := range Kinds {
		for _, n := range slices.Sorted(maps.Keys(s.rejected[k])) {
			out = append(out, *s.rejected[k][n])
		}
	}
	return out
}

// Counts returns the number of entries in use per kind.
func (s *Set) Counts() map[string]int {
	out := map[string]int{}
	for k, byName := range s.good {
		out[k] = len(byName)
	}
	return out
}
