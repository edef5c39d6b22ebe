package translatetest

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/policy"
	"github.com/xds-server/xds-server/subsetting"
	"github.com/xds-server/xds-server/translate"
)

// Case is the YAML form of a translate.NodeInput (<case>.in.yaml).
// Unknown keys are errors. Keys of envoy's structs (listeners, cluster
// options, RLS TLS) are their Go field names in lower case
// ("ratelimit", "admissioncontrol", "healthcheck"); durations are Go
// durations ("5s").
type Case struct {
	Doc  string   `yaml:"doc"` // what the case shows
	Node caseNode `yaml:"node"`
	// Settings are per service; "*" is the default of services without
	// their own (no merging: a service's entry replaces "*").
	Settings    map[string]caseSettings      `yaml:"settings"`
	Services    []caseService                `yaml:"services"`
	Weights     map[string]map[string]uint32 `yaml:"weights"`      // global
	NodeWeights map[string]map[string]uint32 `yaml:"node_weights"` // the node's own
	Slots       map[string]map[string]int    `yaml:"slots"`        // endpoint slots; absent: a fresh table's
	Listeners   []caseListener               `yaml:"listeners"`
	RateLimit   caseRLS                      `yaml:"rate_limit"`
	Datacenters []string                     `yaml:"datacenters"` // failover order, the local one first
	// Spill is service -> "region/zone" -> the zone's spill state.
	Spill map[string]map[string]translate.ZoneSpill `yaml:"spill"`
	// Policies are the services' traffic policies (PolicyCase's format).
	Policies map[string]casePolicy `yaml:"policies"`
}

type caseNode struct {
	ID       string         `yaml:"id"`
	Cluster  string         `yaml:"cluster"`
	Envoy    bool           `yaml:"envoy"`
	Index    *int           `yaml:"index"` // absent: no client index
	Locality envoy.Locality `yaml:"locality"`
	// Datacenter is the node's datacenter.
	Datacenter string `yaml:"datacenter"`
}

type caseSettings struct {
	LBPolicy       envoy.LBPolicy       `yaml:"lb_policy"`
	ConnectTimeout time.Duration        `yaml:"connect_timeout"`
	SubsetSize     int                  `yaml:"subset_size"`
	Subsetting     subsetting.Algorithm `yaml:"subsetting"`
	Cluster        envoy.ClusterOptions `yaml:"cluster"`
	Locality       caseLocality         `yaml:"locality"`
	// OverprovisioningFactor is in percent; 0: Envoy's default.
	OverprovisioningFactor uint32 `yaml:"overprovisioning_factor"`
	UnhealthySplit         string `yaml:"unhealthy_split"` // "keep": translate.ServiceSettings.KeepUnhealthySplits
	RetryOtherSplit        bool   `yaml:"retry_other_split"`
}

type caseLocality struct {
	Failover   []string `yaml:"failover"`
	Distribute float64  `yaml:"distribute"`
	Spill      bool     `yaml:"spill"`
}

type caseService struct {
	Name      string         `yaml:"name"`
	Endpoints []caseEndpoint `yaml:"endpoints"`
}

// caseEndpoint is an endpoint as discovery, with the drains applied,
// hands it over: a drained one has health "draining" and its reasons.
type caseEndpoint struct {
	ID       string             `yaml:"id"`
	Address  string             `yaml:"address"`
	Port     int                `yaml:"port"`
	Health   string             `yaml:"health"` // discovery.ParseHealth
	Weight   uint32             `yaml:"weight"`
	Locality discovery.Locality `yaml:"locality"`
	Meta     map[string]string  `yaml:"meta"`
	Tags     []string           `yaml:"tags"`
	Node     string             `yaml:"node"`  // Consul node
	Drain    string             `yaml:"drain"` // drain sources, comma separated (see package drain)
	// Datacenter is where it was discovered; "" unknown.
	Datacenter string `yaml:"datacenter"`
}

type caseListener struct {
	Nodes              []string `yaml:"nodes"`
	envoy.HTTPListener `yaml:",inline"`
}

type caseRLS struct {
	Address string              `yaml:"address"`
	TLS     *envoy.RateLimitTLS `yaml:"tls"`
}

