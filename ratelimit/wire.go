package ratelimit

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The wire encoding of the responses the service builds, without
// reflection: the same bytes as proto.Marshal (fields in number order,
// zero scalars omitted) for the fields the service sets. encodable
// reports whether a response has only those; others go to proto.Marshal.

// encodable reports whether appendResponse encodes r completely.
func encodable(r *rlsv3.RateLimitResponse) bool {
	if len(r.RequestHeadersToAdd) > 0 || len(r.RawBody) > 0 || r.DynamicMetadata != nil || r.Quota != nil {
		return false
	}
	for _, st := range r.Statuses {
		if st == nil || st.Quota != nil || (st.CurrentLimit != nil && st.CurrentLimit.UnitMultiplier != nil) {
			return false
		}
	}
	for _, h := range r.ResponseHeadersToAdd {
		if h == nil || len(h.RawValue) > 0 {
			return false
		}
	}
	return true
}

// sizeResponse is the encoded size of an encodable r.
func sizeResponse(r *rlsv3.RateLimitResponse) int {
	n := sizeVarint(1, uint64(r.OverallCode))
	for _, st := range r.Statuses {
		n += sizeMessage(2, sizeStatus(st))
	}
	for _, h := range r.ResponseHeadersToAdd {
		n += sizeMessage(3, sizeHeader(h))
	}
	return n
}

// appendResponse appends the encoding of an encodable r to b.
func appendResponse(b []byte, r *rlsv3.RateLimitResponse) []byte {
	b = appendVarint(b, 1, uint64(r.OverallCode))
	for _, st := range r.Statuses {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sizeStatus(st)))
		b = appendVarint(b, 1, uint64(st.Code))
		if l := st.CurrentLimit; l != nil {
			b = protowire.AppendTag(b, 2, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(sizeLimit(l)))
			b = appendVarint(b, 1, uint64(l.RequestsPerUnit))
			b = appendVarint(b, 2, uint64(l.Unit))
			b = appendString(b, 3, l.Name)
		}
		b = appendVarint(b, 3, uint64(st.LimitRemaining))
		if d := st.DurationUntilReset; d != nil {
			b = protowire.AppendTag(b, 4, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(sizeDuration(d)))
			b = appendVarint(b, 1, uint64(d.Seconds))
			b = appendVarint(b, 2, uint64(int64(d.Nanos))) // int32: sign-extended, as proto.Marshal
		}
	}
	for _, h := range r.ResponseHeadersToAdd {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sizeHeader(h)))
		b = appendString(b, 1, h.Key)
		b = appendString(b, 2, h.Value)
	}
	return b
}

func sizeStatus(st *rlsv3.RateLimitResponse_DescriptorStatus) int {
	n := sizeVarint(1, uint64(st.Code)) + sizeVarint(3, uint64(st.LimitRemaining))
	if st.CurrentLimit != nil {
		n += sizeMessage(2, sizeLimit(st.CurrentLimit))
	}
	if st.DurationUntilReset != nil {
		n += sizeMessage(4, sizeDuration(st.DurationUntilReset))
	}
	return n
}

func sizeLimit(l *rlsv3.RateLimitResponse_RateLimit) int {
	return sizeVarint(1, uint64(l.RequestsPerUnit)) + sizeVarint(2, uint64(l.Unit)) + sizeString(3, l.Name)
}

func sizeDuration(d *durationpb.Duration) int {
	return sizeVarint(1, uint64(d.Seconds)) + sizeVarint(2, uint64(int64(d.Nanos)))
}

func sizeHeader(h *corev3.HeaderValue) int { return sizeString(1, h.Key) + sizeString(2, h.Value) }

// A field of each kind, omitted when zero (proto3 implicit presence).

func sizeVarint(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func sizeString(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

// sizeMessage is the size of a message field (present even when empty).
func sizeMessage(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}
