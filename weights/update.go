package weights

import (
	"maps"
	"slices"
	"time"
)

// zone is where the overload guard's last step found the utilization.
type zone uint8

const (
	zoneNone zone = iota // no step yet
	zoneShed             // above OverloadThreshold: cut
	zoneGain             // below OverloadRecover: regain
)

// Update computes the weight table at now and advances the smoothing and
// the overload guard of every endpoint that reported since the last Update
// (one step per Update, however many reports arrived). Stale client
// reports are dropped.
//
// Per service, in order:
//   - an endpoint whose last usable measurement is fresher than the
//     expiration period and whose streak of usable measurements is at
//     least the blackout period old has its own weight: the smoothed
//     formula times the overload guard (reason reported, overloaded or
//     recovering);
//   - the others (blackout, expired, incomplete, no_reports) get the mean
//     own weight of the service or, when no endpoint has its own, their
//     static weight from discovery;
//   - the float weights are scaled to integers by Scale with MaxRatio.
func (t *Tracker) Update(now time.Time) Table {
	t.mu.Lock()
	defer t.mu.Unlock()
	tab := Table{At: now, Services: make([]ServiceTable, 0, len(t.services))}
	for _, name := range slices.Sorted(maps.Keys(t.services)) {
		tab.Services = append(tab.Services, t.updateService(name, t.services[name], now))
	}
	return tab
}

func (t *Tracker) updateService(name string, s *service, now time.Time) ServiceTable {
	st := ServiceTable{Name: name, Rows: make([]Row, len(s.ids))}
	own, sum := 0, 0.0
	for i, id := range s.ids {
		st.Rows[i] = t.step(id, s.endpoints[id], now)
		if st.Rows[i].Reason.Own() {
			own++
			sum += st.Rows[i].Float
		}
	}
	if own > 0 {
		st.Mean = sum / float64(own)
	}
	floats := make([]float64, len(st.Rows))
	for i := range st.Rows {
		r := &st.Rows[i]
		switch {
		case r.Reason.Own():
		case own > 0:
			r.Float = st.Mean
		default:
			r.Float = float64(r.Static)
		}
		floats[i] = r.Float
	}
	ints := make([]uint32, len(floats))
	scaleInto(ints, floats, t.cfg.MaxRatio)
	for i := range st.Rows {
		st.Rows[i].Weight = ints[i]
	}
	return st
}

// step advances one endpoint to now and returns its row, with Float set
// only when the weight is its own.
func (t *Tracker) step(id string, e *endpoint, now time.Time) Row {
	for node, r := range e.nodes {
		if !t.fresh(r.At, now) {
			delete(e.nodes, node)
		}
	}
	if !t.fresh(e.backend.At, now) {
		e.backend = Report{}
	}
	m := t.measure(e, now)
	row := Row{
		Endpoint: id, Static: e.static, Guard: 1, LastReport: e.lastReport,
		Nodes: m.nodes, QPS: m.qps, EPS: m.eps, Utilization: m.util,
		Measured: m.weight, Named: e.backend.Named,
	}
	if !e.lastReport.IsZero() {
		row.Age = now.Sub(e.lastReport)
	}
	dirty := e.dirty
	e.dirty = false
	switch {
	case e.lastReport.IsZero():
		row.Reason = ReasonNoReports
		return row
	case e.lastValid.IsZero():
		row.Reason = ReasonIncomplete
		return row
	case !t.fresh(e.lastValid, now):
		e.restart(time.Time{})
		row.Reason = ReasonExpired
		return row
	}
	if dirty && m.ok {
		t.smooth(e, m)
		t.guardStep(e, m.util)
	}
	row.Capacity, row.Guard = e.capacity, e.guard
	switch {
	case e.smoothed == 0: // usable once, but not when an Update looked
		row.Reason = ReasonIncomplete
	case now.Sub(e.validSince) < t.cfg.BlackoutPeriod:
		row.Reason = ReasonBlackout
	default:
		row.Float = e.smoothed * e.guard
		row.Reason = guardReason(e)
	}
	return row
}

// smooth takes one EWMA step toward the measurement m (usable).
func (t *Tracker) smooth(e *endpoint, m measurement) {
	if e.smoothed == 0 {
		e.smoothed, e.capacity = m.weight, m.capacity
		return
	}
	a := t.cfg.Smoothing
	e.smoothed += a * (m.weight - e.smoothed)
	e.capacity += a * (m.capacity - e.capacity)
}

// guardStep is the overload guard's rule, one step per Update with a new
// usable measurement of utilization u:
//
//	u >  OverloadThreshold:                  guard = max(guard*OverloadFactor, 1/MaxRatio)
//	OverloadRecover <= u <= OverloadThreshold: guard unchanged
//	u <  OverloadRecover:                    guard = min(guard/OverloadFactor, 1)
//
// So a cut endpoint regains weight only once below the lower mark, and
// then as fast as it lost it. Between the marks the endpoint keeps the
// reason of its last move: overloaded after a cut, recovering after a gain.
func (t *Tracker) guardStep(e *endpoint, u float64) {
	switch {
	case u > t.cfg.OverloadThreshold:
		e.guard = max(e.guard*t.cfg.OverloadFactor, 1/t.cfg.MaxRatio)
		e.zone = zoneShed
	case u >= t.cfg.OverloadRecover:
		// between the marks: guard and zone unchanged (hysteresis)
	default:
		e.guard = min(e.guard/t.cfg.OverloadFactor, 1)
		if e.guard > 1-1e-9 {
			e.guard = 1 // no rounding residue once fully recovered
		}
		e.zone = zoneGain
	}
}

func guardReason(e *endpoint) Reason {
	switch {
	case e.guard >= 1:
		return ReasonReported
	case e.zone == zoneGain:
		return ReasonRecovering
	}
	return ReasonOverloaded
}
