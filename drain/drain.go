package drain

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/xds-server/xds-server/discovery"
)

// Drain sources: why an endpoint is DRAINING (discovery.Endpoint.Drain).
const (
	SourceConsul       = discovery.DrainConsul // "consul_maintenance": Consul service or node maintenance mode (set by the Consul source)
	SourceStatic       = discovery.DrainStatic // "static": the static file says draining (set by the static source)
	SourceMeta         = "meta"                // the configured meta key is true
	SourceTag          = "tag"                 // the configured tag is present
	SourceAdmin        = "admin"               // the admin drain API
	SourceORCA         = "orca"                // the backend's ORCA report carries the lame-duck metric
	SourceDeregistered = "deregistered"        // it left discovery less than the drain window ago
)

// Sources lists every drain source, for metrics.
var Sources = []string{SourceConsul, SourceStatic, SourceMeta, SourceTag, SourceAdmin, SourceORCA, SourceDeregistered}

// Policy is what drains besides the admin API and ORCA: the window a
// departed endpoint stays DRAINING, and the meta key and tag that drain.
type Policy struct {
	// Window returns how long an endpoint that left discovery stays, as
	// DRAINING, before it is removed; 0 removes it at once. nil means 0.
	Window func(service string) time.Duration
	// MetaKey, if set, drains endpoints whose meta value at this key is
	// true ("true", "1", "yes" or "on", any case).
	MetaKey string
	// Tag, if set, drains endpoints with this tag.
	Tag string
}

