package pause

import (
	"context"
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for name, tc := range map[string]struct {
		ctx  context.Context
		d    time.Duration
		want bool
	}{
		"waits the duration":            {live, time.Millisecond, true},
		"zero does not wait":            {live, 0, true},
		"negative does not wait":        {live, -time.Second, true},
		"a done context ends it":        {done, time.Hour, false},
		"a done context, zero duration": {done, 0, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := For(tc.ctx, tc.d); got != tc.want {
				t.Errorf("For(%v) = %v, want %v", tc.d, got, tc.want)
			}
		})
	}
}

func TestForReturnsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan bool)
	go func() { got <- For(ctx, time.Hour) }()
	cancel()
	if <-got {
		t.Error("For returned true after cancel, want false")
	}
}

// TestEvery: f runs on every tick until ctx is done, and Every returns then.
func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func() {
			if calls++; calls == 3 {
				cancel()
			}
		})
	}()
	<-done
	if calls != 3 {
		t.Fatalf("f ran %d times, want 3 (the third cancelled)", calls)
	}
}
