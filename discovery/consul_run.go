package discovery

import (
	"context"
	"slices"
	"sync"
	"time"
)

// consulEvent is what a blocking loop reports to the coordinator: a result
// (names for the catalog loop, endpoints for a health loop) or an error.
type consulEvent struct {
	dc        int        // index of the loop's datacenter in the run's list
	service   string     // "" for the catalog loop
	gen       uint64     // generation of the health loop; stale ones are ignored
	names     []string   // catalog: the services to watch, sorted
	endpoints []Endpoint // health: raw endpoints of the service
	err       error      // the query failed (already logged by the loop)
	read      Read       // when the query returned, and its index before and after
}

// serviceWatch is the coordinator's view of one watched service of one
// datacenter.
type serviceWatch struct {
	gen       uint64
	cancel    context.CancelFunc
	read      bool       // a result has arrived since the watch started
	endpoints []Endpoint // normalized, ids with the datacenter's prefix
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

	dcs      []*consulDC     // the datacenters read, the local one first
	gen      uint64          // last generation handed out
	reported map[string]bool // merge problems logged, by service and endpoint: logged once

	dirty    bool      // something arrived since the last snapshot was built
	read     Read      // the first result since the last snapshot was built; zero: none
	emitted  bool      // a snapshot was emitted
	last     Snapshot  // the last snapshot emitted
	lastEmit time.Time // when it was emitted
	timer    *time.Timer
	timerC   <-chan time.Time // non-nil while an emit is scheduled
}

func newConsulRun(ctx context.Context, c *Consul, emit func(Snapshot)) *consulRun {
	ctx, cancel := context.WithCancel(ctx)
	r := &consulRun{
		Consul:   c,
		ctx:      ctx,
		cancel:   cancel,
		emit:     emit,
		events:   make(chan consulEvent),
		dcs:      newConsulDCs(c.cfg.datacenters(), c.log),
		reported: map[string]bool{},
	}
	for _, d := range r.dcs {
		c.cfg.Metrics.dcStale(d.label, time.Time{})
	}
	return r
}

// start starts the catalog loop of every datacenter.
func (r *consulRun) start() {
	for i := range r.dcs {
		l := r.loop(i, consulKindCatalog, "")
		r.wg.Go(func() { r.watchCatalog(r.ctx, l, r.events) })
	}
}

// loop names the blocking loop of kind on service in datacenter i.
func (r *consulRun) loop(i int, kind, service string) consulLoop {
	d := r.dcs[i]
	return consulLoop{kind: kind, service: service, dc: i, datacenter: d.name, log: d.log}
}

// stop cancels every loop and waits for them.
func (r *consulRun) stop() {
	r.cancel()
	if r.timer != nil {
		r.timer.Stop()
	}
	r.wg.Wait()
}

// run applies events and emits snapshots until the context is done.
func (r *consulRun) run() {
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
	d := r.dcs[ev.dc]
	var w *serviceWatch
	if ev.service != "" {
		w = d.watches[ev.service]
		if w == nil || w.gen != ev.gen {
			return // from a watch already stopped
		}
	}
	if ev.err != nil {
		d.failing[ev.service] = true
		r.cfg.Metrics.failed(consulSource)
		r.cfg.Metrics.dcFailed(d.label)
		r.staleness(d)
		return
	}
	r.recovered(d, ev.service)
	r.dirty = true
	if r.read.At.IsZero() {
		r.read = ev.read
	}
	if w == nil {
		d.catalogRead = true
		r.setServices(ev.dc, ev.names)
		r.staleness(d)
		return
	}
	snap, problems := Normalize([]Service{{Name: ev.service, Endpoints: withPrefix(ev.endpoints, d.prefix)}})
	for _, p := range problems {
		d.log.Warn("consul entry skipped", "service", p.Service, "endpoint", p.Endpoint, "reason", p.Reason, "detail", p.Detail)
	}
	r.cfg.Metrics.skipped(consulSource, problems)
	w.read = true
	w.endpoints = nil
	if len(snap.Services) == 1 {
		w.endpoints = snap.Services[0].Endpoints
	}
}

