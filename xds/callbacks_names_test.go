package xds

import (
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
)

// TestNamesCheckReadsTheSnapshotOnlyForNames: a request naming nothing
// but the wildcard (an ACK, most requests) does not look the node's
// snapshot up; one naming a resource does.
func TestNamesCheckReadsTheSnapshotOnlyForNames(t *testing.T) {
	snap := &cache.Snapshot{}
	lookups := 0
	c := &callbacks{snapshot: func(string) *cache.Snapshot { lookups++; return snap }}
	for _, tc := range []struct {
		names []string
		want  *cache.Snapshot
	}{{nil, nil}, {[]string{"*"}, nil}, {[]string{"*", "svc-1"}, snap}, {[]string{"svc-1"}, snap}} {
		before := lookups
		if got := c.snapshotIfNamed("n", tc.names); got != tc.want || (lookups > before) != (tc.want != nil) {
			t.Errorf("%v: snapshot %p after %d lookups, want %p", tc.names, got, lookups-before, tc.want)
		}
	}
}
