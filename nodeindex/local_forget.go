package nodeindex

import "context"

// Forget frees the index node reserves in group at once, if it only
// reserves it (a node that holds its index keeps it). The server forgets
// a node this way when it evicts it to make room for another
// (xds.max_known_nodes): a flood of fresh node ids then leaves no
// reservation behind, where each would have stayed for the TTL.
func (t *Local) Forget(_ context.Context, group, node string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.groups[group]
	if g == nil {
		return
	}
	if i, ok := g.byNode[node]; ok && !g.slots[i].held {
		delete(g.byNode, node)
		g.slots[i] = slot{}
	}
}

// Reserved counts the indices held or reserved, over all groups.
func (t *Local) Reserved() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, g := range t.groups {
		n += len(g.byNode)
	}
	return n
}
