package xds

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestAuthzRuleAllows(t *testing.T) {
	rule := AuthzRule{Identities: []string{"spiffe://e/envoy/*"}, NodeIDs: []string{"edge-*"}, Clusters: []string{"edge"}}
	for name, tc := range map[string]struct {
		ids           []string
		node, cluster string
		want          bool
	}{
		"matching identity, node and cluster": {[]string{"spiffe://e/envoy/a"}, "edge-1", "edge", true},
		"second SAN matches":                  {[]string{"a.example.org", "spiffe://e/envoy/a"}, "edge-1", "edge", true},
		"node id not allowed":                 {[]string{"spiffe://e/envoy/a"}, "core-1", "edge", false},
		"cluster not allowed":                 {[]string{"spiffe://e/envoy/a"}, "edge-1", "core", false},
		"identity not allowed":                {[]string{"spiffe://e/batch/a"}, "edge-1", "edge", false},
		"no certificate":                      {nil, "edge-1", "edge", false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := rule.allows(tc.ids, tc.node, tc.cluster); got != tc.want {
				t.Errorf("allows = %v, want %v", got, tc.want)
			}
		})
	}
	if !(AuthzRule{Identities: []string{"*"}}).allows([]string{"x"}, "any", "any") {
		t.Error("a rule without node_ids and clusters does not allow any node")
	}
}

// nopCallbacks records whether a request got through.
type nopCallbacks struct {
	serverv3.CallbackFuncs
	requests int
}

func (n *nopCallbacks) OnStreamRequest(int64, *discoverygrpc.DiscoveryRequest) error {
	n.requests++
	return nil
}

func TestAuthzRefusesBeforeTheRegistry(t *testing.T) {
	next := &nopCallbacks{}
	a := newAuthz(next, []AuthzRule{{Identities: []string{"*"}, NodeIDs: []string{"ok-*"}}}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := a.OnStreamOpen(context.Background(), 1, ""); err != nil { // no peer: no certificate
		t.Fatal(err)
	}
	err := a.OnStreamRequest(1, &discoverygrpc.DiscoveryRequest{Node: &core.Node{Id: "ok-1"}})
	if status.Code(err) != codes.PermissionDenied || next.requests != 0 {
		t.Errorf("no certificate: %v (requests passed on: %d), want PermissionDenied and none", err, next.requests)
	}
	if got := testutil.ToFloat64(a.denied); got != 1 {
		t.Errorf("xds_authz_denied_total = %v, want 1", got)
	}
}

// TestAuthzLeavesBoundsToTheCallbacks: a node over a bound is refused by
// the wrapped callbacks (InvalidArgument), not by the rules; refusals'
// log lines are clipped and limited to one a second per node.
func TestAuthzLeavesBoundsToTheCallbacks(t *testing.T) {
	next := &nopCallbacks{}
	var logs bytes.Buffer
	a := newAuthz(next, []AuthzRule{{Identities: []string{"*"}, NodeIDs: []string{"ok-*"}}}, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	huge := strings.Repeat("x", 2<<20)
	if err := a.OnStreamRequest(1, &discoverygrpc.DiscoveryRequest{Node: &core.Node{Id: huge}}); err != nil || next.requests != 1 {
		t.Errorf("a 2 MB node id: %v, passed on %d; want it passed on to the bounds check", err, next.requests)
	}
	for i := range 100 {
		err := a.OnStreamRequest(int64(10+i), &discoverygrpc.DiscoveryRequest{Node: &core.Node{Id: "bad-" + strings.Repeat("y", 1000)}})
		if status.Code(err) != codes.PermissionDenied || len(status.Convert(err).Message()) > 1024 {
			t.Fatalf("refusal %d: %v", i, err)
		}
	}
	if n := strings.Count(logs.String(), "xDS stream refused"); n != 1 || logs.Len() > 2048 {
		t.Errorf("100 refusals wrote %d lines, %d bytes; want 1 line under 2 KiB", n, logs.Len())
	}
}
