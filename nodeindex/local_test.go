package nodeindex

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// fakeClock is a settable clock for tables.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestLocalIndex(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	tab := NewLocal(time.Minute, clock.now)
	acquire := func(group, node string) int {
		t.Helper()
		i, err := tab.Acquire(ctx, group, node)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	for want, node := range []string{"a", "b", "c"} {
		if got := acquire("g", node); got != want {
			t.Errorf("%s: index %d, want %d (lowest free)", node, got, want)
		}
	}
	if got := acquire("other", "x"); got != 0 {
		t.Errorf("groups are independent: x got %d, want 0", got)
	}
	if got := acquire("g", "a"); got != 0 {
		t.Errorf("a again while held: %d, want 0", got)
	}
	_ = tab.Release(ctx, "g", "b")
	clock.advance(30 * time.Second)
	if got := acquire("g", "d"); got != 3 {
		t.Errorf("d while b's index is reserved: %d, want 3", got)
	}
	if got := acquire("g", "b"); got != 1 {
		t.Errorf("b reconnecting within the TTL: %d, want its old 1", got)
	}
	_ = tab.Release(ctx, "g", "b")
	clock.advance(time.Minute)
	if got := acquire("g", "e"); got != 1 {
		t.Errorf("e after b's reservation expired: %d, want the freed 1", got)
	}
	if got := acquire("g", "b"); got != 4 {
		t.Errorf("b after its reservation went to e: %d, want 4", got)
	}
	if err := tab.Release(ctx, "nope", "zz"); err != nil {
		t.Errorf("releasing an unknown node: %v", err)
	}
	if _, err := tab.Acquire(ctx, "g", ""); err == nil {
		t.Error("empty node id: want an error")
	}
}

// TestSweepDeletesExpiredGroups: groups nobody joins again are emptied and
// deleted once their reservations expire; held and still-reserved indices
// stay where they are.
func TestSweepDeletesExpiredGroups(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	tab := NewLocal(time.Minute, clock.now)
	for i := range 100 {
		g := fmt.Sprintf("cluster-%d", i)
		if _, err := tab.Acquire(ctx, g, "node-"+g); err != nil {
			t.Fatal(err)
		}
		_ = tab.Release(ctx, g, "node-"+g)
	}
	for _, n := range []string{"a", "b", "c"} {
		if _, err := tab.Acquire(ctx, "kept", n); err != nil {
			t.Fatal(err)
		}
	}
	_ = tab.Release(ctx, "kept", "c") // the last index, released: trimmed once expired
	if got := tab.Sweep(); got != 0 {
		t.Errorf("sweep within the TTL freed %d, want 0", got)
	}
	clock.advance(time.Minute)
	_ = tab.Release(ctx, "kept", "a") // reserved anew: stays
	if got := tab.Sweep(); got != 101 {
		t.Errorf("sweep freed %d, want 101", got)
	}
	if got := tab.Groups(); got != 1 {
		t.Errorf("%d groups left, want 1 (kept)", got)
	}
	for node, want := range map[string]int{"a": 0, "b": 1, "d": 2} {
		if got, _ := tab.Acquire(ctx, "kept", node); got != want {
			t.Errorf("%s: index %d, want %d", node, got, want)
		}
	}
}
