package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/examples"
	"github.com/xds-server/xds-server/translate"
)

// ListenerConfig is one entry of the listeners: section (file only):
// an HTTP listener served to the Envoy and proxyless gRPC nodes its nodes
// globs match. Durations are strings, parsed here so that a bad one is
// reported with its key.
type ListenerConfig struct {
	Name             string                  `mapstructure:"name"`
	Address          string                  `mapstructure:"address"` // host:port Envoy binds
	Nodes            []string                `mapstructure:"nodes"`   // globs on node id or cluster; empty = ["*"]
	Routes           []ListenerRouteConfig   `mapstructure:"routes"`
	RateLimit        *ListenerRateLimit      `mapstructure:"ratelimit"`
	AdmissionControl *AdmissionControlConfig `mapstructure:"admission_control"`
}

// ListenerRouteConfig is one route: prefix | path | safe_regex, headers,
// and the target service.
type ListenerRouteConfig struct {
	Prefix        string              `mapstructure:"prefix"`
	Path          string              `mapstructure:"path"`
	SafeRegex     string              `mapstructure:"safe_regex"`
	Headers       []HeaderMatchConfig `mapstructure:"headers"`
	Service       string              `mapstructure:"service"`
	Timeout       string              `mapstructure:"timeout"` // whole request; "" = unset
	Retries       int                 `mapstructure:"retries"`
	RetryOn       string              `mapstructure:"retry_on"`
	PerTryTimeout string              `mapstructure:"per_try_timeout"`
	Split         []RouteSplitConfig  `mapstructure:"split"` // instead of service; see servicepolicy.go
}

// HeaderMatchConfig matches one header: exactly one of exact, prefix,
// regex, present.
type HeaderMatchConfig struct {
	Name    string `mapstructure:"name"`
	Exact   string `mapstructure:"exact"`
	Prefix  string `mapstructure:"prefix"`
	Regex   string `mapstructure:"regex"`
	Present *bool  `mapstructure:"present"`
	Invert  bool   `mapstructure:"invert"`
}

// ListenerRateLimit is a listener's ratelimit: the filter's settings and
// the descriptors (each a list of actions) Envoy sends.
type ListenerRateLimit struct {
	Domain          string                    `mapstructure:"domain"`
	Timeout         string                    `mapstructure:"timeout"` // RLS call timeout; "" = Envoy's 20ms
	FailureModeDeny bool                      `mapstructure:"failure_mode_deny"`
	Cluster         string                    `mapstructure:"cluster"` // "" = xds-server-ratelimit, generated
	Actions         [][]RateLimitActionConfig `mapstructure:"actions"`
}

// RateLimitActionConfig is one action: exactly one key is set.
type RateLimitActionConfig struct {
	RemoteAddress *struct{} `mapstructure:"remote_address"`
	GenericKey    *struct {
		Value         string `mapstructure:"value"`
		DescriptorKey string `mapstructure:"descriptor_key"`
	} `mapstructure:"generic_key"`
	RequestHeaders *struct {
		HeaderName    string `mapstructure:"header_name"`
		DescriptorKey string `mapstructure:"descriptor_key"`
		SkipIfAbsent  bool   `mapstructure:"skip_if_absent"`
	} `mapstructure:"request_headers"`
	HeaderValueMatch *struct {
		DescriptorKey   string              `mapstructure:"descriptor_key"`
		DescriptorValue string              `mapstructure:"descriptor_value"`
		ExpectMatch     *bool               `mapstructure:"expect_match"`
		Headers         []HeaderMatchConfig `mapstructure:"headers"`
	} `mapstructure:"header_value_match"`
}

// AdmissionControlConfig is a listener's admission_control: the SRE
// book's K (success_rate_threshold = 1/K) or the threshold itself.
type AdmissionControlConfig struct {
	K                       *float64 `mapstructure:"k"`                         // >= 1
	SuccessRateThreshold    *float64 `mapstructure:"success_rate_threshold"`    // in (0, 1]
	Aggression              float64  `mapstructure:"aggression"`                // >= 1; 0 = 1
	SamplingWindow          string   `mapstructure:"sampling_window"`           // "" = 30s
	RPSThreshold            int      `mapstructure:"rps_threshold"`             // requests/s below which nothing is rejected
	MaxRejectionProbability float64  `mapstructure:"max_rejection_probability"` // in (0, 1]; 0 = 0.8
}

