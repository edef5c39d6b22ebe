package main

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// rawCodec sends requests already in wire format (*rawRequest) and parses
// responses straight from the wire into a *decisions, so the hot loop
// builds no protobuf messages. Its name is "proto": the content type is
// application/grpc+proto, which every gRPC server reads as protobuf.
type rawCodec struct{}

// rawRequest is a RateLimitRequest in protobuf wire format.
type rawRequest struct{ b []byte }

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	r, ok := v.(*rawRequest)
	if !ok {
		return nil, fmt.Errorf("rlsbench: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.Copy(r.b, mem.DefaultBufferPool())}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	d, ok := v.(*decisions)
	if !ok {
		return fmt.Errorf("rlsbench: cannot unmarshal into %T", v)
	}
	d.buf = d.buf[:0]
	for _, b := range data {
		d.buf = append(d.buf, b.ReadOnlyData()...)
	}
	return d.parse(d.buf)
}

// Codes of envoy.service.ratelimit.v3.RateLimitResponse.Code.
const (
	codeOK        = 1
	codeOverLimit = 2
)

// Field numbers of RateLimitResponse and its DescriptorStatus.
const (
	fieldResponseOverallCode = 1
	fieldResponseStatuses    = 2
	fieldStatusCode          = 1
	fieldStatusCurrentLimit  = 2
)

// decisions is one response, parsed: the overall code and, per
// descriptor status, how many were OK (with a limit), OVER_LIMIT, OK
// without a limit (no rule matched, or an unlimited rule) or something
// else.
type decisions struct {
	overall                      int32
	ok, over, unlimited, unknown int
	buf                          []byte // reused across responses
}

var errMalformed = errors.New("rlsbench: malformed RateLimitResponse")

// parse reads a RateLimitResponse in wire format.
func (d *decisions) parse(b []byte) error {
	d.overall, d.ok, d.over, d.unlimited, d.unknown = 0, 0, 0, 0, 0
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		switch {
		case num == fieldResponseOverallCode && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return errMalformed
			}
			d.overall, b = int32(v), b[n:]
		case num == fieldResponseStatuses && typ == protowire.BytesType:
			s, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errMalformed
			}
			code, limited, err := parseStatus(s)
			if err != nil {
				return err
			}
			switch {
			case code == codeOverLimit:
				d.over++
			case code == codeOK && limited:
				d.ok++
			case code == codeOK:
				d.unlimited++
			default:
				d.unknown++
			}
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return errMalformed
			}
			b = b[n:]
		}
	}
	return nil
}

// parseStatus returns a DescriptorStatus's code and whether it carries a
// current_limit.
func parseStatus(b []byte) (code int32, limited bool, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false, errMalformed
		}
		b = b[n:]
		if num == fieldStatusCode && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, false, errMalformed
			}
			code, b = int32(v), b[n:]
			continue
		}
		if num == fieldStatusCurrentLimit {
			limited = true
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, false, errMalformed
		}
		b = b[n:]
	}
	return code, limited, nil
}
