package discovery

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Health is the serving state of an endpoint as far as discovery knows it.
type Health int

// Health values. The zero value is HealthUnknown.
const (
	HealthUnknown   Health = iota // no health information; clients may use it
	HealthHealthy                 // all checks passing
	HealthDegraded                // serving, with a warning (when configured)
	HealthUnhealthy               // a check is critical; not serving
	HealthDraining                // lame duck: finish in-flight work, take no new requests
)

var healthNames = [...]string{"unknown", "healthy", "degraded", "unhealthy", "draining"}

// String returns the lower-case name of h.
func (h Health) String() string {
	if h < 0 || int(h) >= len(healthNames) {
		return fmt.Sprintf("health(%d)", int(h))
	}
	return healthNames[h]
}

// ParseHealth parses a health name as written by String; "" is unknown.
func ParseHealth(s string) (Health, error) {
	if s == "" {
		return HealthUnknown, nil
	}
	for i, n := range healthNames {
		if strings.EqualFold(s, n) {
			return Health(i), nil
		}
	}
	return HealthUnknown, fmt.Errorf("discovery: unknown health %q (want one of %s)", s, strings.Join(healthNames[:], ", "))
}

// Serving reports whether new requests may be sent to an endpoint in state h.
func (h Health) Serving() bool {
	return h == HealthUnknown || h == HealthHealthy || h == HealthDegraded
}

// Locality is where an endpoint runs. Empty fields are unknown.
type Locality struct {
	Region  string
	Zone    string
	SubZone string
}

// Endpoint is one registered instance of a service.
type Endpoint struct {
	ID       string            // unique within the service; the canonical sort key
	Address  string            // IP or host name; never empty after normalization
	Port     int               // in [1, 65535]
	Health   Health            // serving state
	Weight   uint32            // relative weight >= 1; 0 means "not set" (treated as 1)
	Locality Locality          // from the zone/region meta or tags
	Meta     map[string]string // service instance metadata, never nil after normalization
	Tags     []string          // sorted
	Node     string            // Consul node name; "" for the static source
	// Datacenter is the Consul datacenter the endpoint was read from (its
	// node's); for the static source, its meta "datacenter" ("" unset).
	Datacenter string
	// Drain says why the endpoint is DRAINING: its drain sources
	// (DrainConsul, DrainStatic, and those of package drain), comma
	// separated and sorted; "" when it is not draining.
	Drain string
}

// Service is a named set of endpoints, sorted by ID.
type Service struct {
	Name      string
	Endpoints []Endpoint
}

// Snapshot is a complete view of all services, sorted by name.
type Snapshot struct {
	Services []Service
}

// Service returns the service called name, if present.
func (s Snapshot) Service(name string) (Service, bool) {
	i, ok := slices.BinarySearchFunc(s.Services, name, func(svc Service, n string) int {
		return strings.Compare(svc.Name, n)
	})
	if !ok {
		return Service{}, false
	}
	return s.Services[i], true
}

// EndpointCount is the number of endpoints over all services.
func (s Snapshot) EndpointCount() int {
	n := 0
	for _, svc := range s.Services {
		n += len(svc.Endpoints)
	}
	return n
}

// Equal reports whether two endpoints carry the same information.
func (e Endpoint) Equal(o Endpoint) bool {
	return e.ID == o.ID && e.Address == o.Address && e.Port == o.Port &&
		e.Health == o.Health && e.Weight == o.Weight && e.Locality == o.Locality &&
		maps.Equal(e.Meta, o.Meta) && slices.Equal(e.Tags, o.Tags) && e.Node == o.Node && e.Drain == o.Drain &&
		e.Datacenter == o.Datacenter
}

// Equal reports whether two services have the same name and endpoints.
func (s Service) Equal(o Service) bool {
	return s.Name == o.Name && slices.EqualFunc(s.Endpoints, o.Endpoints, Endpoint.Equal)
}

// Equal reports whether two snapshots describe the same world.
func (s Snapshot) Equal(o Snapshot) bool {
	return slices.EqualFunc(s.Services, o.Services, Service.Equal)
}

// Read is when a source read the first change a snapshot brings: the
// wall-clock time its query returned (Consul: the blocking query that
// saw a new index), its index before and after (0: none), and when the
// snapshot was emitted.
type Read struct {
	At                 time.Time
	IndexFrom, IndexTo uint64
	Emitted            time.Time
}

// Source produces snapshots until ctx is done. Each call of emit carries a
// complete, normalized snapshot; emit is called from one goroutine at a time
// and must not retain the snapshot's slices for mutation. Run returns nil
// when ctx is cancelled, or an error if the source cannot start at all.
type Source interface {
	Run(ctx context.Context, emit func(Snapshot)) error
}

// The drain sources the discovery sources set themselves (Endpoint.Drain);
// package drain adds the others over the snapshots.
const (
	DrainConsul = "consul_maintenance" // Consul service or node maintenance mode
	DrainStatic = "static"             // the static file says draining
)
