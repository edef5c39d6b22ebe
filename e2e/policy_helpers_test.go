package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/xds-server/xds-server/e2e/harness"
)

// The helpers of the traffic policy tests (policy_grpc_test.go): backends
// registered with a version, the server and a proxyless gRPC client of
// one service, and measured shares. What /debug/config says the client
// was sent and acked: policy_sent_test.go; the loader and the flaky
// backend: policy_load_test.go.

// startVersioned starts n echo backends "<service>-<version>-<i>" and
// registers them as service with Meta version and a passing TTL check
// ("ttl-<id>").
func startVersioned(t *testing.T, consul *harness.ConsulAgent, service, version string, n int) []*harness.Backend {
	t.Helper()
	var out []*harness.Backend
	for i := range n {
		b := harness.StartBackend(t, fmt.Sprintf("%s-%s-%d", service, version, i+1))
		registerVersioned(t, consul, service, version, b.ID, b.Host, b.Port)
		out = append(out, b)
	}
	return out
}

// registerVersioned registers one instance of service with Meta version
// and a passing TTL check "ttl-<id>".
func registerVersioned(t *testing.T, consul *harness.ConsulAgent, service, version, id, host string, port int) {
	t.Helper()
	err := consul.Client().Agent().ServiceRegister(&api.AgentServiceRegistration{
		ID: id, Name: service, Address: host, Port: port, Meta: map[string]string{"version": version},
		Check: &api.AgentServiceCheck{CheckID: "ttl-" + id, TTL: "10m", Status: api.HealthPassing},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// backendIDs are the backends' ids.
func backendIDs(bs ...[]*harness.Backend) []string {
	var out []string
	for _, b := range slices.Concat(bs...) {
		out = append(out, b.ID)
	}
	return out
}

// grpcDefaults are service-defaults entries with protocol grpc: Consul
// refuses a splitter, router or cross-service redirect of a tcp service.
func grpcDefaults(services ...string) []api.ConfigEntry {
	var out []api.ConfigEntry
	for _, s := range services {
		out = append(out, &api.ServiceConfigEntry{Kind: api.ServiceDefaults, Name: s, Protocol: "grpc"})
	}
	return out
}

// versionSubsets is the resolver of service with subsets v1 and v2 by
// Service.Meta.version.
func versionSubsets(service, defaultSubset string) *api.ServiceResolverConfigEntry {
	return &api.ServiceResolverConfigEntry{Kind: api.ServiceResolver, Name: service, DefaultSubset: defaultSubset,
		Subsets: map[string]api.ServiceResolverSubset{
			"v1": {Filter: `Service.Meta.version == v1`}, "v2": {Filter: `Service.Meta.version == v2`}}}
}

// splitter is the service-splitter of service sending v1 and v2 their
// percent; a split of 0 is left out (TestPolicySplitZeroWeight writes
// one).
func splitter(service string, v1, v2 float32) *api.ServiceSplitterConfigEntry {
	e := &api.ServiceSplitterConfigEntry{Kind: api.ServiceSplitter, Name: service}
	for _, s := range []api.ServiceSplit{{Weight: v1, ServiceSubset: "v1"}, {Weight: v2, ServiceSubset: "v2"}} {
		if s.Weight > 0 {
			e.Splits = append(e.Splits, s)
		}
	}
	return e
}

// policyEnv is a server reading a Consul's config entries and one
// proxyless gRPC client of service (its own node).
type policyEnv struct {
	consul  *harness.ConsulAgent
	entries *api.ConfigEntries
	srv     *harness.Server
	node    string
	conn    *grpc.ClientConn
	call    callFunc
}

// startPolicy writes entries, starts the server and dials xds:///service
// through grpc-go's xDS resolver as node "policy-<test>".
func startPolicy(t *testing.T, consul *harness.ConsulAgent, service string, entries ...api.ConfigEntry) *policyEnv {
	t.Helper()
	e := &policyEnv{consul: consul, entries: consul.Client().ConfigEntries(), node: "policy-" + t.Name()}
	e.set(t, entries...)
	e.srv = startServer(t, consul)
	e.conn = dialWith(t, xdsResolver(t, []string{e.srv.XDSAddr}, e.node), "xds:///"+service)
	e.conn.Connect() // grpc.NewClient is lazy: subscribe now, before the first RPC
	e.call = unaryCall(e.conn)
	return e
}

// startWeb starts a Consul with service web's backends, 2 of version v1
// and 2 of v2, writes web's grpc service-defaults and entries, and starts
// the server and a client of web.
func startWeb(t *testing.T, entries ...api.ConfigEntry) (e *policyEnv, v1, v2 []*harness.Backend) {
	t.Helper()
	consul := harness.Consul(t)
	v1 = startVersioned(t, consul, "web", "v1", 2)
	v2 = startVersioned(t, consul, "web", "v2", 2)
	return startPolicy(t, consul, "web", append(grpcDefaults("web"), entries...)...), v1, v2
}

// set writes config entries through Consul's API, in order.
func (e *policyEnv) set(t *testing.T, entries ...api.ConfigEntry) {
	t.Helper()
	for _, c := range entries {
		setEntry(t, e.entries, c)
	}
}

// del deletes config entries of service, kinds in order.
func (e *policyEnv) del(t *testing.T, service string, kinds ...string) {
	t.Helper()
	for _, k := range kinds {
		if _, err := e.entries.Delete(k, service, nil); err != nil {
			t.Fatalf("deleting %s %s: %v", k, service, err)
		}
	}
}

// withHeader returns call with metadata key: value on every RPC.
func withHeader(call callFunc, key, value string) callFunc {
	return func(ctx context.Context) (string, error) {
		return call(metadata.AppendToOutgoingContext(ctx, key, value))
	}
}

// measure makes n RPCs one after the other and counts the backends that
// served them; a failed RPC fails the test.
func measure(t *testing.T, call callFunc, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	settle := time.Now().Add(5 * time.Second)
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		id, err := call(ctx)
		cancel()
		// grpc-go ACKs a route before its channel has the new picker: an
		// RPC made right after the ACK may pick the route's new cluster
		// from the old picker ("unknown cluster selected"). Until the
		// first RPC succeeds, that one error is the client settling, not
		// the server's config: try again (the other errors still fail).
		for err != nil && len(got) == 0 && time.Now().Before(settle) && strings.Contains(err.Error(), "unknown cluster selected for RPC") {
			ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
			id, err = call(ctx)
			cancel()
		}
		if err != nil {
			t.Fatalf("RPC failed after %d of %d: %v", rpcCount(got), n, err)
		}
		got[id]++
	}
	return got
}

// awaitNoneOn makes batches of 500 RPCs until one has none served by
// ids (the client has taken the config that moved their share away),
// failing the test after 20s.
func awaitNoneOn(t *testing.T, call callFunc, ids []string, what string) {
	t.Helper()
	start := time.Now()
	for {
		got := measure(t, call, 500)
		if shareOf(got, ids) == 0 {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("%s: 20s on, RPCs still reach %v: %v", what, ids, got)
		}
	}
	t.Logf("%s within %v", what, time.Since(start).Round(time.Millisecond))
}

func rpcCount(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// shareOf is the share in [0, 1] of the RPCs in got served by ids.
func shareOf(got map[string]int, ids []string) float64 {
	n := 0
	for _, id := range ids {
		n += got[id]
	}
	return float64(n) / float64(max(rpcCount(got), 1))
}

// onlyFrom reports whether every RPC in got was served by one of ids
// and each of ids served one.
func onlyFrom(got map[string]int, ids []string) bool {
	return slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(slices.Values(ids)))
}
