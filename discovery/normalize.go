package discovery

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Problem is a piece of bad input data that normalization skipped.
type Problem struct {
	Service  string
	Endpoint string // endpoint id; may be empty when the id itself is missing
	Reason   string // short, stable, snake_case: used as a metric label
	Detail   string // human-readable explanation
}

func (p Problem) String() string {
	return fmt.Sprintf("service %q endpoint %q: %s", p.Service, p.Endpoint, p.Detail)
}

// Problem reasons.
const (
	ReasonNoAddress    = "no_address"
	ReasonBadAddress   = "bad_address"
	ReasonBadPort      = "bad_port"
	ReasonDuplicateID  = "duplicate_id"
	ReasonDuplicateAdr = "duplicate_address"
	ReasonNoID         = "no_id"
	ReasonNoName       = "no_service_name"
	ReasonDuplicateSvc = "duplicate_service"
)

// Normalize turns raw services into a Snapshot: services sorted by name,
// endpoints sorted by id, tags sorted, nil maps replaced by empty ones. Bad
// entries (an endpoint without an address or id, a port outside [1, 65535],
// a duplicate endpoint id or address:port, a nameless or duplicate service)
// are skipped and
// returned as problems; the rest of the service is kept. The input is not
// modified.
func Normalize(raw []Service) (Snapshot, []Problem) {
	var problems []Problem
	byName := make(map[string]bool, len(raw))
	out := make([]Service, 0, len(raw))
	for _, svc := range raw {
		switch {
		case svc.Name == "":
			problems = append(problems, Problem{Reason: ReasonNoName, Detail: "service without a name skipped"})
			continue
		case byName[svc.Name]:
			problems = append(problems, Problem{Service: svc.Name, Reason: ReasonDuplicateSvc, Detail: "duplicate service skipped"})
			continue
		}
		byName[svc.Name] = true
		eps, ps := normalizeEndpoints(svc.Name, svc.Endpoints)
		problems = append(problems, ps...)
		out = append(out, Service{Name: svc.Name, Endpoints: eps})
	}
	slices.SortFunc(out, func(a, b Service) int { return strings.Compare(a.Name, b.Name) })
	return Snapshot{Services: out}, problems
}

func normalizeEndpoints(service string, raw []Endpoint) ([]Endpoint, []Problem) {
	var problems []Problem
	eps := make([]Endpoint, 0, len(raw))
	for _, ep := range raw {
		if p, ok := checkEndpoint(service, ep); !ok {
			problems = append(problems, p)
			continue
		}
		ep.Meta = cloneMeta(ep.Meta)
		ep.Tags = slices.Clone(ep.Tags)
		slices.Sort(ep.Tags)
		eps = append(eps, ep)
	}
	slices.SortStableFunc(eps, func(a, b Endpoint) int { return cmp.Compare(a.ID, b.ID) })
	// Drop every endpoint whose id repeats: keeping one of them at random
	// would make the choice depend on input order.
	dup := map[string]bool{}
	for i := 1; i < len(eps); i++ {
		if eps[i].ID == eps[i-1].ID {
			dup[eps[i].ID] = true
		}
	}
	if len(dup) > 0 {
		kept := eps[:0]
		for _, ep := range eps {
			if dup[ep.ID] {
				problems = append(problems, Problem{Service: service, Endpoint: ep.ID, Reason: ReasonDuplicateID,
					Detail: fmt.Sprintf("duplicate endpoint id (address %s:%d) skipped", ep.Address, ep.Port)})
				continue
			}
			kept = append(kept, ep)
		}
		eps = kept
	}
	// Two ids on one address:port would be one backend counted twice (and
	// grpc-go rejects such an assignment): keep the first id.
	seen := make(map[string]string, len(eps))
	kept := eps[:0]
	for _, ep := range eps {
		addr := net.JoinHostPort(ep.Address, strconv.Itoa(ep.Port))
		if first, ok := seen[addr]; ok {
			problems = append(problems, Problem{Service: service, Endpoint: ep.ID, Reason: ReasonDuplicateAdr,
				Detail: fmt.Sprintf("address %s already used by endpoint %q; skipped", addr, first)})
			continue
		}
		seen[addr] = ep.ID
		kept = append(kept, ep)
	}
	return kept, problems
}

func checkEndpoint(service string, ep Endpoint) (Problem, bool) {
	p := Problem{Service: service, Endpoint: ep.ID}
	switch {
	case ep.ID == "":
		p.Reason, p.Detail = ReasonNoID, fmt.Sprintf("endpoint %s:%d without an id skipped", ep.Address, ep.Port)
	case strings.TrimSpace(ep.Address) == "":
		p.Reason, p.Detail = ReasonNoAddress, "endpoint without an address skipped"
	case strings.ContainsAny(ep.Address, " /\t") || (strings.Contains(ep.Address, ":") && net.ParseIP(ep.Address) == nil):
		p.Reason, p.Detail = ReasonBadAddress, fmt.Sprintf("endpoint address %q is not an IP or host name; skipped", ep.Address)
	case ep.Port < 1 || ep.Port > 65535:
		p.Reason, p.Detail = ReasonBadPort, fmt.Sprintf("endpoint port %d outside [1, 65535]; skipped", ep.Port)
	default:
		return Problem{}, true
	}
	return p, false
}

func cloneMeta(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// LocalityFrom derives a locality from metadata and tags: meta keys "region",
// "zone" and "sub_zone" win; otherwise tags of the form "zone=x" or "zone:x"
// (likewise region and sub_zone). defaultRegion fills an unknown region.
func LocalityFrom(meta map[string]string, tags []string, defaultRegion string) Locality {
	l := Locality{Region: meta["region"], Zone: meta["zone"], SubZone: meta["sub_zone"]}
	for _, t := range tags {
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			k, v, ok = strings.Cut(t, ":")
		}
		if !ok {
			continue
		}
		switch k {
		case "region":
			l.Region = cmp.Or(l.Region, v)
		case "zone":
			l.Zone = cmp.Or(l.Zone, v)
		case "sub_zone":
			l.SubZone = cmp.Or(l.SubZone, v)
		}
	}
	l.Region = cmp.Or(l.Region, defaultRegion)
	return l
}
