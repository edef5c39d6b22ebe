package xds

import (
	"fmt"
	"strings"
	"testing"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// namesSnapshot holds load assignments named by names.
func namesSnapshot(t *testing.T, names ...string) *cache.Snapshot {
	t.Helper()
	var res []types.Resource
	for _, n := range names {
		res = append(res, &endpoint.ClusterLoadAssignment{ClusterName: n})
	}
	snap, err := cache.NewSnapshot("1", map[resource.Type][]types.Resource{resource.EndpointType: res})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func madeUp(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}

func reasonOf(r *refusal) string {
	if r == nil {
		return ""
	}
	return r.reason
}

func TestSotWNames(t *testing.T) {
	snap := namesSnapshot(t, "web", "api")
	for name, tc := range map[string]struct {
		limits  NameLimits
		names   []string
		typeURL string
		want    string
		code    codes.Code
	}{
		"known names cost nothing":        {NameLimits{PerStream: 10, UnknownPerNode: 1}, []string{"web", "api", "*"}, resource.EndpointType, "", codes.OK},
		"unknown names up to the bound":   {NameLimits{PerStream: 10, UnknownPerNode: 3}, []string{"web", "x", "y", "z"}, resource.EndpointType, "", codes.OK},
		"unknown names past the bound":    {NameLimits{PerStream: 10, UnknownPerNode: 3}, madeUp("x", 4), resource.EndpointType, reasonMaxUnknown, codes.ResourceExhausted},
		"more names than a stream may":    {NameLimits{PerStream: 2}, []string{"web", "api", "web"}, resource.EndpointType, reasonMaxNames, codes.ResourceExhausted},
		"a type not served counts as one": {NameLimits{UnknownPerNode: 2}, []string{"a", "b"}, "example.com/made.Up", reasonMaxUnknown, codes.ResourceExhausted},
		"an unknown name too long":        {NameLimits{}, []string{strings.Repeat("n", MaxResourceNameBytes+1)}, resource.EndpointType, reasonNameTooLarge, codes.InvalidArgument},
		"no bounds":                       {NameLimits{}, madeUp("x", 10000), resource.EndpointType, "", codes.OK},
	} {
		t.Run(name, func(t *testing.T) {
			b := newNameBook(tc.limits)
			r := b.sotw(1, "n", tc.typeURL, tc.names, snap)
			if got := reasonOf(r); got != tc.want {
				t.Fatalf("refusal %q, want %q", got, tc.want)
			}
			if r != nil && status.Code(r.err) != tc.code {
				t.Errorf("status %v, want %v", r.err, tc.code)
			}
		})
	}
}

// TestUnknownNamesArePerNode: a node's unknown names add up over its
// streams and types; another node has its own; a stream's closing or a
// request naming fewer gives them back.
func TestUnknownNamesArePerNode(t *testing.T) {
	snap := namesSnapshot(t, "web")
	b := newNameBook(NameLimits{UnknownPerNode: 5})
	if r := b.sotw(1, "a", resource.EndpointType, madeUp("x", 3), snap); r != nil {
		t.Fatal(r.err)
	}
	if r := b.sotw(2, "a", resource.EndpointType, madeUp("y", 3), snap); reasonOf(r) != reasonMaxUnknown {
		t.Fatalf("6 unknown names over two streams of one node: %v, want refused", r)
	}
	if r := b.sotw(3, "b", resource.EndpointType, madeUp("y", 5), snap); r != nil {
		t.Fatalf("another node: %v", r.err)
	}
	if r := b.sotw(1, "a", resource.EndpointType, []string{"web"}, snap); r != nil {
		t.Fatal(r.err)
	}
	if r := b.sotw(2, "a", resource.EndpointType, madeUp("y", 5), snap); r != nil {
		t.Fatalf("after stream 1 named only known names: %v", r.err)
	}
	for _, stream := range []int64{1, 2, 3} {
		b.closed(stream)
	}
	if len(b.streams) != 0 || len(b.nodes) != 0 {
		t.Errorf("after every stream with unknown names closed: %d streams, %d nodes kept", len(b.streams), len(b.nodes))
	}
}

// TestDeltaNames: a delta stream's subscriptions add up; unsubscribing
// gives names back; a name subscribed twice counts once; a request
// subscribing to (or saying it has) more than a stream may is refused.
func TestDeltaNames(t *testing.T) {
	snap := namesSnapshot(t, "web")
	b := newNameBook(NameLimits{PerStream: 100, UnknownPerNode: 10})
	step := func(sub, unsub []string, want string) {
		t.Helper()
		if r := b.delta(-1, "n", resource.EndpointType, sub, unsub, 0, snap); reasonOf(r) != want {
			t.Fatalf("subscribe %d, unsubscribe %d: refusal %q, want %q", len(sub), len(unsub), reasonOf(r), want)
		}
	}
	step(append(madeUp("x", 6), "web", "*"), nil, "")
	step(madeUp("x", 6), nil, "") // the same names again
	step(madeUp("y", 4), nil, "") // 10
	step([]string{"z"}, nil, reasonMaxUnknown)
	step([]string{"z"}, []string{"x0", "x1"}, "") // subscribe, then unsubscribe: 9
	step([]string{"q"}, []string{"q"}, "")        // in both: gone
	step(madeUp("w", 2), nil, reasonMaxUnknown)
	if got := b.nodes["n"]; got != 9 {
		t.Errorf("node has %d unknown names, want 9", got)
	}
	if r := b.delta(-2, "n", resource.EndpointType, madeUp("web", 101), nil, 0, snap); reasonOf(r) != reasonMaxNames {
		t.Errorf("101 names in one request: %v, want %s", r, reasonMaxNames)
	}
	if r := b.delta(-3, "m", resource.EndpointType, nil, nil, 101, snap); reasonOf(r) != reasonMaxNames {
		t.Errorf("101 initial resource versions: %v, want %s", r, reasonMaxNames)
	}
	b.closed(-1)
	if len(b.nodes) != 0 {
		t.Errorf("closed: node counts %v kept", b.nodes)
	}
}

// TestNamesOfStreamsThatAreNotADS: a stream of one type (not ADS) sends
// requests without a type URL: its names are checked against its type.
func TestNamesOfStreamsThatAreNotADS(t *testing.T) {
	snap := namesSnapshot(t, "web")
	b := newNameBook(NameLimits{UnknownPerNode: 1})
	b.opened(7, resource.EndpointType)
	if r := b.sotw(7, "n", "", []string{"web"}, snap); r != nil {
		t.Fatalf("a known name: %v", r.err)
	}
	if r := b.sotw(7, "n", "", []string{"x", "y"}, snap); reasonOf(r) != reasonMaxUnknown {
		t.Fatalf("two unknown names: %v, want refused", r)
	}
	b.closed(7)
	if len(b.streams) != 0 {
		t.Errorf("closed: %d streams kept", len(b.streams))
	}
}

// TestNoSnapshotKnowsNothing: before a node has its snapshot every name
// it names is unknown.
func TestNoSnapshotKnowsNothing(t *testing.T) {
	b := newNameBook(NameLimits{UnknownPerNode: 1})
	if r := b.sotw(1, "n", resource.EndpointType, []string{"web", "api"}, nil); reasonOf(r) != reasonMaxUnknown {
		t.Fatalf("two names without a snapshot: %v, want refused", r)
	}
}

// FuzzNameBook: whatever a client subscribes to and unsubscribes from, on
// whichever streams, a node's count is the sum of its streams', never
// negative and never past the bound, and closing every stream leaves
// nothing behind.
func FuzzNameBook(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte("subscribe and unsubscribe and close"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		snap := namesSnapshot(t, "n0", "n1")
		const bound = 5
		b := newNameBook(NameLimits{PerStream: 8, UnknownPerNode: bound})
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i], int(ops[i+1])
			stream := int64(op%4) + 1
			node := fmt.Sprint("node-", stream%2)
			names := madeUp("n", arg%4)
			switch op / 4 % 4 {
			case 0:
				b.delta(-stream, node, resource.EndpointType, names, nil, 0, snap)
			case 1:
				b.delta(-stream, node, resource.EndpointType, nil, names, 0, snap)
			case 2:
				b.sotw(stream, node, resource.EndpointType, names, snap)
			default:
				b.closed(-stream)
				b.closed(stream)
			}
			sums := map[string]int{}
			for _, s := range b.streams {
				for _, tn := range s.types {
					if tn.n < 0 {
						t.Fatalf("a stream counts %d unknown names", tn.n)
					}
					sums[s.node] += tn.n
				}
			}
			for n, c := range sums {
				if c != b.nodes[n] {
					t.Fatalf("node %s: its streams count %d, the node %d", n, c, b.nodes[n])
				}
			}
			for n, c := range b.nodes {
				if c != sums[n] || c <= 0 || c > bound {
					t.Fatalf("node %s counts %d, its streams %d (bound %d)", n, c, sums[n], bound)
				}
			}
		}
		for stream := int64(1); stream <= 4; stream++ {
			b.closed(stream)
			b.closed(-stream)
		}
		if len(b.streams) != 0 || len(b.nodes) != 0 {
			t.Fatalf("after every stream closed: %d streams, %d nodes", len(b.streams), len(b.nodes))
		}
	})
}

func TestTrimInitial(t *testing.T) {
	for name, tc := range map[string]struct {
		sub  []string
		want int
	}{
		"a named subscription keeps what it names": {[]string{"a", "b"}, 2},
		"naming nothing is the wildcard":           {nil, 4},
		"the wildcard by name keeps everything":    {[]string{"a", "*"}, 4},
		"names it does not have":                   {[]string{"x"}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			req := &discoverygrpc.DeltaDiscoveryRequest{ResourceNamesSubscribe: tc.sub,
				InitialResourceVersions: map[string]string{"a": "1", "b": "1", "made-up-1": "1", "made-up-2": "1"}}
			trimInitial(req)
			if got := len(req.GetInitialResourceVersions()); got != tc.want {
				t.Errorf("%d initial versions kept, want %d", got, tc.want)
			}
		})
	}
}
