package nodeindex

import "context"

// Table assigns dense, sticky client indices within a group: a new
// node takes the lowest free index of its group; a node that disconnects
// keeps its index reserved for a TTL, so a restart gets it back.
// Implementations are safe for concurrent use.
type Table interface {
	// Acquire returns node's index in group: the one it holds or reserves,
	// else the lowest index nobody holds or reserves. index >= 0.
	Acquire(ctx context.Context, group, node string) (index int, err error)
	// Release marks node's index in group as reserved for the TTL from
	// now; after that the index is free. Releasing an unknown node is a no-op.
	Release(ctx context.Context, group, node string) error
}
