package weights

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/xds-server/xds-server/discovery"
)

// Observe takes a discovery snapshot: the tracker learns each weighted
// service's endpoints (with their discovery weights as the fallback), the
// ORCA client its targets, the LRS server its address map.
func (p *Pipeline) Observe(s discovery.Snapshot) {
	var targets []ORCATarget
	seen := map[string]bool{}
	addrs := map[string]map[string]string{}
	sources := map[string]map[string]bool{}
	perSvc := map[string]bool{}
	all := make(map[string]bool, len(s.Services))
	for _, svc := range s.Services {
		all[svc.Name] = true
		set := p.cfg.Services(svc.Name)
		if !set.Enabled {
			continue
		}
		seen[svc.Name] = true
		perSvc[svc.Name] = set.Mode == ModePerNode
		eps := make([]Endpoint, 0, len(svc.Endpoints))
		addrs[svc.Name] = map[string]string{}
		sources[svc.Name] = map[string]bool{}
		for _, src := range set.Sources {
			sources[svc.Name][src] = true
		}
		for _, ep := range svc.Endpoints {
			eps = append(eps, Endpoint{ID: ep.ID, Static: ep.Weight})
			addrs[svc.Name][net.JoinHostPort(ep.Address, strconv.Itoa(ep.Port))] = ep.ID
			if sources[svc.Name][SourceORCA] {
				targets = append(targets, ORCATarget{Service: svc.Name, Endpoint: ep.ID,
					Address: net.JoinHostPort(ep.Address, orcaPort(ep, set.ORCAPortMeta))})
			}
		}
		if err := p.tracker.SetEndpoints(svc.Name, eps); err != nil {
			p.log.Error("weights: endpoints rejected", "service", svc.Name, "error", err)
		}
		if p.ha != nil {
			_ = p.ha.merged.SetEndpoints(svc.Name, eps) // the same endpoints: the same verdict
		}
	}
	p.mu.Lock()
	for name := range p.known {
		if !seen[name] {
			_ = p.tracker.SetEndpoints(name, nil) // the service left, or its weights were turned off
			if p.ha != nil {
				_ = p.ha.merged.SetEndpoints(name, nil)
			}
		}
	}
	p.known, p.addrs, p.sources, p.perSvc, p.services = seen, addrs, sources, perSvc, all
	p.mu.Unlock()
	p.orca.SetTargets(targets)
	p.spill.observe(s, p.cfg.Services)
}

// publishNodes plans the per-node weights of the services in per_node
// mode from table t over the nodes' subsets in view (the runner calls it
// at most once per MinPushInterval) and hands them to the publisher when
// some node's changed; it reports whether it did.
func (p *Pipeline) publishNodes(t Table, view Subsets) bool {
	p.mu.Lock()
	var names []string
	for name, on := range p.perSvc {
		if on {
			names = append(names, name)
		}
	}
	had := p.hadNode
	p.mu.Unlock()
	all, changed := map[string]map[string]map[string]uint32{}, false
	keep := map[string]bool{}
	for _, name := range names {
		st, ok := t.Service(name)
		if !ok {
			continue
		}
		keep[name] = true
		m, ch, err := p.perNode.Plan(st, view.NodeSubsets(name), p.tracker.NodeRates(name, t.At))
		if err != nil {
			p.log.Error("per-node weights failed; nodes keep their last weights", "service", name, "error", err)
			continue
		}
		changed = changed || ch
		if len(m) > 0 {
			all[name] = m
		}
	}
	p.perNode.Forget(keep)
	if !changed && (len(all) > 0 || !had) {
		return false
	}
	p.mu.Lock()
	p.hadNode = len(all) > 0
	p.mu.Unlock()
	p.cfg.Publisher.SetNodeWeights(all)
	return true
}

// orcaPort is the endpoint's ORCA port: its meta value at key, else the
// service port.
func orcaPort(ep discovery.Endpoint, key string) string {
	if p, err := strconv.Atoi(ep.Meta[key]); err == nil && p > 0 && p < 65536 {
		return strconv.Itoa(p)
	}
	return strconv.Itoa(ep.Port)
}

// resolve maps an LRS upstream address in a cluster to an endpoint id.
func (p *Pipeline) resolve(cluster, address string, port uint32) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.addrs[cluster][net.JoinHostPort(address, strconv.FormatUint(uint64(port), 10))]
	return id, ok
}

// isKnown reports whether the tracker holds service.
func (p *Pipeline) isKnown(service string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.known[service]
}

// sink passes reports of one source to the tracker, for the services that
// take that source (ServiceConfig.Sources).
func (p *Pipeline) sink(source string) ReportSink { return sourceFilter{p, source} }

type sourceFilter struct {
	p      *Pipeline
	source string
}

func (f sourceFilter) Observe(r Report, now time.Time) error {
	if f.source == SourceORCA {
		f.p.lame.observe(r)
	}
	if !f.takes(r.Service) {
		return fmt.Errorf("%w: service %s does not take %s reports (services.%s.weights.sources)",
			ErrUnknownEndpoint, r.Service, f.source, r.Service)
	}
	return f.p.tracker.Observe(r, now)
}

// Known lets the HTTP push API check a whole batch before observing any of
// it: the endpoint is tracked and its service takes this source.
func (f sourceFilter) Known(service, endpoint string) bool {
	return f.takes(service) && f.p.tracker.Known(service, endpoint)
}

// takes reports whether a weighted service takes this source; services the
// pipeline does not know are left to the tracker (which rejects them).
func (f sourceFilter) takes(service string) bool {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	return !f.p.known[service] || f.p.sources[service][f.source]
}
