package ratelimit

import (
	"strings"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// Register registers the service on a gRPC server. Create the server
// with ServerOptions, so that undecodable requests are InvalidArgument.
func (s *Service) Register(r grpc.ServiceRegistrar) { rlsv3.RegisterRateLimitServiceServer(r, s) }

// ServerOptions are the options of the gRPC server the service is
// registered on.
//
// grpc-go answers a request it cannot decode (invalid UTF-8 in a string,
// a truncated or malformed message) with Internal, before any handler or
// interceptor runs, which tells clients and alerts that the server is
// broken. With these options such a RateLimitRequest decodes as one
// marked malformed, which the service answers InvalidArgument (counted as
// ratelimit_requests_total{result="invalid"}). Other messages decode as
// with grpc-go's own codec.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(lenientCodec{base: encoding.GetCodecV2("proto")})}
}

// malformedMarker starts the domain of a request that did not decode,
// followed by the decoding error. It is not valid UTF-8, so no decoded
// request can have it.
const malformedMarker = "\xff\xfemalformed:"

// lenientCodec is grpc-go's proto codec but for RateLimitRequests that do
// not decode: those become a request whose domain is malformedMarker and
// the error.
type lenientCodec struct{ base encoding.CodecV2 }

func (c lenientCodec) Name() string { return c.base.Name() }

// Marshal encodes the service's responses without reflection (wire.go)
// into a pooled buffer, which grpc-go frees once written; other messages
// go to the base codec.
func (c lenientCodec) Marshal(v any) (mem.BufferSlice, error) {
	resp, ok := v.(*rlsv3.RateLimitResponse)
	if !ok || !encodable(resp) {
		return c.base.Marshal(v)
	}
	pool := mem.DefaultBufferPool()
	size := sizeResponse(resp)
	buf := pool.Get(size)
	*buf = appendResponse((*buf)[:0], resp)
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func (c lenientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.base.Unmarshal(data, v)
	if req, ok := v.(*rlsv3.RateLimitRequest); ok && err != nil {
		proto.Reset(req)
		req.Domain = malformedMarker + err.Error()
		return nil
	}
	return err
}

// malformed returns the decoding error of a request that did not decode.
func malformed(req *rlsv3.RateLimitRequest) (string, bool) {
	return strings.CutPrefix(req.Domain, malformedMarker)
}
