package envoy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/kylelemons/godebug/diff"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// listenerCase is testdata/listeners_<case>.in.yaml: listeners in the
// shape of the config file's listeners: section, and optionally the RLS
// address whose cluster is generated.
type listenerCase struct {
	Listeners     []caseListener `json:"listeners"`
	RateLimitAddr string         `json:"ratelimit_address"`
}

type caseListener struct {
	Name             string         `json:"name"`
	Address          string         `json:"address"`
	Routes           []caseRoute    `json:"routes"`
	RateLimit        *caseRateLimit `json:"ratelimit"`
	AdmissionControl *caseAdmission `json:"admission_control"`
}

type caseRoute struct {
	Prefix        string            `json:"prefix"`
	Path          string            `json:"path"`
	SafeRegex     string            `json:"safe_regex"`
	Headers       []caseHeaderMatch `json:"headers"`
	Service       string            `json:"service"`
	Timeout       caseDuration      `json:"timeout"`
	Retries       uint32            `json:"retries"`
	RetryOn       string            `json:"retry_on"`
	PerTryTimeout caseDuration      `json:"per_try_timeout"`
}

type caseHeaderMatch struct {
	Name    string `json:"name"`
	Exact   string `json:"exact"`
	Prefix  string `json:"prefix"`
	Regex   string `json:"regex"`
	Present *bool  `json:"present"`
	Invert  bool   `json:"invert"`
}

type caseRateLimit struct {
	Domain          string         `json:"domain"`
	Timeout         caseDuration   `json:"timeout"`
	FailureModeDeny bool           `json:"failure_mode_deny"`
	Cluster         string         `json:"cluster"`
	Actions         [][]caseAction `json:"actions"`
}

type caseAction struct {
	RemoteAddress  *struct{}    `json:"remote_address"`
	GenericKey     *caseGeneric `json:"generic_key"`
	RequestHeaders *caseReqHdrs `json:"request_headers"`
	HeaderValue    *caseHVM     `json:"header_value_match"`
}

type caseGeneric struct {
	Value         string `json:"value"`
	DescriptorKey string `json:"descriptor_key"`
}

type caseReqHdrs struct {
	HeaderName    string `json:"header_name"`
	DescriptorKey string `json:"descriptor_key"`
	SkipIfAbsent  bool   `json:"skip_if_absent"`
}

type caseHVM struct {
	DescriptorKey   string            `json:"descriptor_key"`
	DescriptorValue string            `json:"descriptor_value"`
	ExpectMatch     *bool             `json:"expect_match"`
	Headers         []caseHeaderMatch `json:"headers"`
}

type caseAdmission struct {
	SuccessRateThreshold    float64      `json:"success_rate_threshold"`
	Aggression              float64      `json:"aggression"`
	SamplingWindow          caseDuration `json:"sampling_window"`
	RPSThreshold            uint32       `json:"rps_threshold"`
	MaxRejectionProbability float64      `json:"max_rejection_probability"`
}

// caseDuration is a time.ParseDuration string in YAML.
type caseDuration time.Duration

func (d *caseDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = caseDuration(v)
	return err
}

func (h caseHeaderMatch) match() HeaderMatch {
	return HeaderMatch{Name: h.Name, Exact: h.Exact, Prefix: h.Prefix, Regex: h.Regex, Present: h.Present, Invert: h.Invert}
}

func headerMatches(hs []caseHeaderMatch) []HeaderMatch {
	var out []HeaderMatch
	for _, h := range hs {
		out = append(out, h.match())
	}
	return out
}

func (a caseAction) action() RateLimitAction {
	out := RateLimitAction{RemoteAddress: a.RemoteAddress != nil}
	if g := a.GenericKey; g != nil {
		out.GenericKey = &GenericKey{Value: g.Value, DescriptorKey: g.DescriptorKey}
	}
	if r := a.RequestHeaders; r != nil {
		out.RequestHeaders = &RequestHeaders{HeaderName: r.HeaderName, DescriptorKey: r.DescriptorKey, SkipIfAbsent: r.SkipIfAbsent}
	}
	if m := a.HeaderValue; m != nil {
		out.HeaderValueMatch = &HeaderValueMatch{DescriptorKey: m.DescriptorKey, DescriptorValue: m.DescriptorValue,
			ExpectMatch: m.ExpectMatch, Headers: headerMatches(m.Headers)}
	}
	return out
}

func (c caseListener) listener() HTTPListener {
	l := HTTPListener{Name: c.Name, Address: c.Address}
	for _, r := range c.Routes {
		l.Routes = append(l.Routes, Route{Prefix: r.Prefix, Path: r.Path, Regex: r.SafeRegex, Headers: headerMatches(r.Headers),
			Service: r.Service, Timeout: time.Duration(r.Timeout), Retries: r.Retries, RetryOn: r.RetryOn,
			PerTryTimeout: time.Duration(r.PerTryTimeout)})
	}
	if rl := c.RateLimit; rl != nil {
		l.RateLimit = &RateLimit{Domain: rl.Domain, Timeout: time.Duration(rl.Timeout), FailureModeDeny: rl.FailureModeDeny, Cluster: rl.Cluster}
		for _, d := range rl.Actions {
			var acts []RateLimitAction
			for _, a := range d {
				acts = append(acts, a.action())
			}
			l.RateLimit.Actions = append(l.RateLimit.Actions, acts)
		}
	}
	if ac := c.AdmissionControl; ac != nil {
		l.AdmissionControl = &AdmissionControl{SuccessRateThreshold: ac.SuccessRateThreshold, Aggression: ac.Aggression,
			SamplingWindow: time.Duration(ac.SamplingWindow), RPSThreshold: ac.RPSThreshold, MaxRejectionProbability: ac.MaxRejectionProbability}
	}
	return l
}