// RateLimitSection is the ratelimit: section: the rate-limit service's
// settings, and the address Envoy reaches it at.
type RateLimitSection struct {
	RateLimitConfig `mapstructure:",squash"`
	// AdvertiseAddress is the host:port of the generated
	// xds-server-ratelimit cluster; "" = ratelimit.address with an
	// empty or unspecified host replaced by 127.0.0.1.
	AdvertiseAddress string `mapstructure:"advertise_address"`
}

// EnvoyTLS is how Envoy reaches the rate-limit service through the
// generated cluster: nil when the service serves plaintext.
func (r RateLimitSection) EnvoyTLS() *envoy.RateLimitTLS {
	if !r.TLS.Enabled() {
		return nil
	}
	return &envoy.RateLimitTLS{ClientCertificate: r.TLS.ClientCAFile != ""}
}

// Advertised is the address Envoy uses to reach the rate-limit service.
func (r RateLimitSection) Advertised() string {
	if r.AdvertiseAddress != "" {
		return r.AdvertiseAddress
	}
	host, port, err := net.SplitHostPort(r.Address)
	if err != nil {
		return r.Address
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// XDSListeners converts the listeners: section for the xds package,
// recording every problem of a listener alone in p.
func (c Config) XDSListeners(p *problems) []translate.Listener {
	out := make([]translate.Listener, 0, len(c.Listeners))
	for i, lc := range c.Listeners {
		at := fmt.Sprintf("listeners[%d]", i)
		l := translate.Listener{Nodes: lc.Nodes, HTTPListener: envoy.HTTPListener{Name: lc.Name, Address: lc.Address}}
		if len(l.Nodes) == 0 {
			l.Nodes = []string{"*"}
		}
		for j, g := range l.Nodes {
			if _, err := translate.ParseGlob(g); err != nil {
				p.bad(fmt.Sprintf("%s.nodes[%d]", at, j), g, err.Error())
			}
		}
		dur := func(key, s string) time.Duration {
			if s == "" {
				return 0
			}
			d, err := time.ParseDuration(s)
			if err != nil {
				_, reason := parseDuration(s)
				p.bad(at+"."+key, s, reason)
			}
			return d
		}
		for j, rc := range lc.Routes {
			key := fmt.Sprintf("routes[%d].", j)
			c.validateSplit(p, at+"."+strings.TrimSuffix(key, "."), rc)
			if rc.Retries < 0 {
				p.bad(at+"."+key+"retries", rc.Retries, "is negative")
			}
			l.Routes = append(l.Routes, envoy.Route{Prefix: rc.Prefix, Path: rc.Path, Regex: rc.SafeRegex,
				Headers: headerMatches(rc.Headers), Service: rc.Service, Split: splitClusters(rc.Split), Timeout: dur(key+"timeout", rc.Timeout),
				Retries: uint32(max(rc.Retries, 0)), RetryOn: rc.RetryOn, PerTryTimeout: dur(key+"per_try_timeout", rc.PerTryTimeout)})
		}
		if rl := lc.RateLimit; rl != nil {
			l.RateLimit = &envoy.RateLimit{Domain: rl.Domain, Timeout: dur("ratelimit.timeout", rl.Timeout),
				FailureModeDeny: rl.FailureModeDeny, Cluster: rl.Cluster, Actions: rateLimitActions(rl.Actions)}
		}
		if ac := lc.AdmissionControl; ac != nil {
			l.AdmissionControl = admission(p, at+".admission_control", *ac, dur("admission_control.sampling_window", ac.SamplingWindow))
		}
		if err := l.Validate(); err != nil {
			for _, e := range unjoin(err) {
				var fe *envoy.FieldError
				if errors.As(e, &fe) {
					if splitField(lc, fe.Field) {
						continue // reported with the config's keys by validateSplit
					}
					p.badKey(at+"."+fe.Field, fe.Reason)
				} else {
					p.badKey(at, e.Error())
				}
			}
		}
		out = append(out, l)
	}
	return out
}

func admission(p *problems, at string, ac AdmissionControlConfig, window time.Duration) *envoy.AdmissionControl {
	out := &envoy.AdmissionControl{Aggression: ac.Aggression, SamplingWindow: window,
		MaxRejectionProbability: ac.MaxRejectionProbability}
	switch {
	case ac.K != nil && ac.SuccessRateThreshold != nil:
		p.badKey(at, "set k or success_rate_threshold (= 1/k), not both")
	case ac.K != nil && *ac.K < 1:
		p.bad(at+".k", *ac.K, "is below 1 (k = 1 rejects as soon as a request fails; 2 is the SRE book's choice)")
	case ac.K != nil:
		out.SuccessRateThreshold = 1 / *ac.K
	case ac.SuccessRateThreshold != nil:
		if *ac.SuccessRateThreshold <= 0 {
			p.bad(at+".success_rate_threshold", *ac.SuccessRateThreshold, "is not in (0, 1]")
		}
		out.SuccessRateThreshold = *ac.SuccessRateThreshold
	}
	if ac.RPSThreshold < 0 {
		p.bad(at+".rps_threshold", ac.RPSThreshold, "is negative")
	}
	out.RPSThreshold = uint32(max(ac.RPSThreshold, 0))
	return out
}

func headerMatches(hs []HeaderMatchConfig) []envoy.HeaderMatch {
	var out []envoy.HeaderMatch
	for _, h := range hs {
		out = append(out, envoy.HeaderMatch{Name: h.Name, Exact: h.Exact, Prefix: h.Prefix, Regex: h.Regex, Present: h.Present, Invert: h.Invert})
	}
	return out
}

func rateLimitActions(in [][]RateLimitActionConfig) [][]envoy.RateLimitAction {
	out := make([][]envoy.RateLimitAction, 0, len(in))
	for _, d := range in {
		acts := make([]envoy.RateLimitAction, 0, len(d))
		for _, a := range d {
			act := envoy.RateLimitAction{RemoteAddress: a.RemoteAddress != nil}
			if g := a.GenericKey; g != nil {
				act.GenericKey = &envoy.GenericKey{Value: g.Value, DescriptorKey: g.DescriptorKey}
			}
			if r := a.RequestHeaders; r != nil {
				act.RequestHeaders = &envoy.RequestHeaders{HeaderName: r.HeaderName, DescriptorKey: r.DescriptorKey, SkipIfAbsent: r.SkipIfAbsent}
			}
			if m := a.HeaderValueMatch; m != nil {
				act.HeaderValueMatch = &envoy.HeaderValueMatch{DescriptorKey: m.DescriptorKey, DescriptorValue: m.DescriptorValue,
					ExpectMatch: m.ExpectMatch, Headers: headerMatches(m.Headers)}
			}
			acts = append(acts, act)
		}
		out = append(out, acts)
	}
	return out
}

// validateListeners checks the listeners: section: each listener (see
// XDSListeners), names and addresses unique, names apart from services
// (a service's proxyless api_listener carries its name), route targets
// known, and ratelimit.advertise_address when a listener needs it. With
// discovery.source consul, a route's service may be in Consul alone:
// RouteServices lists those for the caller to check against the catalog.
func (c Config) validateListeners(p *problems) {
	if c.RateLimit.AdvertiseAddress != "" {
		checkAddr(p, "ratelimit.advertise_address", c.RateLimit.AdvertiseAddress)
	}
	if len(c.Listeners) == 0 {
		return
	}
	ls := c.XDSListeners(p)
	known, err := c.knownServices()
	if err != nil {
		p.bad("discovery.static.file", c.Discovery.Static.File, err.Error()+" (needed to check the services of listeners' routes)")
	}
	if slices.ContainsFunc(ls, func(l translate.Listener) bool { return l.RateLimit != nil && l.RateLimit.Cluster == "" }) {
		if _, port, err := net.SplitHostPort(c.RateLimit.Advertised()); err == nil && (port == "0" || port == "") {
			p.bad("ratelimit.advertise_address", c.RateLimit.AdvertiseAddress, "a listener's ratelimit uses the generated xds-server-ratelimit cluster, "+
				fmt.Sprintf("which needs a port: set ratelimit.advertise_address (ratelimit.address %q has none)", c.RateLimit.Address))
		}
	}
	names, addrs := map[string]int{}, map[string]int{}
	for i, l := range ls {
		at := fmt.Sprintf("listeners[%d]", i)
		if j, dup := names[l.Name]; dup && l.Name != "" {
			p.bad(at+".name", l.Name, fmt.Sprintf("is also the name of listeners[%d]", j))
		} else {
			names[l.Name] = i
		}
		if known[strings.ToLower(l.Name)] {
			p.bad(at+".name", l.Name, fmt.Sprintf("is also a service name; proxyless clients resolve xds:///%s to the service", l.Name))
		}
		if j, dup := addrs[l.Address]; dup && l.Address != "" {
			p.bad(at+".address", l.Address, fmt.Sprintf("is also the address of listeners[%d]", j))
		} else {
			addrs[l.Address] = i
		}
	}
	if c.openCatalog() || err != nil {
		return // routes to services Consul may know: see UnknownRouteServices
	}
	for _, r := range c.RouteServices() {
		if !known[strings.ToLower(r.Service)] {
			p.bad(r.Key, r.Service, "is not a known service (known: "+strings.Join(sortedKeys(known), ", ")+")")
		}
	}
}

// RouteService is the service a listener's route targets.
type RouteService struct {
	Key     string // listeners[i].routes[j].service
	Service string
}

// RouteServices lists the services of every listener route, in order.
func (c Config) RouteServices() []RouteService {
	var out []RouteService
	for i, l := range c.Listeners {
		for j, r := range l.Routes {
			if r.Service != "" {
				out = append(out, RouteService{Key: fmt.Sprintf("listeners[%d].routes[%d].service", i, j), Service: r.Service})
			}
			for k, s := range r.Split {
				if s.Service != "" {
					out = append(out, RouteService{Key: fmt.Sprintf("listeners[%d].routes[%d].split[%d].service", i, j, k), Service: s.Service})
				}
			}
		}
	}
	return out
}

// openCatalog reports a Consul source without a services filter: any
// service of the catalog may be served, so the file alone cannot tell
// whether a route's service exists.
func (c Config) openCatalog() bool {
	return c.Discovery.Source == "consul" && len(c.Discovery.Consul.Services) == 0
}

// UnknownRouteServices are, with discovery.source consul and no
// discovery.consul.services filter, the routes whose service is not a
// services.<name> entry: the ones to look up in Consul's catalog.
func (c Config) UnknownRouteServices() []RouteService {
	if !c.openCatalog() {
		return nil
	}
	known, _ := c.knownServices()
	var out []RouteService
	for _, r := range c.RouteServices() {
		if !known[strings.ToLower(r.Service)] {
			out = append(out, r)
		}
	}
	return out
}

// knownServices are the services a route may target, lower-cased: the
// services.<name> entries, plus the static file's services (source
// static) or the discovery.consul.services filter (source consul).
func (c Config) knownServices() (map[string]bool, error) {
	known := map[string]bool{}
	for name := range c.Services {
		if name != "*" {
			known[strings.ToLower(name)] = true
		}
	}
	switch c.Discovery.Source {
	case "consul":
		for _, s := range c.Discovery.Consul.Services {
			known[strings.ToLower(s)] = true
		}
	case "static":
		data, rerr := os.ReadFile(c.Discovery.Static.File)
		if errors.Is(rerr, os.ErrNotExist) && c.Discovery.Static.File == DefaultStaticFile {
			data, rerr = examples.Endpoints, nil
		}
		if rerr != nil {
			return known, rerr
		}
		services, perr := discovery.ParseStatic(data)
		if perr != nil {
			return known, perr
		}
		for _, s := range services {
			known[strings.ToLower(s.Name)] = true
		}
	}
	return known, nil
}

// DefaultStaticFile is the default of discovery.static.file; when it does
// not exist the embedded copy of the example is served instead.
const DefaultStaticFile = "examples/endpoints.yaml"

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
