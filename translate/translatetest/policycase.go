package translatetest

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/hashicorp/consul/api"
	"gopkg.in/yaml.v3"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/policy"
	"github.com/xds-server/xds-server/translate"
)

// PolicyCase is the YAML form of translate.PolicyService's input
// (testdata/policy/<case>.in.yaml): one service, its settings, the
// subsets other services demand and its policy in a compact form of
// policy.Policy (filters are compiled as the policy package does). Unknown
// keys are errors.
type PolicyCase struct {
	Doc      string       `yaml:"doc"`
	Settings caseSettings `yaml:"settings"`
	Service  caseService  `yaml:"service"`
	Demanded []string     `yaml:"demanded"`
	Policy   casePolicy   `yaml:"policy"`
}

// PolicyInput is a decoded PolicyCase.
type PolicyInput struct {
	Service  discovery.Service
	Settings translate.ServiceSettings
	Policy   policy.Policy
	Demanded []string
}

type casePolicy struct {
	Protocol string        `yaml:"protocol"`
	Resolver *caseResolver `yaml:"resolver"`
	Splits   []caseSplit   `yaml:"splits"`
	Routes   []caseRoute   `yaml:"routes"`
}

type caseResolver struct {
	DefaultSubset  string         `yaml:"default_subset"`
	Subsets        []caseSubset   `yaml:"subsets"`
	Redirect       *caseTarget    `yaml:"redirect"`
	ConnectTimeout time.Duration  `yaml:"connect_timeout"`
	RequestTimeout time.Duration  `yaml:"request_timeout"`
	LoadBalancer   *caseLB        `yaml:"load_balancer"`
	Failover       []caseFailover `yaml:"failover"`
}

type caseFailover struct {
	Subset      string   `yaml:"subset"` // "*": any
	Service     string   `yaml:"service"`
	ToSubset    string   `yaml:"to_subset"`
	Datacenters []string `yaml:"datacenters"`
}

type caseSubset struct {
	Name        string `yaml:"name"`
	Filter      string `yaml:"filter"`
	OnlyPassing bool   `yaml:"only_passing"`
}

type caseTarget struct {
	Service    string `yaml:"service"`
	Subset     string `yaml:"subset"`
	Datacenter string `yaml:"datacenter"`
}

type caseLB struct {
	Policy       string     `yaml:"policy"`
	MinRing      uint64     `yaml:"minimum_ring_size"`
	MaxRing      uint64     `yaml:"maximum_ring_size"`
	HashPolicies []caseHash `yaml:"hash_policies"`
}

type caseHash struct {
	Field      string `yaml:"field"`
	FieldValue string `yaml:"field_value"`
	SourceIP   bool   `yaml:"source_ip"`
	Terminal   bool   `yaml:"terminal"`
}

type caseSplit struct {
	Weight  float32 `yaml:"weight"`
	Service string  `yaml:"service"`
	Subset  string  `yaml:"subset"`
}

type caseRoute struct {
	PathExact       string                                `yaml:"path_exact"`
	PathPrefix      string                                `yaml:"path_prefix"`
	PathRegex       string                                `yaml:"path_regex"`
	CaseInsensitive bool                                  `yaml:"case_insensitive"`
	Headers         []api.ServiceRouteHTTPMatchHeader     `yaml:"headers"`
	Query           []api.ServiceRouteHTTPMatchQueryParam `yaml:"query"`
	Methods         []string                              `yaml:"methods"`
	To              caseDestination                       `yaml:"to"`
}

type caseDestination struct {
	Service             string        `yaml:"service"`
	Subset              string        `yaml:"subset"`
	PrefixRewrite       string        `yaml:"prefix_rewrite"`
	Timeout             time.Duration `yaml:"timeout"`
	Retries             uint32        `yaml:"retries"`
	RetryConnectFailure bool          `yaml:"retry_connect_failure"`
	RetryStatusCodes    []uint32      `yaml:"retry_status_codes"`
	RetryOn             []string      `yaml:"retry_on"`
}

