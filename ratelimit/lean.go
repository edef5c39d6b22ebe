package ratelimit

import (
	"context"
	"sync"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// RLSPath is the HTTP/2 :path of ShouldRateLimit, the one method a lean
// server (ratelimit.server lean, package h2rpc) serves with Call.
const RLSPath = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

var requests = sync.Pool{New: func() any { return new(rlsv3.RateLimitRequest) }}

// Call answers one encoded RateLimitRequest: it appends the encoded
// RateLimitResponse to out, or returns a gRPC status error, as
// ShouldRateLimit does (a request that does not decode is
// InvalidArgument).
func (s *Service) Call(ctx context.Context, msg, out []byte) ([]byte, error) {
	req := requests.Get().(*rlsv3.RateLimitRequest)
	defer func() { proto.Reset(req); requests.Put(req) }()
	if !decodeRequest(msg, req) {
		proto.Reset(req)
		if err := (proto.UnmarshalOptions{}).Unmarshal(msg, req); err != nil {
			proto.Reset(req)
			req.Domain = malformedMarker + err.Error()
		}
	}
	resp, err := s.ShouldRateLimit(ctx, req)
	if err != nil {
		return out, err
	}
	if encodable(resp) {
		return appendResponse(out, resp), nil
	}
	if out, err = (proto.MarshalOptions{}).MarshalAppend(out, resp); err != nil {
		return out, status.Errorf(codes.Internal, "ratelimit: encoding the response: %v", err)
	}
	return out, nil
}