// recovered marks the loop of service in d as answering again; the source
// stops being stale once no loop of any datacenter is failing.
func (r *consulRun) recovered(d *consulDC, service string) {
	delete(d.failing, service)
	r.staleness(d)
	m := r.cfg.Metrics
	if m == nil {
		return
	}
	unix := float64(r.cfg.Now().UnixNano()) / 1e9
	m.DCLastUpdate.WithLabelValues(d.label).Set(unix)
	if !slices.ContainsFunc(r.dcs, (*consulDC).stale) {
		m.succeeded(consulSource, unix)
		return
	}
	m.LastUpdate.WithLabelValues(consulSource).Set(unix)
}

// staleness follows d's stale state after its loops changed: the metrics
// and one log line on each transition.
func (r *consulRun) staleness(d *consulDC) {
	switch now := r.cfg.Now(); {
	case d.stale() && d.staleSince.IsZero():
		d.staleSince = now
		r.cfg.Metrics.dcStale(d.label, now)
		r.log.Warn("consul datacenter stale; keeping its last known endpoints", "datacenter", d.label,
			"endpoints", d.endpoints())
	case !d.stale() && !d.staleSince.IsZero():
		r.log.Info("consul datacenter recovered", "datacenter", d.label,
			"stale_for", now.Sub(d.staleSince).Round(time.Millisecond))
		d.staleSince = time.Time{}
		r.cfg.Metrics.dcStale(d.label, time.Time{})
	}
}

// setServices starts a health loop in datacenter i for each new name and
// stops the loops of the services no longer listed there.
func (r *consulRun) setServices(i int, names []string) {
	d := r.dcs[i]
	for name, w := range d.watches {
		if !slices.Contains(names, name) {
			w.cancel()
			delete(d.watches, name)
			delete(d.failing, name)
			d.log.Info("consul service removed", "service", name)
		}
	}
	for _, name := range names {
		if _, ok := d.watches[name]; ok {
			continue
		}
		r.gen++
		ctx, cancel := context.WithCancel(r.ctx)
		w := &serviceWatch{gen: r.gen, cancel: cancel}
		d.watches[name] = w
		l := r.loop(i, consulKindHealth, name)
		r.wg.Go(func() { r.watchService(ctx, l, w.gen, r.events) })
		d.log.Info("consul service watched", "service", name)
	}
}

// ready reports whether a snapshot may be emitted: after the first one,
// always (a datacenter whose catalog loop fails is shown as it was, see
// consulDC.shown); before, once the local datacenter's catalog answers and
// it and every other datacenter not failing were read whole (a datacenter
// failing at start joins the snapshots once it answers).
func (r *consulRun) ready() bool {
	if r.emitted {
		return true
	}
	local := r.dcs[0]
	if !local.read() || local.failing[""] {
		return false
	}
	for _, d := range r.dcs[1:] {
		if !d.read() && !d.stale() {
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
	read := r.read
	r.read = Read{}
	snap := r.snapshot()
	if r.emitted && snap.Equal(r.last) {
		return
	}
	r.cfg.Metrics.emitted(consulSource)
	if r.cfg.OnRead != nil && !read.At.IsZero() {
		read.Emitted = time.Now()
		r.cfg.OnRead(read)
	}
	r.emit(snap)
	r.last, r.emitted, r.lastEmit = snap, true, time.Now()
}

// snapshot assembles the services of every datacenter, sorted by name.
// Their endpoints were normalized on arrival; the slices of a service read
// from one datacenter are shared with earlier snapshots and never
// modified. Endpoints two datacenters share are logged once.
func (r *consulRun) snapshot() Snapshot {
	views := make([]map[string][]Endpoint, len(r.dcs))
	for i, d := range r.dcs {
		views[i] = d.view()
	}
	svcs, problems := mergeDatacenters(views)
	seen := make(map[string]bool, len(problems))
	for _, p := range problems {
		key := p.Service + "\x00" + p.Endpoint
		seen[key] = true
		if !r.reported[key] {
			r.log.Warn("consul entry skipped", "service", p.Service, "endpoint", p.Endpoint, "reason", p.Reason, "detail", p.Detail)
			r.cfg.Metrics.skipped(consulSource, []Problem{p})
		}
	}
	r.reported = seen
	return Snapshot{Services: svcs}
}
