package xds

import (
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// groupCount counts the known nodes of each subsetting group and bounds
// the number of groups. A node is known from its admission until it
// expires (forget). Safe for concurrent use.
type groupCount struct {
	max int // 0: no bound

	mu      sync.Mutex
	members map[string]int    // group -> known nodes in it
	of      map[string]string // node -> its group
	// counted, if set, is told the number of groups after each change,
	// under mu: two changes' counts cannot land in the wrong order.
	counted func(groups int)
}

func newGroupCount(max int) *groupCount {
	return &groupCount{max: max, members: map[string]int{}, of: map[string]string{}}
}

// changed tells counted the number of groups. Under g.mu.
func (g *groupCount) changed() {
	if g.counted != nil {
		g.counted(len(g.members))
	}
}

// admit puts node in group (moving it from the group it had), or returns
// a ResourceExhausted status if group is new and max groups exist.
func (g *groupCount) admit(node, group string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	old, known := g.of[node]
	if known && old == group {
		return nil
	}
	if g.members[group] == 0 && g.max > 0 && len(g.members) >= g.max {
		return status.Error(codes.ResourceExhausted,
			fmt.Sprintf("xds: %d subsetting groups exist (subsetting.max_groups); this node's group would be one more", g.max))
	}
	if known {
		g.leave(node, old)
	}
	g.of[node] = group
	g.members[group]++
	g.changed()
	return nil
}

// forget removes node from its group; a group left empty is deleted.
func (g *groupCount) forget(node string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if group, ok := g.of[node]; ok {
		g.leave(node, group)
		g.changed()
	}
}

func (g *groupCount) leave(node, group string) {
	delete(g.of, node)
	if g.members[group]--; g.members[group] <= 0 {
		delete(g.members, group)
	}
}
