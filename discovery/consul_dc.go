package discovery

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// LocalDatacenterLabel is the datacenter label of the metrics (and the
// logs) for the agent's own datacenter when none is configured
// (discovery.consul.datacenter and discovery.consul.datacenters unset).
const LocalDatacenterLabel = "local"

// consulDC is the coordinator's view of one datacenter of a Run. Its
// services are read, and its staleness followed, apart from the others'.
type consulDC struct {
	name   string       // as configured; "" is the agent's own
	label  string       // name, or LocalDatacenterLabel: of the metrics and logs
	prefix string       // of its endpoint ids: "" for the local (first) datacenter, else "<name>/"
	log    *slog.Logger // with the datacenter attribute when several are read

	catalogRead bool
	watches     map[string]*serviceWatch
	failing     map[string]bool // loops whose last query failed, by service ("" = catalog)
	staleSince  time.Time       // when the first loop of the current outage failed; zero while none fails
	// shown is what the snapshots show of it: its services read, as of the
	// last snapshot built while its catalog loop answered (while that loop
	// fails, a service loop may answer from a half-restored agent).
	shown map[string][]Endpoint
}

// newConsulDCs makes the state of each datacenter of names (the first is
// the local one); the logs name the datacenter when there are several.
func newConsulDCs(names []string, log *slog.Logger) []*consulDC {
	dcs := make([]*consulDC, len(names))
	for i, name := range names {
		d := &consulDC{name: name, label: cmp.Or(name, LocalDatacenterLabel), log: log,
			watches: map[string]*serviceWatch{}, failing: map[string]bool{}}
		if i > 0 {
			d.prefix = name + "/"
		}
		if len(names) > 1 {
			d.log = log.With("datacenter", d.label)
		}
		dcs[i] = d
	}
	return dcs
}

// read reports whether the catalog and every watched service of d were
// read once.
func (d *consulDC) read() bool {
	if !d.catalogRead {
		return false
	}
	for _, w := range d.watches {
		if !w.read {
			return false
		}
	}
	return true
}

// stale reports whether a loop of d is failing.
func (d *consulDC) stale() bool { return len(d.failing) > 0 }

// view is what the next snapshot shows of d (see shown).
func (d *consulDC) view() map[string][]Endpoint {
	if d.failing[""] && d.shown != nil {
		return d.shown
	}
	d.shown = make(map[string][]Endpoint, len(d.watches))
	for name, w := range d.watches {
		if w.read {
			d.shown[name] = w.endpoints
		}
	}
	return d.shown
}

// endpoints counts the endpoints d shows.
func (d *consulDC) endpoints() int {
	n := 0
	for _, eps := range d.shown {
		n += len(eps)
	}
	return n
}

// withPrefix puts prefix before the id of every endpoint of eps (in place).
func withPrefix(eps []Endpoint, prefix string) []Endpoint {
	if prefix == "" {
		return eps
	}
	for i := range eps {
		eps[i].ID = prefix + eps[i].ID
	}
	return eps
}

// mergeDatacenters joins the services of each datacenter's view (the
// local one first; endpoint ids already unique across datacenters by
// their prefix) into services sorted by name, each with the union of its
// endpoints sorted by id. A service read from one datacenter keeps its
// slice. An endpoint whose id or address:port an earlier datacenter
// already has is left out and reported. Pure; views are not modified.
func mergeDatacenters(views []map[string][]Endpoint) ([]Service, []Problem) {
	names := map[string]bool{}
	for _, v := range views {
		for name := range v {
			names[name] = true
		}
	}
	out := make([]Service, 0, len(names))
	var problems []Problem
	for _, name := range slices.Sorted(maps.Keys(names)) {
		var lists [][]Endpoint
		for _, v := range views {
			if eps, ok := v[name]; ok {
				lists = append(lists, eps)
			}
		}
		if len(lists) == 1 {
			out = append(out, Service{Name: name, Endpoints: lists[0]})
			continue
		}
		eps, ps := unionEndpoints(name, lists)
		problems = append(problems, ps...)
		out = append(out, Service{Name: name, Endpoints: eps})
	}
	return out, problems
}

// unionEndpoints joins the endpoint lists of one service, earlier lists
// first, sorted by id; later duplicates of an id or address are reported.
func unionEndpoints(service string, lists [][]Endpoint) ([]Endpoint, []Problem) {
	var problems []Problem
	ids, addrs := map[string]bool{}, map[string]string{}
	var eps []Endpoint
	for _, list := range lists {
		for _, ep := range list {
			addr := net.JoinHostPort(ep.Address, strconv.Itoa(ep.Port))
			switch first, used := addrs[addr]; {
			case ids[ep.ID]:
				problems = append(problems, Problem{Service: service, Endpoint: ep.ID, Reason: ReasonDuplicateID,
					Detail: fmt.Sprintf("endpoint id of datacenter %q already read from an earlier datacenter; skipped", ep.Datacenter)})
			case used:
				problems = append(problems, Problem{Service: service, Endpoint: ep.ID, Reason: ReasonDuplicateAdr,
					Detail: fmt.Sprintf("address %s already used by endpoint %q of an earlier datacenter; skipped", addr, first)})
			default:
				ids[ep.ID], addrs[addr] = true, ep.ID
				eps = append(eps, ep)
			}
		}
	}
	slices.SortFunc(eps, func(a, b Endpoint) int { return strings.Compare(a.ID, b.ID) })
	if eps == nil {
		eps = []Endpoint{}
	}
	return eps, problems
}