// listenerGolden is the JSON shape of a listeners_*.golden.yaml file.
type listenerGolden struct {
	Clusters     []json.RawMessage `json:"clusters,omitempty"`
	Listeners    []json.RawMessage `json:"listeners"`
	APIListeners []json.RawMessage `json:"api_listeners"`
	Routes       []json.RawMessage `json:"routes"`
}

// listenerOutput is what a case translates to, in golden order.
type listenerOutput struct {
	clusters     []*clusterv3.Cluster
	listeners    []*listenerv3.Listener
	apiListeners []*listenerv3.Listener
	routes       []*routev3.RouteConfiguration
}

func (o listenerOutput) list() []proto.Message {
	var out []proto.Message
	for _, m := range o.clusters {
		out = append(out, m)
	}
	for _, m := range o.listeners {
		out = append(out, m)
	}
	for _, m := range o.apiListeners {
		out = append(out, m)
	}
	for _, m := range o.routes {
		out = append(out, m)
	}
	return out
}

func buildListenerCase(t *testing.T, path string) listenerOutput {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c listenerCase
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out listenerOutput
	if c.RateLimitAddr != "" {
		cl, err := RateLimitCluster(c.RateLimitAddr)
		if err != nil {
			t.Fatal(err)
		}
		out.clusters = append(out.clusters, cl)
	}
	for _, cl := range c.Listeners {
		res, err := BuildHTTPListener(cl.listener())
		if err != nil {
			t.Fatalf("BuildHTTPListener: %v", err)
		}
		out.listeners = append(out.listeners, res.Listener)
		out.apiListeners = append(out.apiListeners, res.APIListener)
		out.routes = append(out.routes, res.Route)
	}
	return out
}

// TestListenerGolden translates every testdata/listeners_<case>.in.yaml
// and compares the result with listeners_<case>.golden.yaml (semantically,
// as TestGolden does). Every resource has passed ValidateAll (the builders
// return only validated resources, typed filter configs included); the
// api_listeners and routes also pass the grpc-go checks.
func TestListenerGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "listeners_*.in.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no testdata/listeners_*.in.yaml (%v)", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			out := buildListenerCase(t, in)
			for _, l := range out.apiListeners {
				if err := viaAny(l, checkGRPCListener); err != nil {
					t.Errorf("grpc-go would NACK: %v", err)
				}
			}
			for _, rc := range out.routes {
				if err := viaAny(rc, checkGRPCListenerRoute); err != nil {
					t.Errorf("grpc-go would NACK: %v", err)
				}
			}
			for _, m := range out.list() {
				if err := m.(validatable).ValidateAll(); err != nil {
					t.Errorf("ValidateAll: %v", err)
				}
			}
			got := renderListenerGolden(t, out)
			path := filepath.Join("testdata", name+".golden.yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./envoy -update to create it)", err)
			}
			if err := equalResources(out.list(), parseListenerGolden(t, want).list()); err != nil {
				t.Errorf("%s: %v; diff (-golden +got):\n%s", path, err, changedLines(diff.Diff(string(want), string(got)), 3))
			}
		})
	}
}

// checkGRPCListenerRoute is checkGRPCRoute for routes that may carry
// retry policies: grpc-go NACKs num_retries < 1 and bad backoffs, and
// ignores the retry conditions it does not know.
func checkGRPCListenerRoute(rc *routev3.RouteConfiguration) error {
	rc = proto.CloneOf(rc)
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if p := r.GetRoute().GetRetryPolicy(); p != nil {
				if p.GetNumRetries() != nil && p.GetNumRetries().GetValue() < 1 {
					return fmt.Errorf("rds %q: num_retries < 1", rc.GetName())
				}
				if p.GetRetryBackOff() != nil {
					return errors.New("unchecked retry backoff")
				}
				r.GetRoute().RetryPolicy = nil
			}
		}
	}
	return checkGRPCRoute(rc)
}

func renderListenerGolden(t *testing.T, o listenerOutput) []byte {
	t.Helper()
	var g listenerGolden
	for _, m := range o.clusters {
		g.Clusters = append(g.Clusters, marshalJSON(t, m))
	}
	for _, m := range o.listeners {
		g.Listeners = append(g.Listeners, marshalJSON(t, m))
	}
	for _, m := range o.apiListeners {
		g.APIListeners = append(g.APIListeners, marshalJSON(t, m))
	}
	for _, m := range o.routes {
		g.Routes = append(g.Routes, marshalJSON(t, m))
	}
	return goldenYAML(t, g)
}

func parseListenerGolden(t *testing.T, b []byte) listenerOutput {
	t.Helper()
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	var g listenerGolden
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		t.Fatal(err)
	}
	return listenerOutput{
		clusters:     unmarshalAll[*clusterv3.Cluster](t, g.Clusters),
		listeners:    unmarshalAll[*listenerv3.Listener](t, g.Listeners),
		apiListeners: unmarshalAll[*listenerv3.Listener](t, g.APIListeners),
		routes:       unmarshalAll[*routev3.RouteConfiguration](t, g.Routes),
	}
}
