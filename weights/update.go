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
		t.smooth(e, m, now.Sub(e.validSince) < t.cfg.BlackoutPeriod)
		t.guardStep(e, m.util, now)
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

// smooth takes one EWMA step toward the measurement m (usable). In
// blackout it starts the average over at m: a first measurement far off
// (an example backend's first ORCA report, 28 requests/s at utilization
// 0.000017: a capacity of 1.6 million requests/s for 170) would otherwise
// still weigh 10 times too much when the blackout ends, as the average
// only halves its excess per report (smoothing 0.5); the blackout is the
// time to forget it.
func (t *Tracker) smooth(e *endpoint, m measurement, blackout bool) {
	if e.smoothed == 0 || blackout {
		e.smoothed, e.capacity = m.weight, m.capacity
		return
	}
	a := t.cfg.Smoothing
	e.smoothed += a * (m.weight - e.smoothed)
	e.capacity += a * (m.capacity - e.capacity)
}

// guardStep feeds the overload guard one usable measurement of
// utilization u at now. The guard moves at most once per OverloadPeriod,
// on the mean m of the utilizations measured over it (one reading per
// Update with a new report), never on one reading:
//
//	m >  OverloadThreshold:                    guard *= clamp(target/m, OverloadFactor, 1)  (OverloadFactor if m >= 1)
//	OverloadRecover <= m <= OverloadThreshold: guard unchanged
//	m <  OverloadRecover:                      guard *= clamp(target/m, 1, 1/OverloadFactor)
//
// within [1/MaxRatio, 1], with target the middle of the two marks: each
// move is proportional to the distance from the band between them, so a
// mean just past a mark moves the guard by little, and one move aims the
// utilization back into the band. A saturated endpoint (m >= 1) cannot
// show by how much, so it takes the full OverloadFactor. Between the marks
// the endpoint keeps the reason of its last move: overloaded after a cut,
// recovering after a gain.
func (t *Tracker) guardStep(e *endpoint, u float64, now time.Time) {
	if e.guardN == 0 && e.guardFrom.IsZero() {
		e.guardFrom = now // the first window opens at the first reading
	}
	e.guardSum += u
	e.guardN++
	if now.Sub(e.guardFrom) < t.cfg.OverloadPeriod {
		return
	}
	m := e.guardSum / float64(e.guardN)
	e.guardFrom, e.guardSum, e.guardN = now, 0, 0
	e.guard, e.zone = guardMove(t.cfg, e.guard, e.zone, m)
}

// guardMove is one move of the guard g (zone z) on the mean utilization m
// of a period; see guardStep.
func guardMove(c Config, g float64, z zone, m float64) (float64, zone) {
	target := (c.OverloadThreshold + c.OverloadRecover) / 2
	switch {
	case m > c.OverloadThreshold:
		f := max(target/m, c.OverloadFactor)
		if m >= 1 {
			f = c.OverloadFactor
		}
		return max(g*min(f, 1), 1/c.MaxRatio), zoneShed
	case m >= c.OverloadRecover:
		return g, z // between the marks: hysteresis
	}
	g = min(g*min(target/m, 1/c.OverloadFactor), 1)
	if g > 1-1e-9 {
		g = 1 // no rounding residue once fully recovered
	}
	return g, zoneGain
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
