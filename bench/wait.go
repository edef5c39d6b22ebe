package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Want is the EDS health an endpoint must have or, with Key.Addr empty,
// the least number of endpoints the node must see of Key.Service.
type Want struct {
	Key    Key
	Status corev3.HealthStatus
	Min    int // with Key.Addr empty: endpoints of the service in the view, any health
}

// all is the applicability mask of a node every Want applies to.
const all = ^uint64(0)

// Wait is a change every node of a fleet must receive: the first EDS
// response after Start in which all of Wants hold is that node's arrival.
type Wait struct {
	wants []Want
	start time.Time
	lat   []atomic.Int64 // per node: arrival - start in ns; 0 while waiting
	left  atomic.Int64
	done  chan struct{}
	eds   atomic.Int64 // EDS responses received by all nodes while installed
	// subsets: see FleetConfig.Subsets; apply[i] has bit k set if wants[k]
	// applies to node i (every bit past the 64th want is set).
	subsets bool
	apply   []uint64
}

// applicable is the mask of the wants that apply to a node whose view is
// view (Subsets): a count Want always, an endpoint Want if the endpoint is
// in the view.
func (w *Wait) applicable(view func(service string) cla) uint64 {
	mask := all
	if len(w.wants) < 64 {
		mask = 1<<len(w.wants) - 1
	}
	for k, want := range w.wants {
		if k >= 64 || want.Key.Addr == "" {
			continue
		}
		if _, ok := view(want.Key.Service)[want.Key.Addr]; !ok {
			mask &^= 1 << k
		}
	}
	return mask
}

// satisfiedBy reports whether node i, whose view of service s is view(s),
// has received every wanted state that applies to it.
func (w *Wait) satisfiedBy(i int, view func(service string) cla) bool {
	if !w.subsets {
		return w.satisfied(view)
	}
	for k, want := range w.wants {
		if k < 64 && w.apply[i]&(1<<k) == 0 {
			continue
		}
		c := view(want.Key.Service)
		if want.Key.Addr == "" {
			if len(c) < want.Min {
				return false
			}
			continue
		}
		st, ok := c[want.Key.Addr]
		if !ok && want.Status != corev3.HealthStatus_HEALTHY {
			continue // dropped from the view: a replacement that stopped serving
		}
		if !ok || st != want.Status {
			return false
		}
	}
	return true
}

// satisfied reports whether a node whose view of service s is view(s) has
// received every wanted state.
func (w *Wait) satisfied(view func(service string) cla) bool {
	for _, want := range w.wants {
		c := view(want.Key.Service)
		if c == nil {
			return false
		}
		if want.Key.Addr == "" {
			if len(c) < want.Min {
				return false
			}
			continue
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
	if !w.lat[i].CompareAndSwap(0, int64(d)) { // arrived before, or not sampled (-1)
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

// Sampled is the number of nodes the change applies to (every node
// unless the fleet has Subsets).
func (w *Wait) Sampled() int {
	n := 0
	for i := range w.lat {
		if w.lat[i].Load() >= 0 {
			n++
		}
	}
	return n
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
