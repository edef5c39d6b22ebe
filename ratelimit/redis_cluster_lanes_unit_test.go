package ratelimit

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// A call whose master's lane is full waits for room, by its own
// goroutine, until its deadline, its context's end or the store's close,
// and then fails; room made in time lets it in.
func TestLaneFullWaits(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(b *batcher, l *lane, cancel context.CancelFunc)
		want error // nil: queued
	}{
		{"room", func(_ *batcher, l *lane, _ context.CancelFunc) { <-l.parts }, nil},
		{"deadline", func(*batcher, *lane, context.CancelFunc) { time.Sleep(time.Second) }, errQueueTimeout},
		{"context", func(_ *batcher, _ *lane, cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"close", func(b *batcher, _ *lane, _ context.CancelFunc) { close(b.stop) }, errStoreClosed},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := &batcher{stop: make(chan struct{}), timeout: 250 * time.Millisecond}
				l := &lane{parts: make(chan lanePart, 1)} // no runs: a master that does not answer
				b.lanes.m.Store("m", l)
				l.parts <- lanePart{call: &redisCall{}}
				call := &redisCall{keys: []string{"k"}, deadline: monoNow() + int64(b.timeout), done: make(chan redisReply, 1)}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				queued := make(chan struct{})
				go func() {
					b.queue(ctx, "m", lanePart{call: call})
					close(queued)
				}()
				synctest.Wait() // the call waits for room
				select {
				case <-queued:
					t.Fatal("queue returned with the lane full")
				default:
				}
				c.end(b, l, cancel)
				<-queued
				if c.want == nil {
					if p := <-l.parts; p.call != call {
						t.Fatal("the lane got another part")
					}
					return
				}
				if r := <-call.done; !errors.Is(r.err, c.want) {
					t.Errorf("reply %v, want %v", r.err, c.want)
				}
			})
		})
	}
}
