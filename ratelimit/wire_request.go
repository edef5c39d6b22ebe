package ratelimit

import (
	"unicode/utf8"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The wire decoding of requests, without reflection: decodeRequest
// fills a reset request from the fields it knows in the form
// proto.Marshal writes them, and reports false on anything else (unknown
// fields, a wrong wire type, a singular message twice, invalid UTF-8,
// unit_multiplier, malformed bytes), for proto.Unmarshal to decide. What
// it accepts it decodes exactly as proto.Unmarshal does
// (FuzzDecodeRequest). Every string of the request shares one
// allocation.

// decodeRequest decodes b into req, which must be reset.
func decodeRequest(b []byte, req *rlsv3.RateLimitRequest) bool {
	s := string(b)
	nd, ok := countField(b, 2)
	if !ok {
		return false
	}
	if nd > 0 {
		ds := make([]ratelimitv3.RateLimitDescriptor, nd)
		req.Descriptors = make([]*ratelimitv3.RateLimitDescriptor, 0, nd)
		for i := range ds {
			req.Descriptors = append(req.Descriptors, &ds[i])
		}
	}
	k := 0
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return false
		}
		off += n
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, ok := consumeString(b, s, &off)
			if !ok {
				return false
			}
			req.Domain = v
		case num == 2 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b[off:])
			if n < 0 || !decodeDescriptor(v, s[off+n-len(v):off+n], req.Descriptors[k]) {
				return false
			}
			off += n
			k++
		case num == 3 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b[off:])
			if n < 0 {
				return false
			}
			req.HitsAddend, off = uint32(v), off+n
		default:
			return false
		}
	}
	return true
}

// countField counts the occurrences of field num (of any wire type) in
// b; ok is false when b does not parse.
func countField(b []byte, num protowire.Number) (int, bool) {
	c := 0
	for len(b) > 0 {
		n0, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		m := protowire.ConsumeFieldValue(n0, typ, b[n:])
		if m < 0 {
			return 0, false
		}
		if n0 == num {
			c++
		}
		b = b[n+m:]
	}
	return c, true
}

// consumeString consumes a length-delimited valid UTF-8 string at *off
// of b, returning it as a substring of s (b's content).
func consumeString(b []byte, s string, off *int) (string, bool) {
	v, n := protowire.ConsumeBytes(b[*off:])
	if n < 0 {
		return "", false
	}
	end := *off + n
	str := s[end-len(v) : end]
	*off = end
	return str, utf8.ValidString(str)
}

// decodeDescriptor decodes a RateLimitDescriptor (b, and s its content)
// into d.
func decodeDescriptor(b []byte, s string, d *ratelimitv3.RateLimitDescriptor) bool {
	ne, ok := countField(b, 1)
	if !ok {
		return false
	}
	var es []ratelimitv3.RateLimitDescriptor_Entry
	if ne > 0 {
		es = make([]ratelimitv3.RateLimitDescriptor_Entry, ne)
		d.Entries = make([]*ratelimitv3.RateLimitDescriptor_Entry, 0, ne)
	}
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return false
		}
		off += n
		v, m := protowire.ConsumeBytes(b[off:])
		if typ == protowire.VarintType {
			var x uint64
			x, m = protowire.ConsumeVarint(b[off:])
			if num != 4 || m < 0 {
				return false
			}
			d.IsNegativeHits, off = x != 0, off+m
			continue
		}
		if typ != protowire.BytesType || m < 0 {
			return false
		}
		sub := s[off+m-len(v) : off+m]
		off += m
		if !decodeDescriptorField(num, v, sub, d, es) {
			return false
		}
	}
	return true
}

// decodeDescriptorField decodes length-delimited field num of a
// descriptor, v (sub: the same bytes as a string), into d; an entry takes
// the next element of es. False when the field is unknown, repeated where
// it must not be, or malformed.
func decodeDescriptorField(num protowire.Number, v []byte, sub string, d *ratelimitv3.RateLimitDescriptor, es []ratelimitv3.RateLimitDescriptor_Entry) bool {
	switch num {
	case 1:
		e := &es[len(d.Entries)]
		if !decodeEntry(v, sub, e) {
			return false
		}
		d.Entries = append(d.Entries, e)
	case 2:
		if d.Limit != nil {
			return false
		}
		d.Limit = new(ratelimitv3.RateLimitDescriptor_RateLimitOverride)
		return decodeOverride(v, d.Limit)
	case 3:
		if d.HitsAddend != nil {
			return false
		}
		d.HitsAddend = new(wrapperspb.UInt64Value)
		return decodeVarintFields(v, func(num protowire.Number, x uint64) bool {
			d.HitsAddend.Value = x
			return num == 1
		})
	default:
		return false
	}
	return true
}

func decodeEntry(b []byte, s string, e *ratelimitv3.RateLimitDescriptor_Entry) bool {
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 || typ != protowire.BytesType || (num != 1 && num != 2) {
			return false
		}
		off += n
		v, ok := consumeString(b, s, &off)
		if !ok {
			return false
		}
		if num == 1 {
			e.Key = v
		} else {
			e.Value = v
		}
	}
	return true
}

func decodeOverride(b []byte, o *ratelimitv3.RateLimitDescriptor_RateLimitOverride) bool {
	return decodeVarintFields(b, func(num protowire.Number, x uint64) bool {
		switch num {
		case 1:
			o.RequestsPerUnit = uint32(x)
		case 2:
			o.Unit = typev3.RateLimitUnit(int32(x))
		default:
			return false
		}
		return true
	})
}

// decodeVarintFields calls set for every field of b, all varints; false
// if one is not, or set says no.
func decodeVarintFields(b []byte, set func(protowire.Number, uint64) bool) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.VarintType {
			return false
		}
		x, m := protowire.ConsumeVarint(b[n:])
		if m < 0 || !set(num, x) {
			return false
		}
		b = b[n+m:]
	}
	return true
}
