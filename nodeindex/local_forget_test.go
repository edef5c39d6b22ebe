package nodeindex

import (
	"context"
	"testing"
	"time"
)

func TestForgetFreesAReservationAtOnce(t *testing.T) {
	ctx := context.Background()
	tab := NewLocal(time.Hour, nil)
	for _, n := range []string{"a", "b"} {
		if _, err := tab.Acquire(ctx, "g", n); err != nil {
			t.Fatal(err)
		}
	}
	_ = tab.Release(ctx, "g", "a")
	tab.Forget(ctx, "g", "a")
	tab.Forget(ctx, "g", "b") // held: kept
	tab.Forget(ctx, "other", "a")
	if got := tab.Reserved(); got != 1 {
		t.Errorf("%d indices reserved, want 1 (b holds its own)", got)
	}
	if i, _ := tab.Acquire(ctx, "g", "c"); i != 0 {
		t.Errorf("a new node got index %d, want a's 0, freed at once", i)
	}
}