// Target is what an admin drain applies to: one endpoint (Service and
// Endpoint), a whole service (Service only) or every endpoint on a
// discovery node (Node only).
type Target struct {
	Service  string `json:"service,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	Node     string `json:"node,omitempty"`
}

// Admin is a drain set through the admin API.
type Admin struct {
	Target
	Since time.Time `json:"since"`
	Until time.Time `json:"until,omitzero"` // zero: until deleted
}

// matches reports whether the drain covers endpoint ep of service.
func (t Target) matches(service string, ep discovery.Endpoint) bool {
	if t.Node != "" {
		return ep.Node == t.Node
	}
	return t.Service == service && (t.Endpoint == "" || t.Endpoint == ep.ID)
}

// departed is an endpoint that left discovery, kept until until.
type departed struct {
	ep    discovery.Endpoint
	until time.Time
}

// Overlay overlays the drain sources on discovery snapshots: Apply turns
// the endpoints any source drains DRAINING (with the reasons in Drain) and
// keeps departed endpoints DRAINING for the window. It holds state between
// calls (the previous snapshot, departed endpoints, admin and ORCA drains)
// but reads no clock and starts nothing; it is not safe for concurrent
// use.
type Overlay struct {
	cfg   Policy
	admin map[Target]Admin
	orca  map[[2]string]bool                       // {service, endpoint} -> lame duck
	prev  map[string]map[string]discovery.Endpoint // last registered endpoints per service
	gone  map[string]map[string]departed           // service -> endpoint id -> departed

	shared  map[[2]string]Departed // departures shared by the replicas (ReplaceDeparted)
	newGone []Departed             // departures first seen here, not Recorded yet
	back    []Departed             // shared departures that came back, not Recorded yet
	applied bool                   // Apply ran before
	start   time.Time              // the time of the first Apply

	refused    map[[2]string]time.Time // shared departures refused, with the removal time refused
	newRefused []Refused               // refusals not taken by Refusals yet
}

// NewOverlay returns an Overlay with no drains.
func NewOverlay(cfg Policy) *Overlay {
	return &Overlay{cfg: cfg, admin: map[Target]Admin{}, orca: map[[2]string]bool{},
		prev: map[string]map[string]discovery.Endpoint{}, gone: map[string]map[string]departed{},
		shared: map[[2]string]Departed{}, refused: map[[2]string]time.Time{}}
}

// SetAdmin adds or replaces an admin drain.
func (d *Overlay) SetAdmin(a Admin) { d.admin[a.Target] = a }

// DeleteAdmin removes an admin drain and reports whether there was one.
func (d *Overlay) DeleteAdmin(t Target) bool {
	_, ok := d.admin[t]
	delete(d.admin, t)
	return ok
}

// Admin returns the admin drains in force at now, sorted by target;
// expired ones are dropped.
func (d *Overlay) Admin(now time.Time) []Admin {
	out := make([]Admin, 0, len(d.admin))
	for t, a := range d.admin {
		if !a.Until.IsZero() && !now.Before(a.Until) {
			delete(d.admin, t)
			continue
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Admin) int {
		return strings.Compare(a.Service+"\x00"+a.Endpoint+"\x00"+a.Node, b.Service+"\x00"+b.Endpoint+"\x00"+b.Node)
	})
	return out
}

// SetORCA records whether an endpoint's ORCA reports say lame duck; it
// reports whether that changed anything.
func (d *Overlay) SetORCA(service, endpoint string, lameDuck bool) bool {
	k := [2]string{service, endpoint}
	if d.orca[k] == lameDuck {
		return false
	}
	if lameDuck {
		d.orca[k] = true
	} else {
		delete(d.orca, k)
	}
	return true
}

// Apply returns raw (a discovery snapshot) with the drains of now applied,
// and the next time at which Apply must run again for a timer to take
// effect (a departed endpoint's window or an admin drain's TTL ending);
// zero when none is pending.
func (d *Overlay) Apply(raw discovery.Snapshot, now time.Time) (discovery.Snapshot, time.Time) {
	admin := d.Admin(now)
	var next time.Time
	for _, a := range admin {
		next = earliest(next, a.Until)
	}
	out := discovery.Snapshot{Services: make([]discovery.Service, 0, len(raw.Services))}
	registered := make(map[string]map[string]discovery.Endpoint, len(raw.Services))
	for _, svc := range raw.Services {
		regs := make(map[string]discovery.Endpoint, len(svc.Endpoints))
		eps := make([]discovery.Endpoint, 0, len(svc.Endpoints))
		for _, ep := range svc.Endpoints {
			regs[ep.ID] = ep
			eps = append(eps, d.overlay(svc.Name, ep, admin))
		}
		registered[svc.Name] = regs
		out.Services = append(out.Services, discovery.Service{Name: svc.Name, Endpoints: eps})
	}
	d.depart(registered, now)
	d.adopt(registered, now, !d.applied)
	d.forget(registered, now)
	d.applied = true
	for name, gone := range d.gone {
		for _, g := range gone {
			next = earliest(next, g.until)
		}
		out.Services = withDeparted(out.Services, name, gone)
	}
	d.prev = registered
	slices.SortFunc(out.Services, func(a, b discovery.Service) int { return strings.Compare(a.Name, b.Name) })
	return out, next
}

// overlay applies the per-endpoint sources to a registered endpoint.
func (d *Overlay) overlay(service string, ep discovery.Endpoint, admin []Admin) discovery.Endpoint {
	var why []string
	if ep.Drain != "" {
		why = strings.Split(ep.Drain, ",")
	}
	if d.cfg.MetaKey != "" && truthy(ep.Meta[d.cfg.MetaKey]) {
		why = append(why, SourceMeta)
	}
	if d.cfg.Tag != "" && slices.Contains(ep.Tags, d.cfg.Tag) {
		why = append(why, SourceTag)
	}
	if slices.ContainsFunc(admin, func(a Admin) bool { return a.matches(service, ep) }) {
		why = append(why, SourceAdmin)
	}
	if d.orca[[2]string{service, ep.ID}] {
		why = append(why, SourceORCA)
	}
	return drained(ep, why)
}

// depart starts the window of the endpoints registered before and not
// now.
func (d *Overlay) depart(registered map[string]map[string]discovery.Endpoint, now time.Time) {
	for name, prev := range d.prev {
		for id, ep := range prev {
			if _, still := registered[name][id]; still {
				continue
			}
			w := time.Duration(0)
			if d.cfg.Window != nil {
				w = d.cfg.Window(name)
			}
			if w <= 0 {
				continue
			}
			if d.gone[name] == nil {
				d.gone[name] = map[string]departed{}
			}
			d.gone[name][id] = departed{ep: ep, until: now.Add(w)}
			if _, known := d.shared[[2]string{name, id}]; !known {
				d.newGone = append(d.newGone, Departed{Service: name, Endpoint: ep, Until: now.Add(w)})
			}
		}
	}
}

// forget drops the departed endpoints registered again or whose window
// ended.
func (d *Overlay) forget(registered map[string]map[string]discovery.Endpoint, now time.Time) {
	for name, gone := range d.gone {
		for id, g := range gone {
			if _, back := registered[name][id]; back || !now.Before(g.until) {
				delete(gone, id)
			}
		}
		if len(gone) == 0 {
			delete(d.gone, name)
		}
	}
}

// withDeparted adds the departed endpoints of service name, DRAINING, to
// services (adding the service if it left entirely).
func withDeparted(services []discovery.Service, name string, gone map[string]departed) []discovery.Service {
	i := slices.IndexFunc(services, func(s discovery.Service) bool { return s.Name == name })
	if i < 0 {
		services = append(services, discovery.Service{Name: name})
		i = len(services) - 1
	}
	eps := services[i].Endpoints
	for _, id := range slices.Sorted(maps.Keys(gone)) {
		ep := gone[id].ep
		why := []string{SourceDeregistered}
		if ep.Drain != "" {
			why = append(why, strings.Split(ep.Drain, ",")...)
		}
		eps = append(eps, drained(ep, why))
	}
	slices.SortFunc(eps, func(a, b discovery.Endpoint) int { return strings.Compare(a.ID, b.ID) })
	services[i].Endpoints = eps
	return services
}

// drained returns ep DRAINING for the reasons why, or ep as is if none.
func drained(ep discovery.Endpoint, why []string) discovery.Endpoint {
	if len(why) == 0 {
		return ep
	}
	slices.Sort(why)
	ep.Health, ep.Drain = discovery.HealthDraining, strings.Join(slices.Compact(why), ",")
	return ep
}

func truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes", "on":
		return true
	}
	return false
}

// earliest is the earlier of two times, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
