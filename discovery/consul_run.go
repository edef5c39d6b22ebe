package discovery

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// consulEvent is what a blocking loop reports to the coordinator: a result
// (names for the catalog loop, endpoints for a health loop) or an error.
type consulEvent struct {
	service   string     // "" for the catalog loop
	gen       uint64     // generation of the health loop; stale ones are ignored
	names     []string   // catalog: the services to watch, sorted
	endpoints []Endpoint // health: raw endpoints of the service
	err       error      // the query failed (already logged by the loop)
}

// serviceWatch is the coordinator's view of one watched service.
type serviceWatch struct {
	gen       uint64
	cancel    context.CancelFunc
	read      bool       // a result has arrived since the watch started
	endpoints []Endpoint // normalized
}

// consulRun is the state of one Run: it owns the watches and the emitted
// snapshots, and runs in Run's goroutine only.
type consulRun struct {
	*Consul
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	emit   func(Snapshot)
	events chan consulEvent

	catalogRead bool
	watches     map[string]*serviceWatch
	gen         uint64          // last generation handed out
	failing     map[string]bool // loops whose last query failed, by service ("" = catalog)

	dirty    bool      // something arrived since the last snapshot was built
	emitted  bool      // a snapshot was emitted
	last     Snapshot  // the last snapshot emitted
	lastEmit time.Time // when it was emitted
	timer    *time.Timer
	timerC   <-chan time.Time // non-nil while an emit is scheduled
}

func newConsulRun(ctx context.Context, c *Consul, emit func(Snapshot)) *consulRun {
	ctx, cancel := context.WithCancel(ctx)
	return &consulRun{
		Consul:  c,
		ctx:     ctx,
		cancel:  cancel,
		emit:    emit,
		events:  make(chan consulEvent),
		watches: map[string]*serviceWatch{},
		failing: map[string]bool{},
	}
}

// stop cancels every loop and waits for them.
func (r *consulRun) stop() {
	r.cancel()
	if r.timer != nil {
		r.timer.Stop()
	}
	r.wg.Wait()
}

// loop applies events and emits snapshots until the context is done.
func (r *consulRun) loop() {
	for {
		select {
		case <-r.ctx.Done():
			return
		case ev := <-r.events:
			r.apply(ev)
		case <-r.timerC:
			r.timer, r.timerC = nil, nil
		}
		r.maybeEmit()
	}
}

// apply records one event.
func (r *consulRun) apply(ev consulEvent) {
	var w *serviceWatch
	if ev.service != "" {
		w = r.watches[ev.service]
		if w == nil || w.gen != ev.gen {
			return // from a watch already stopped
		}
	}
	if ev.err != nil {
		r.failing[ev.service] = true
		r.cfg.Metrics.failed(consulSource)
		return
	}
	r.recovered(ev.service)
	r.dirty = true
	if w == nil {
		r.catalogRead = true
		r.setServices(ev.names)
		return
	}
	snap, problems := Normalize([]Service{{Name: ev.service, Endpoints: ev.endpoints}})
	for _, p := range problems {
		r.log.Warn("consul entry skipped", "service", p.Service, "endpoint", p.Endpoint, "reason", p.Reason, "detail", p.Detail)
	}
	r.cfg.Metrics.skipped(consulSource, problems)
	w.read = true
	w.endpoints = nil
	if len(snap.Services) == 1 {
		w.endpoints = snap.Services[0].Endpoints
	}
}

// recovered marks the loop of service as answering again; the source stops
// being stale once no loop is failing.
func (r *consulRun) recovered(service string) {
	delete(r.failing, service)
	m := r.cfg.Metrics
	if m == nil {
		return
	}
	unix := float64(r.cfg.Now().UnixNano()) / 1e9
	if len(r.failing) == 0 {
		m.succeeded(consulSource, unix)
		return
	}
	m.LastUpdate.WithLabelValues(consulSource).Set(unix)
}

// setServices starts a health loop for each new name and stops the loops of
// the services no longer listed.
func (r *consulRun) setServices(names []string) {
	for name, w := range r.watches {
		if !slices.Contains(names, name) {
			w.cancel()
			delete(r.watches, name)
			delete(r.failing, name)
			r.log.Info("consul service removed", "service", name)
		}
	}
	for _, name := range names {
		if _, ok := r.watches[name]; ok {
			continue
		}
		r.gen++
		ctx, cancel := context.WithCancel(r.ctx)
		w := &serviceWatch{gen: r.gen, cancel: cancel}
		r.watches[name] = w
		r.wg.Go(func() { r.watchService(ctx, name, w.gen, r.events) })
		r.log.Info("consul service watched", "service", name)
	}
}

// ready reports whether a snapshot may be emitted: after the first one,
// whenever the catalog loop is answering (while Consul is unreachable or
// restarting, a service's loop may answer before the catalog's, with a
// view of a half-restored agent: it waits for the catalog); before, once
// the catalog and every watched service were read.
func (r *consulRun) ready() bool {
	if r.emitted {
		return !r.failing[""]
	}
	if !r.catalogRead {
		return false
	}
	for _, w := range r.watches {
		if !w.read {
			return false
		}
	}
	return true
}

// maybeEmit emits a snapshot if something arrived, the first round is
// complete and the last emit is at least MinInterval ago; if it is more
// recent, it schedules the emit for later.
func (r *consulRun) maybeEmit() {
	if !r.dirty || !r.ready() || r.timerC != nil {
		return
	}
	if wait := r.cfg.MinInterval - time.Since(r.lastEmit); r.emitted && wait > 0 {
		r.timer = time.NewTimer(wait)
		r.timerC = r.timer.C
		return
	}
	r.dirty = false
	snap := r.snapshot()
	if r.emitted && snap.Equal(r.last) {
		return
	}
	r.cfg.Metrics.emitted(consulSource)
	r.emit(snap)
	r.last, r.emitted, r.lastEmit = snap, true, time.Now()
}

// snapshot assembles the services read so far, sorted by name. Their
// endpoints were normalized on arrival; the slices are shared with earlier
// snapshots and never modified.
func (r *consulRun) snapshot() Snapshot {
	svcs := make([]Service, 0, len(r.watches))
	for name, w := range r.watches {
		if w.read {
			svcs = append(svcs, Service{Name: name, Endpoints: w.endpoints})
		}
	}
	slices.SortFunc(svcs, func(a, b Service) int { return strings.Compare(a.Name, b.Name) })
	return Snapshot{Services: svcs}
}
