package ratelimit

import (
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// requestSamples are requests as Envoy and grpc-go clients send them.
func requestSamples() map[string]*rlsv3.RateLimitRequest {
	entry := func(k, v string) *ratelimitv3.RateLimitDescriptor_Entry {
		return &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v}
	}
	return map[string]*rlsv3.RateLimitRequest{
		"empty":          {},
		"one descriptor": {Domain: "rlsbench", Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("user", "u42")}}}},
		"hits and limits": {Domain: "api", HitsAddend: 3, Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("tenant", "t"), entry("criticality", "SHEDDABLE")},
				Limit:      &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 7, Unit: typev3.RateLimitUnit_MINUTE},
				HitsAddend: wrapperspb.UInt64(0), IsNegativeHits: true},
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("k", "")}, Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{}},
			{},
		}},
		"unicode": {Domain: "dömain", Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry("ключ", "値")}}}},
	}
}

// The fast path takes every request proto.Marshal writes (but
// unit_multiplier) and decodes it as proto.Unmarshal does.
func TestDecodeRequest(t *testing.T) {
	for name, want := range requestSamples() {
		t.Run(name, func(t *testing.T) {
			b, err := proto.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			got := new(rlsv3.RateLimitRequest)
			if !decodeRequest(b, got) {
				t.Fatal("decodeRequest refused a request proto.Marshal wrote")
			}
			if !proto.Equal(got, want) {
				t.Errorf("decodeRequest = %v, want %v", got, want)
			}
		})
	}
	for name, b := range map[string][]byte{
		"unknown field":     {0x20, 1},                   // field 4, varint
		"invalid utf-8":     {0x0a, 2, 0xff, 0xfe},       // domain
		"truncated":         {0x0a, 5, 'a'},              // domain longer than the message
		"wrong wire type":   {0x08, 1},                   // domain as a varint
		"unit multiplier":   {0x12, 4, 0x12, 2, 0x1a, 0}, // descriptor { limit { unit_multiplier {} } }
		"limit given twice": {0x12, 4, 0x12, 0, 0x12, 0},
	} {
		if decodeRequest(b, new(rlsv3.RateLimitRequest)) {
			t.Errorf("%s: decodeRequest took % x, which proto.Unmarshal must decide", name, b)
		}
	}
}

// Whatever decodeRequest accepts, proto.Unmarshal decodes to an equal
// message.
func FuzzDecodeRequest(f *testing.F) {
	for _, r := range requestSamples() {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x12, 4, 0x12, 0, 0x12, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		got := new(rlsv3.RateLimitRequest)
		if !decodeRequest(b, got) {
			return
		}
		want := new(rlsv3.RateLimitRequest)
		if err := proto.Unmarshal(b, want); err != nil {
			t.Fatalf("decodeRequest took % x, proto.Unmarshal fails: %v", b, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("% x: decodeRequest = %v, proto.Unmarshal = %v", b, got, want)
		}
	})
}