// LoadPolicy reads and decodes a policy case file.
func LoadPolicy(path string) (PolicyInput, PolicyCase, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return PolicyInput{}, PolicyCase{}, fmt.Errorf("translatetest: %w", err)
	}
	var c PolicyCase
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return PolicyInput{}, c, fmt.Errorf("translatetest: %s: %w", path, err)
	}
	whole := Case{Settings: map[string]caseSettings{"*": c.Settings}, Services: []caseService{c.Service}}
	in, _, err := whole.decoded()
	if err != nil {
		return PolicyInput{}, c, fmt.Errorf("translatetest: %s: %w", path, err)
	}
	pol, err := c.Policy.model(c.Service.Name)
	if err != nil {
		return PolicyInput{}, c, fmt.Errorf("translatetest: %s: %w", path, err)
	}
	return PolicyInput{Service: in.Snapshot.Services[0], Settings: whole.settings(c.Service.Name), Policy: pol,
		Demanded: c.Demanded}, c, nil
}

// model builds the policy.Policy the case describes.
func (p casePolicy) model(service string) (policy.Policy, error) {
	out := policy.Policy{Service: service, Protocol: p.Protocol}
	if r := p.Resolver; r != nil {
		res, err := r.model()
		if err != nil {
			return out, err
		}
		out.Resolver = res
	}
	for _, s := range p.Splits {
		out.Splits = append(out.Splits, policy.Split{Weight: s.Weight, Service: s.Service, ServiceSubset: s.Subset})
	}
	for _, r := range p.Routes {
		d := r.To
		out.Routes = append(out.Routes, policy.Route{PathExact: r.PathExact, PathPrefix: r.PathPrefix, PathRegex: r.PathRegex,
			CaseInsensitive: r.CaseInsensitive, Headers: r.Headers, QueryParams: r.Query, Methods: r.Methods,
			Destination: policy.Destination{Service: d.Service, ServiceSubset: d.Subset, PrefixRewrite: d.PrefixRewrite,
				RequestTimeout: d.Timeout, NumRetries: d.Retries, RetryOnConnectFailure: d.RetryConnectFailure,
				RetryOnStatusCodes: d.RetryStatusCodes, RetryOn: d.RetryOn}})
	}
	return out, nil
}

func (r caseResolver) model() (*policy.Resolver, error) {
	out := &policy.Resolver{DefaultSubset: r.DefaultSubset, ConnectTimeout: r.ConnectTimeout, RequestTimeout: r.RequestTimeout}
	for _, s := range r.Subsets {
		sub := policy.Subset{Name: s.Name, OnlyPassing: s.OnlyPassing}
		if s.Filter != "" {
			f, err := policy.CompileFilter(s.Filter)
			if err != nil {
				return nil, err
			}
			sub.Filter = f
		}
		out.Subsets = append(out.Subsets, sub)
	}
	for _, f := range r.Failover {
		out.Failover = append(out.Failover, policy.Failover{Subset: f.Subset, Service: f.Service, ServiceSubset: f.ToSubset,
			Datacenters: f.Datacenters})
	}
	if rd := r.Redirect; rd != nil {
		out.Redirect = &policy.Redirect{Service: rd.Service, ServiceSubset: rd.Subset, Datacenter: rd.Datacenter}
	}
	if lb := r.LoadBalancer; lb != nil {
		out.LoadBalancer = &policy.LoadBalancer{Policy: lb.Policy, MinimumRingSize: lb.MinRing, MaximumRingSize: lb.MaxRing}
		for _, h := range lb.HashPolicies {
			out.LoadBalancer.HashPolicies = append(out.LoadBalancer.HashPolicies,
				api.HashPolicy{Field: h.Field, FieldValue: h.FieldValue, SourceIP: h.SourceIP, Terminal: h.Terminal})
		}
	}
	return out, nil
}

// RenderPolicy renders what translate.PolicyService returned, as Render
// does, with the other services' targets as "external".
func RenderPolicy(res translate.PolicyResources, err error) ([]byte, error) {
	var out output
	if err != nil {
		out.Error = err.Error()
		return encode(out)
	}
	if out.Clusters, err = rawAll(res.Clusters); err != nil {
		return nil, err
	}
	if out.LoadAssignments, err = rawAll(res.LoadAssignments); err != nil {
		return nil, err
	}
	if out.Routes, err = rawAll([]types.Resource{res.Route}); err != nil {
		return nil, err
	}
	for _, t := range res.External {
		out.External = append(out.External, t.Cluster())
	}
	return encode(out)
}