// Load reads and decodes a case file.
func Load(path string) (translate.NodeInput, Case, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return translate.NodeInput{}, Case{}, fmt.Errorf("translatetest: %w", err)
	}
	in, c, err := Decode(b)
	if err != nil {
		return in, c, fmt.Errorf("translatetest: %s: %w", path, err)
	}
	return in, c, nil
}

// Decode decodes a case's YAML into the input of translate.Node.
func Decode(b []byte) (translate.NodeInput, Case, error) {
	var c Case
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return translate.NodeInput{}, c, err
	}
	return c.decoded()
}

// decoded is the input of translate.Node that c describes.
func (c Case) decoded() (translate.NodeInput, Case, error) {
	in := translate.NodeInput{
		Weights: c.Weights, NodeWeights: c.NodeWeights, Slots: c.Slots,
		Node: translate.NodeIdentity{ID: c.Node.ID, Cluster: c.Node.Cluster, Envoy: c.Node.Envoy,
			Index: -1, Locality: c.Node.Locality, Datacenter: c.Node.Datacenter},
		Datacenters:      c.Datacenters,
		RateLimitAddress: c.RateLimit.Address, RateLimitTLS: c.RateLimit.TLS,
		Settings: c.settings,
	}
	if c.Node.Index != nil {
		in.Node.Index = *c.Node.Index
	}
	for _, l := range c.Listeners {
		in.Listeners = append(in.Listeners, translate.Listener{HTTPListener: l.HTTPListener, Nodes: l.Nodes})
	}
	for _, s := range c.Services {
		svc := discovery.Service{Name: s.Name}
		for _, e := range s.Endpoints {
			h, err := discovery.ParseHealth(e.Health)
			if err != nil {
				return in, c, fmt.Errorf("service %s, endpoint %s: %w", s.Name, e.ID, err)
			}
			svc.Endpoints = append(svc.Endpoints, discovery.Endpoint{
				ID: e.ID, Address: e.Address, Port: e.Port, Health: h, Weight: e.Weight,
				Locality: e.Locality, Meta: e.Meta, Tags: e.Tags, Node: e.Node, Drain: e.Drain,
				Datacenter: e.Datacenter,
			})
		}
		in.Snapshot.Services = append(in.Snapshot.Services, svc)
	}
	slices.SortFunc(in.Snapshot.Services, func(a, b discovery.Service) int { return strings.Compare(a.Name, b.Name) })
	for name, set := range c.Settings {
		if _, err := translate.ParseFailover(set.Locality.Failover); err != nil {
			return in, c, fmt.Errorf("settings %s: %w", name, err)
		}
	}
	in.Spill = spillStates(c.Spill)
	for name, cp := range c.Policies {
		p, err := cp.model(name)
		if err != nil {
			return in, c, fmt.Errorf("policies %s: %w", name, err)
		}
		if in.Policies == nil {
			in.Policies = map[string]policy.Policy{}
		}
		in.Policies[name] = p
	}
	return in, c, nil
}

// spillStates converts the case's spill states ("region/zone" keys).
func spillStates(in map[string]map[string]translate.ZoneSpill) map[string]map[translate.Zone]translate.ZoneSpill {
	if in == nil {
		return nil
	}
	out := make(map[string]map[translate.Zone]translate.ZoneSpill, len(in))
	for svc, zones := range in {
		out[svc] = map[translate.Zone]translate.ZoneSpill{}
		for k, z := range zones {
			region, zone, _ := strings.Cut(k, "/")
			out[svc][translate.Zone{Region: region, Zone: zone}] = z
		}
	}
	return out
}

// settings is the case's translate.SettingsFunc.
func (c Case) settings(service string) translate.ServiceSettings {
	s, ok := c.Settings[service]
	if !ok {
		s = c.Settings["*"]
	}
	f, _ := translate.ParseFailover(s.Locality.Failover) // checked by Decode
	return translate.ServiceSettings{LBPolicy: s.LBPolicy, ConnectTimeout: s.ConnectTimeout,
		SubsetSize: s.SubsetSize, Subsetting: s.Subsetting, Cluster: s.Cluster,
		Locality:               translate.LocalityPolicy{Failover: f, Distribute: s.Locality.Distribute, Spill: s.Locality.Spill},
		OverprovisioningFactor: s.OverprovisioningFactor, KeepUnhealthySplits: s.UnhealthySplit == "keep",
		RetryOtherSplit: s.RetryOtherSplit}
}
