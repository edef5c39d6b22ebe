package envoy

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
)

func ep(id, addr string, port uint32) Endpoint {
	return Endpoint{ID: id, Address: addr, Port: port, Health: HealthHealthy}
}

func TestParseLBPolicy(t *testing.T) {
	for in, want := range map[string]LBPolicy{
		"": RoundRobin, "round_robin": RoundRobin, "ROUND_ROBIN": RoundRobin, " least_request ": LeastRequest,
		"ring_hash": RingHash, "random": Random, "Maglev": Maglev,
	} {
		got, err := ParseLBPolicy(in)
		if err != nil || got != want {
			t.Errorf("ParseLBPolicy(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	_, err := ParseLBPolicy("weighted_round_robin")
	if err == nil {
		t.Fatal("ParseLBPolicy(weighted_round_robin): no error")
	}
	for _, p := range lbPolicies {
		if !strings.Contains(err.Error(), string(p)) {
			t.Errorf("error %q does not list %q", err, p)
		}
	}
}

// TestInvalidInput checks that each function rejects the inputs it reads
// and that Build reports every problem of a service.
func TestInvalidInput(t *testing.T) {
	good := ep("a", "10.0.0.1", 80)
	withEndpoint := func(mod func(*Endpoint)) Service {
		e := good
		mod(&e)
		return Service{Name: "svc", Endpoints: []Endpoint{e}}
	}
	for name, tc := range map[string]struct {
		svc  Service
		fail []string // functions that must fail: cluster, cla, listener, route
		want []string // substrings of the Build error
	}{
		"empty name": {Service{}, []string{"cluster", "cla", "listener", "route"}, []string{"service name is empty"}},
		"bad lb policy": {Service{Name: "svc", LBPolicy: "fastest"}, []string{"cluster"},
			[]string{`"fastest"`, "round_robin, least_request, ring_hash, random, maglev"}},
		"negative timeout": {Service{Name: "svc", ConnectTimeout: -1}, []string{"cluster"}, []string{"negative"}},
		"port 0":           {withEndpoint(func(e *Endpoint) { e.Port = 0 }), []string{"cla"}, []string{"port 0 out of range"}},
		"port 65536":       {withEndpoint(func(e *Endpoint) { e.Port = 65536 }), []string{"cla"}, []string{"port 65536 out of range"}},
		"empty address":    {withEndpoint(func(e *Endpoint) { e.Address = "" }), []string{"cla"}, []string{`endpoint 0 (id "a"): address is empty`}},
		"bad health":       {withEndpoint(func(e *Endpoint) { e.Health = 9 }), []string{"cla"}, []string{"unknown health status 9"}},
		"duplicate address": {Service{Name: "svc", Endpoints: []Endpoint{good, ep("b", "10.0.0.1", 80)}}, []string{"cla"},
			[]string{"address 10.0.0.1:80 already used by endpoint 0"}},
		"all at once": {Service{Name: "svc", LBPolicy: "x", Endpoints: []Endpoint{{Port: 0}}}, []string{"cluster", "cla"},
			[]string{"unknown lb_policy", "address is empty", "port 0"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, cErr := Cluster(tc.svc)
			_, aErr := LoadAssignment(tc.svc)
			_, lErr := Listener(tc.svc)
			_, rErr := RouteConfig(tc.svc)
			for fn, err := range map[string]error{"cluster": cErr, "cla": aErr, "listener": lErr, "route": rErr} {
				if wantFail := slices.Contains(tc.fail, fn); wantFail != (err != nil) {
					t.Errorf("%s: error %v, want failure %v", fn, err, wantFail)
				}
			}
			res, err := Build([]Service{tc.svc})
			if err == nil {
				t.Fatal("Build: no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Build error %q does not contain %q", err, w)
				}
			}
			if n := len(resourceList(res)); n != 0 {
				t.Errorf("Build returned %d resources for an invalid service", n)
			}
		})
	}
}

func TestBuildJoinsErrorsAndKeepsGoodServices(t *testing.T) {
	res, err := Build([]Service{
		{Name: "ok-1"},
		{Name: "bad", LBPolicy: "nope"},
		{Name: "ok-1"},
		{Name: "ok-2", Endpoints: []Endpoint{ep("a", "10.0.0.1", 0)}},
		{Name: "ok-3"},
	})
	for _, w := range []string{`service "bad"`, `service "ok-1": duplicate service name`, `service "ok-2"`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Build error %v does not contain %q", err, w)
		}
	}
	if len(res.Clusters) != 2 || res.Clusters[0].GetName() != "ok-1" || res.Clusters[1].GetName() != "ok-3" ||
		len(res.LoadAssignments) != 2 || len(res.Listeners) != 2 || len(res.Routes) != 2 {
		t.Errorf("Build kept %d clusters %v; want ok-1 and ok-3 with all their resources", len(res.Clusters), res.Clusters)
	}
}

// TestWeightClamping checks that huge weights keep every EDS weight >= 1 and
// every sum below 2^32-1, and that weights are scaled proportionally.
func TestWeightClamping(t *testing.T) {
	const huge = math.MaxUint32
	zone := func(z string, ws ...uint32) []Endpoint {
		var eps []Endpoint
		for i, w := range ws {
			e := ep(fmt.Sprintf("%s-%d", z, i), fmt.Sprintf("10.%d.0.%d", len(z), i), 80)
			e.Weight, e.Locality = w, Locality{Zone: z}
			eps = append(eps, e)
		}
		return eps
	}
	for name, tc := range map[string]struct {
		endpoints       []Endpoint
		wantEndpoint    [][]uint32 // per locality, when checked
		wantLocality    []uint32   // when checked
		proportionalTol float64    // max relative error of endpoint ratios to the first one
	}{
		"small weights are kept": {endpoints: zone("a", 0, 1, 7), wantEndpoint: [][]uint32{{1, 1, 7}}, wantLocality: []uint32{9}},
		"two huge endpoints":     {endpoints: zone("a", huge, huge), proportionalTol: 1e-9},
		"huge next to tiny":      {endpoints: zone("a", huge, huge, 1, 0), proportionalTol: 1e-9},
		"huge in every locality": {endpoints: append(append(zone("a", huge, huge), zone("bb", huge)...), zone("ccc", 1)...), proportionalTol: 1e-9},
		"localities overflow only together": {endpoints: append(zone("a", huge/2), zone("bb", huge/2, 3)...),
			wantEndpoint: [][]uint32{{huge / 2}, {huge / 2, 3}}},
	} {
		t.Run(name, func(t *testing.T) {
			cla, err := LoadAssignment(Service{Name: "svc", Endpoints: tc.endpoints})
			if err != nil {
				t.Fatal(err)
			}
			checkWeights(t, cla)
			for i, lle := range cla.GetEndpoints() {
				var got []uint32
				for _, e := range lle.GetLbEndpoints() {
					got = append(got, e.GetLoadBalancingWeight().GetValue())
				}
				if tc.wantEndpoint != nil && fmt.Sprint(got) != fmt.Sprint(tc.wantEndpoint[i]) {
					t.Errorf("locality %d: endpoint weights %v, want %v", i, got, tc.wantEndpoint[i])
				}
				if tc.wantLocality != nil && lle.GetLoadBalancingWeight().GetValue() != tc.wantLocality[i] {
					t.Errorf("locality %d: weight %d, want %d", i, lle.GetLoadBalancingWeight().GetValue(), tc.wantLocality[i])
				}
				checkProportional(t, got, lle, tc.endpoints, tc.proportionalTol)
			}
		})
	}
}

// checkWeights asserts the invariants: weights >= 1, sums < 2^32-1.
func checkWeights(t *testing.T, cla *endpointv3.ClusterLoadAssignment) {
	t.Helper()
	var localitySum uint64
	for i, lle := range cla.GetEndpoints() {
		lw := lle.GetLoadBalancingWeight().GetValue()
		if lw < 1 {
			t.Errorf("locality %d: weight %d < 1", i, lw)
		}
		localitySum += uint64(lw)
		var sum uint64
		for j, e := range lle.GetLbEndpoints() {
			w := e.GetLoadBalancingWeight().GetValue()
			if w < 1 {
				t.Errorf("locality %d endpoint %d: weight %d < 1", i, j, w)
			}
			sum += uint64(w)
		}
		if sum >= math.MaxUint32 {
			t.Errorf("locality %d: endpoint weights sum to %d >= 2^32-1", i, sum)
		}
	}
	if localitySum >= math.MaxUint32 {
		t.Errorf("locality weights sum to %d >= 2^32-1", localitySum)
	}
}

// checkProportional asserts that scaled weights keep the ratios of the
// input weights (0 counted as 1) of the endpoints in lle, up to tol, for
// endpoints whose scaled weight is well above the rounding floor of 1.
func checkProportional(t *testing.T, got []uint32, lle *endpointv3.LocalityLbEndpoints, in []Endpoint, tol float64) {
	t.Helper()
	if tol == 0 {
		return
	}
	inWeight := map[string]float64{}
	for _, e := range in {
		inWeight[e.ID] = float64(max(e.Weight, 1))
	}
	first := lle.GetLbEndpoints()[0].GetEndpoint().GetHostname()
	for i, e := range lle.GetLbEndpoints() {
		if got[i] < 1000 {
			continue
		}
		want := inWeight[e.GetEndpoint().GetHostname()] / inWeight[first]
		if ratio := float64(got[i]) / float64(got[0]); math.Abs(ratio-want) > tol*want {
			t.Errorf("endpoint %d: ratio to first %v, want %v", i, ratio, want)
		}
	}
}

func TestFitWeights(t *testing.T) {
	for name, tc := range map[string]struct{ in, want []uint64 }{
		"empty":           {nil, nil},
		"fits unchanged":  {[]uint64{0, 1, 5}, []uint64{1, 1, 5}},
		"exactly the max": {[]uint64{maxWeightSum - 1, 1}, []uint64{maxWeightSum - 1, 1}},
		"one over":        {[]uint64{maxWeightSum, 1}, []uint64{maxWeightSum - 3, 1}},
		"sums of weights": {[]uint64{3 << 32, 1 << 32}, []uint64{(maxWeightSum - 2) * 3 / 4, (maxWeightSum - 2) / 4}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := fitWeights(tc.in)
			if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("fitWeights(%v) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestDeterministic checks that equal inputs give byte-identical
// deterministic marshalings, that endpoints keep their input order within a
// locality, and that the order of localities in the input does not matter.
func TestDeterministic(t *testing.T) {
	meta := map[string]string{}
	for i := range 50 {
		meta[fmt.Sprintf("k%02d", i)] = fmt.Sprint(i)
	}
	mk := func(order ...int) []Service {
		all := []Endpoint{
			{ID: "a", Address: "10.0.0.1", Port: 1, Weight: 3, Meta: meta, Locality: Locality{Region: "r1"}},
			{ID: "b", Address: "10.0.0.2", Port: 1, Weight: 2, Meta: meta, Locality: Locality{Region: "r1"}},
			{ID: "c", Address: "10.0.0.3", Port: 1, Weight: 1, Meta: meta, Locality: Locality{Region: "r1"}},
			{ID: "z", Address: "10.0.1.1", Port: 1, Locality: Locality{Region: "r0"}},
		}
		var eps []Endpoint
		for _, i := range order {
			eps = append(eps, all[i])
		}
		return []Service{{Name: "x", LBPolicy: Maglev, Endpoints: eps}, {Name: "y", LBPolicy: Random}}
	}
	abcz, zabc, cabz := marshalBuild(t, mk(0, 1, 2, 3)), marshalBuild(t, mk(3, 0, 1, 2)), marshalBuild(t, mk(2, 0, 1, 3))
	for range 20 {
		if !bytes.Equal(abcz, marshalBuild(t, mk(0, 1, 2, 3))) {
			t.Fatal("Build is not deterministic")
		}
	}
	if !bytes.Equal(abcz, zabc) {
		t.Error("the input order of localities changes the output")
	}
	if bytes.Equal(abcz, cabz) {
		t.Error("reordering endpoints within a locality did not change the output")
	}
	res, err := Build(mk(2, 0, 1, 3))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, lle := range res.LoadAssignments[0].GetEndpoints() {
		for _, e := range lle.GetLbEndpoints() {
			got = append(got, e.GetEndpoint().GetHostname())
		}
	}
	if fmt.Sprint(got) != "[z c a b]" {
		t.Errorf("endpoint order %v, want [z c a b] (locality r0 first, then r1 in input order)", got)
	}
}

func marshalBuild(t *testing.T, services []Service) []byte {
	t.Helper()
	res, err := Build(services)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, m := range resourceList(res) {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// TestGRPCChecksCatchKnownNACKs makes sure the grpc-go checks in
// grpc_test.go reject what grpc-go rejects, so that their passing in
// TestGolden means something.
func TestGRPCChecksCatchKnownNACKs(t *testing.T) {
	svc := Service{Name: "svc", Endpoints: []Endpoint{ep("a", "10.0.0.1", 80)}}
	res, err := Build([]Service{svc})
	if err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(r Resources){
		"locality message missing": func(r Resources) { r.LoadAssignments[0].Endpoints[0].Locality = nil },
		"locality weight unset":    func(r Resources) { r.LoadAssignments[0].Endpoints[0].LoadBalancingWeight = nil },
		"endpoint weight 0":        func(r Resources) { r.LoadAssignments[0].Endpoints[0].LbEndpoints[0].LoadBalancingWeight.Value = 0 },
		"lb_policy RANDOM":         func(r Resources) { r.Clusters[0].LbPolicy = clusterv3.Cluster_RANDOM },
		"lb_policy MAGLEV":         func(r Resources) { r.Clusters[0].LbPolicy = clusterv3.Cluster_MAGLEV },
		"EDS not over ADS":         func(r Resources) { r.Clusters[0].EdsClusterConfig.EdsConfig.ConfigSourceSpecifier = nil },
		"no route cluster":         func(r Resources) { r.Routes[0].VirtualHosts[0].Routes[0].Action = nil },
		"no http filters":          func(r Resources) { setHTTPFilters(t, r.Listeners[0], 0) },
		"router filter duplicated": func(r Resources) { setHTTPFilters(t, r.Listeners[0], 2) },
	} {
		t.Run(name, func(t *testing.T) {
			r := Resources{
				Clusters:        []*clusterv3.Cluster{proto.CloneOf(res.Clusters[0])},
				LoadAssignments: []*endpointv3.ClusterLoadAssignment{proto.CloneOf(res.LoadAssignments[0])},
				Listeners:       []*listenerv3.Listener{proto.CloneOf(res.Listeners[0])},
				Routes:          []*routev3.RouteConfiguration{proto.CloneOf(res.Routes[0])},
			}
			if err := checkGRPCResources(r); err != nil {
				t.Fatalf("unmutated: %v", err)
			}
			mutate(r)
			if err := checkGRPCResources(r); err == nil {
				t.Error("checks passed")
			}
		})
	}
}

// setHTTPFilters replaces the HTTP filters of l's connection manager with n
// router filters.
func setHTTPFilters(t *testing.T, l *listenerv3.Listener, n int) {
	t.Helper()
	hcm := &hcmv3.HttpConnectionManager{}
	if err := l.GetApiListener().GetApiListener().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	router := hcm.HttpFilters[0]
	hcm.HttpFilters = nil
	for i := range n {
		f := proto.CloneOf(router)
		f.Name = fmt.Sprintf("router-%d", i)
		hcm.HttpFilters = append(hcm.HttpFilters, f)
	}
	a, err := marshalAny(hcm)
	if err != nil {
		t.Fatal(err)
	}
	l.ApiListener.ApiListener = a
}
