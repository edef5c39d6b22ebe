package ratelimit

import (
	"context"
	"testing"

	rlcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// FuzzShouldRateLimit feeds ShouldRateLimit whatever a gRPC peer can
// send (any RateLimitRequest in wire format): it answers, or refuses with
// InvalidArgument; an answer has one status per descriptor and an overall
// code of OK or OVER_LIMIT, encoded by the server's codec as
// proto.Marshal encodes it.
func FuzzShouldRateLimit(f *testing.F) {
	seeds := []*rlsv3.RateLimitRequest{
		{Domain: "d", Descriptors: []*rlcommonv3.RateLimitDescriptor{{Entries: []*rlcommonv3.RateLimitDescriptor_Entry{{Key: "k", Value: "a"}}}}},
		{Domain: "d", HitsAddend: 5, Descriptors: []*rlcommonv3.RateLimitDescriptor{
			{Entries: []*rlcommonv3.RateLimitDescriptor_Entry{{Key: "tenant", Value: "t"}, {Key: "path", Value: "/api/v1"}}},
			{Entries: []*rlcommonv3.RateLimitDescriptor_Entry{{Key: "shadow", Value: "x"}}}}},
		{Domain: "d", Descriptors: []*rlcommonv3.RateLimitDescriptor{{Entries: []*rlcommonv3.RateLimitDescriptor_Entry{{Key: "k"}},
			Limit: &rlcommonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: 2}}}},
		{Domain: "unknown", Descriptors: []*rlcommonv3.RateLimitDescriptor{{}}},
		{},
	}
	for _, r := range seeds {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	s := newFuzzService(f)
	f.Fuzz(func(t *testing.T, wire []byte) {
		req := &rlsv3.RateLimitRequest{}
		if proto.Unmarshal(wire, req) != nil {
			return // gRPC refuses it before the service sees it
		}
		resp, err := s.ShouldRateLimit(context.Background(), req)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("error %v for %v, want InvalidArgument", err, req)
			}
			return
		}
		if len(resp.Statuses) != len(req.Descriptors) {
			t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(req.Descriptors))
		}
		if c := resp.OverallCode; c != rlsv3.RateLimitResponse_OK && c != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("overall code %v", c)
		}
		checkWire(t, resp) // the codec encodes it as proto.Marshal does
	})
}
