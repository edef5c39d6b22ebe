package ratelimit

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// checkWire asserts that the codec encodes r as proto.Marshal does, byte
// for byte, and that it decodes back to r.
func checkWire(t *testing.T, r *rlsv3.RateLimitResponse) {
	t.Helper()
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	data, err := lenientCodec{base: encoding.GetCodecV2("proto")}.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	got := data.Materialize()
	data.Free()
	if !bytes.Equal(got, want) {
		t.Fatalf("codec encodes %v as\n%x, proto.Marshal as\n%x", r, got, want)
	}
	if encodable(r) && sizeResponse(r) != len(want) {
		t.Fatalf("sizeResponse = %d, encoded %d bytes", sizeResponse(r), len(want))
	}
	back := &rlsv3.RateLimitResponse{}
	if err := proto.Unmarshal(got, back); err != nil || !proto.Equal(back, r) {
		t.Fatalf("decodes as %v (%v), want %v", back, err, r)
	}
}

func TestWireResponse(t *testing.T) {
	for name, r := range map[string]*rlsv3.RateLimitResponse{
		"empty":        {},
		"ok, no limit": {OverallCode: rlsv3.RateLimitResponse_OK, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: rlsv3.RateLimitResponse_OK}}},
		"over limit with everything": {OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT,
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
				{Code: rlsv3.RateLimitResponse_OVER_LIMIT, CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{Name: "per-tenant",
					RequestsPerUnit: math.MaxUint32, Unit: rlsv3.RateLimitResponse_RateLimit_YEAR},
					DurationUntilReset: &durationpb.Duration{Seconds: 59, Nanos: 999_999_999}},
				{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32},
				{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{}, DurationUntilReset: &durationpb.Duration{}},
			},
			ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: HeaderLimit, Value: `10, 10;w=60;name="x"`}, {Key: HeaderReset, Value: ""}}},
		"negative duration": {Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{DurationUntilReset: &durationpb.Duration{Seconds: -1, Nanos: -5}}}},
		// Fields the service never sets: the base codec encodes them.
		"raw body":         {RawBody: []byte("x")},
		"dynamic metadata": {DynamicMetadata: &structpb.Struct{}},
		"unit multiplier": {Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{
			UnitMultiplier: wrapperspb.UInt32(2)}}}},
		"raw header value": {ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: "k", RawValue: []byte("v")}}},
	} {
		t.Run(name, func(t *testing.T) { checkWire(t, r) })
	}
}

// Property: random responses of the shapes the service builds encode as
// proto.Marshal encodes them.
func TestWireResponseRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	u32 := func() uint32 {
		return []uint32{0, 1, 127, 128, 16383, 16384, math.MaxUint32, rng.Uint32()}[rng.IntN(8)]
	}
	str := func() string { return []string{"", "a", string(make([]byte, 200)), "näme"}[rng.IntN(4)] }
	for range 2000 {
		r := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_Code(rng.IntN(3))}
		for range rng.IntN(5) {
			st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_Code(rng.IntN(3)), LimitRemaining: u32()}
			if rng.IntN(3) > 0 {
				st.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{Name: str(), RequestsPerUnit: u32(),
					Unit: rlsv3.RateLimitResponse_RateLimit_Unit(rng.IntN(8))}
			}
			if rng.IntN(3) > 0 {
				st.DurationUntilReset = &durationpb.Duration{Seconds: int64(u32()) * int64(rng.IntN(3)-1), Nanos: int32(rng.IntN(1e9))}
			}
			r.Statuses = append(r.Statuses, st)
		}
		for range rng.IntN(4) {
			r.ResponseHeadersToAdd = append(r.ResponseHeadersToAdd, &corev3.HeaderValue{Key: str(), Value: str()})
		}
		checkWire(t, r)
	}
}
