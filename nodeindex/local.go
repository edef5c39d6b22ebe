package nodeindex

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Local is the in-process Table (subsetting.index_source: local).
type Local struct {
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex
	groups map[string]*indexGroup
}

// indexGroup is the table of one group.
type indexGroup struct {
	slots  []slot         // by index
	byNode map[string]int // node -> index
}

// slot is one index: who holds it (or last held it) and since when it is free.
type slot struct {
	node       string    // "" when never used or expired
	held       bool      // the node is connected
	releasedAt time.Time // when the node let go (valid when !held)
}

// NewLocal returns an empty table; ttl is how long a released index
// stays reserved for its node (0 frees it at once); now nil means time.Now.
func NewLocal(ttl time.Duration, now func() time.Time) *Local {
	if now == nil {
		now = time.Now
	}
	return &Local{ttl: ttl, now: now, groups: map[string]*indexGroup{}}
}

// Acquire implements Table.
func (t *Local) Acquire(_ context.Context, group, node string) (int, error) {
	if node == "" {
		return 0, fmt.Errorf("nodeindex: empty node id")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups[group]
	if g == nil {
		g = &indexGroup{byNode: map[string]int{}}
		t.groups[group] = g
	}
	now := t.now()
	if i, ok := g.byNode[node]; ok {
		g.slots[i].held = true
		return i, nil
	}
	for i := range g.slots {
		s := &g.slots[i]
		if s.node != "" && !s.held && now.Sub(s.releasedAt) >= t.ttl {
			delete(g.byNode, s.node) // reservation expired
			*s = slot{}
		}
		if s.node == "" {
			*s = slot{node: node, held: true}
			g.byNode[node] = i
			return i, nil
		}
	}
	g.slots = append(g.slots, slot{node: node, held: true})
	g.byNode[node] = len(g.slots) - 1
	return len(g.slots) - 1, nil
}

// Release implements Table.
func (t *Local) Release(_ context.Context, group, node string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups[group]
	if g == nil {
		return nil
	}
	if i, ok := g.byNode[node]; ok {
		g.slots[i].held, g.slots[i].releasedAt = false, t.now()
	}
	return nil
}

// Sweep frees every reservation older than the TTL, drops the free
// indices at the end of each group and deletes the groups left empty, so
// the table holds only what is held or still reserved. It returns the
// number of reservations freed. Acquire frees expired reservations of a
// group as it meets them; Sweep is what frees those of groups nobody
// joins any more.
func (t *Local) Sweep() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	now, freed := t.now(), 0
	for name, g := range t.groups {
		for i := range g.slots {
			s := &g.slots[i]
			if s.node != "" && !s.held && now.Sub(s.releasedAt) >= t.ttl {
				delete(g.byNode, s.node)
				*s = slot{}
				freed++
			}
		}
		end := len(g.slots)
		for end > 0 && g.slots[end-1].node == "" {
			end--
		}
		if end == 0 {
			delete(t.groups, name)
			continue
		}
		if end < len(g.slots) {
			g.slots = slices.Clip(g.slots[:end])
		}
	}
	return freed
}

// Groups returns the number of groups in the table.
func (t *Local) Groups() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.groups)
}
