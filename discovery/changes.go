package discovery

import (
	"maps"
	"slices"
	"strings"
)

// ServiceChange is what one update changed in a service, in counts: the
// aggregate that is logged, one line per service per update, however many
// endpoints flapped.
type ServiceChange struct {
	Service   string
	Endpoints int // endpoints after the update
	Added     int // endpoints that appeared
	Removed   int // endpoints that disappeared
	// Health is the change of the number of endpoints in each state,
	// indexed by Health (added and removed endpoints included).
	Health [len(healthNames)]int
	// Drained and Undrained count, per drain source, the endpoints that
	// gained or lost that source.
	Drained, Undrained map[string]int
	// Discovery counts the endpoints added, removed, or whose health
	// changed with no change of drain source: the discovery source's doing
	// (Consul checks and catalog, the static file).
	Discovery int
}

// Changes compares two snapshots and returns, sorted by service name, the
// services whose endpoints were added, removed, changed health or drain
// sources. A service that appears or disappears counts all its endpoints
// as added or removed. Pure; O(endpoints) over both snapshots (both sorted
// as Sources emit them).
func Changes(prev, next Snapshot) []ServiceChange {
	var out []ServiceChange
	i, j := 0, 0
	for i < len(prev.Services) || j < len(next.Services) {
		var a, b Service
		switch {
		case j == len(next.Services) || (i < len(prev.Services) && prev.Services[i].Name < next.Services[j].Name):
			a, b = prev.Services[i], Service{Name: prev.Services[i].Name}
			i++
		case i == len(prev.Services) || next.Services[j].Name < prev.Services[i].Name:
			a, b = Service{Name: next.Services[j].Name}, next.Services[j]
			j++
		default:
			a, b = prev.Services[i], next.Services[j]
			i, j = i+1, j+1
		}
		if c, changed := serviceChange(a, b); changed {
			out = append(out, c)
		}
	}
	return out
}

// serviceChange compares two versions of one service, both sorted by id.
func serviceChange(a, b Service) (ServiceChange, bool) {
	c := ServiceChange{Service: b.Name, Endpoints: len(b.Endpoints)}
	if c.Service == "" {
		c.Service = a.Name
	}
	i, j := 0, 0
	for i < len(a.Endpoints) || j < len(b.Endpoints) {
		switch {
		case j == len(b.Endpoints) || (i < len(a.Endpoints) && a.Endpoints[i].ID < b.Endpoints[j].ID):
			c.gone(a.Endpoints[i])
			i++
		case i == len(a.Endpoints) || b.Endpoints[j].ID < a.Endpoints[i].ID:
			c.came(b.Endpoints[j])
			j++
		default:
			c.moved(a.Endpoints[i], b.Endpoints[j])
			i, j = i+1, j+1
		}
	}
	changed := c.Added+c.Removed+c.Discovery > 0 || len(c.Drained)+len(c.Undrained) > 0
	return c, changed
}

func (c *ServiceChange) came(e Endpoint) {
	c.Added++
	c.Discovery++
	c.count(e.Health, 1)
	c.drain(&c.Drained, e.Drain, "")
}

func (c *ServiceChange) gone(e Endpoint) {
	c.Removed++
	c.Discovery++
	c.count(e.Health, -1)
	c.drain(&c.Undrained, e.Drain, "")
}

func (c *ServiceChange) moved(a, b Endpoint) {
	if a.Health == b.Health && a.Drain == b.Drain {
		return
	}
	c.count(a.Health, -1)
	c.count(b.Health, 1)
	if a.Drain == b.Drain {
		c.Discovery++
		return
	}
	c.drain(&c.Drained, b.Drain, a.Drain)
	c.drain(&c.Undrained, a.Drain, b.Drain)
}

func (c *ServiceChange) count(h Health, d int) {
	if h >= 0 && int(h) < len(c.Health) {
		c.Health[h] += d
	}
}

// drain counts in *m the sources in now (comma separated) missing from before.
func (c *ServiceChange) drain(m *map[string]int, now, before string) {
	if now == "" {
		return
	}
	for src := range strings.SplitSeq(now, ",") {
		if hasSource(before, src) {
			continue
		}
		if *m == nil {
			*m = map[string]int{}
		}
		(*m)[src]++
	}
}

// hasSource reports whether the comma-separated list has src.
func hasSource(list, src string) bool {
	for s := range strings.SplitSeq(list, ",") {
		if s == src {
			return true
		}
	}
	return false
}

// Sources lists, sorted, what caused the change: the drain sources set or
// cleared, and discovery (its name given) when it added, removed or
// re-checked endpoints.
func (c ServiceChange) Sources(discovery string) []string {
	set := map[string]bool{}
	for s := range c.Drained {
		set[s] = true
	}
	for s := range c.Undrained {
		set[s] = true
	}
	if c.Discovery > 0 {
		set[discovery] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// HealthCounts counts the endpoints of s in each state, indexed by Health.
func HealthCounts(s Snapshot) [len(healthNames)]int {
	var n [len(healthNames)]int
	for _, svc := range s.Services {
		for _, e := range svc.Endpoints {
			if e.Health >= 0 && int(e.Health) < len(n) {
				n[e.Health]++
			}
		}
	}
	return n
}
