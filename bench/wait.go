package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Want is the EDS health an endpoint must have.
type Want struct {
	Key    Key
	Status corev3.HealthStatus
}

// Wait is a change every node of a fleet must receive: the first EDS
// response after Start in which all of Wants hold is that node's arrival.
type Wait struct {
	wants []Want
	start time.Time
	lat   []atomic.Int64 // per node: arrival - start in ns; 0 while waiting
	left  atomic.Int64
	done  chan struct{}
	eds   atomic.Int64 // EDS responses received by all nodes while installed
}

// satisfied reports whether a node whose view of service s is view(s) has
// received every wanted state.
func (w *Wait) satisfied(view func(service string) cla) bool {
	for _, want := range w.wants {
		c := view(want.Key.Service)
		if c == nil {
			return false
		}
		if st, ok := c[want.Key.Addr]; !ok || st != want.Status {
			return false
		}
	}
	return true
}

// arrive records node i's arrival at now (once per node).
func (w *Wait) arrive(i int, now time.Time) {
	d := max(now.Sub(w.start), 1)
	if !w.lat[i].CompareAndSwap(0, int64(d)) {
		return
	}
	if w.left.Add(-1) == 0 {
		close(w.done)
	}
}

// Done is closed once every node has arrived.
func (w *Wait) Done() <-chan struct{} { return w.done }

// Latencies returns the arrival latencies of the nodes that arrived.
func (w *Wait) Latencies() []time.Duration {
	out := make([]time.Duration, 0, len(w.lat))
	for i := range w.lat {
		if d := w.lat[i].Load(); d > 0 {
			out = append(out, time.Duration(d))
		}
	}
	return out
}

// Missing is the number of nodes that have not arrived yet.
func (w *Wait) Missing() int { return int(w.left.Load()) }

// EDSResponses is how many EDS responses the fleet received while w was installed.
func (w *Wait) EDSResponses() int64 { return w.eds.Load() }

// Await blocks until every node arrived, the fleet failed, or the timeout.
func (f *Fleet) Await(ctx context.Context, w *Wait, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-w.done:
		return nil
	case <-f.failed:
		return f.Err()
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("bench: %d of %d nodes did not receive the change within %v", w.Missing(), len(w.lat), timeout)
	}
}
