package weights

import (
	"cmp"
	"maps"
	"slices"
	"sync"
)

// LameDuckFunc receives an endpoint's lame-duck transitions: lameDuck is
// true from the ORCA report that first carried the lame-duck metric at 1
// or more, false from the first that no longer did (drain.Manager.SetORCA
// has this shape).
type LameDuckFunc func(service, endpoint string, lameDuck bool)

// lameDucks turns the LameDuck attribute of ORCA reports into transitions
// for its subscribers. Reports arrive on the ORCA streams' goroutines and
// are only recorded there (observe never waits); the pipeline's goroutine
// delivers the transitions (publish), so a subscriber may take as long as
// it needs, even wait for ORCA streams to stop, without a deadlock.
type lameDucks struct {
	kick chan struct{} // buffered(1): pending has news
	subs []LameDuckFunc

	mu      sync.Mutex
	state   map[[2]string]bool // {service, endpoint} -> lame duck, as last reported
	pending map[[2]string]bool // transitions not delivered yet, latest state
}

func newLameDucks() *lameDucks {
	return &lameDucks{kick: make(chan struct{}, 1), state: map[[2]string]bool{}, pending: map[[2]string]bool{}}
}

// observe records r's lame-duck state; a change is queued for publish.
func (l *lameDucks) observe(r Report) {
	k := [2]string{r.Service, r.Endpoint}
	l.mu.Lock()
	if l.state[k] == r.LameDuck {
		l.mu.Unlock()
		return
	}
	if r.LameDuck {
		l.state[k] = true
	} else {
		delete(l.state, k)
	}
	l.pending[k] = r.LameDuck
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// publish delivers the queued transitions to every subscriber, by service
// then endpoint; it reports how many there were.
func (l *lameDucks) publish() int {
	l.mu.Lock()
	pending := l.pending
	l.pending = map[[2]string]bool{}
	l.mu.Unlock()
	keys := slices.SortedFunc(maps.Keys(pending), func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	})
	for _, k := range keys {
		for _, f := range l.subs {
			f(k[0], k[1], pending[k])
		}
	}
	return len(keys)
}

// SubscribeLameDuck adds f to the receivers of lame-duck transitions
// (PipelineConfig.LameDuckMetric). Subscribe before Run: f is called on
// the pipeline's goroutine, one transition at a time, and may block.
func (p *Pipeline) SubscribeLameDuck(f LameDuckFunc) { p.lame.subs = append(p.lame.subs, f) }
