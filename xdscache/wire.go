package xdscache

import (
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/runtime/protoiface"
	"google.golang.org/protobuf/types/known/anypb"
)

// wire is a resource as the cache serves it: its deterministic marshaling,
// encoded once per distinct resource and version, shared by every node
// and every response that carries it.
//
// Responses (nodeCache) carry a wire's Any (SotW) or discovery Resource
// (delta), made once with it: a push costs each node no encoding, no
// copy and no Any of its own, only pointers to what the whole fleet
// shares, and nodes hold no copies between pushes. Marshaling a wire
// returns its bytes themselves (for the rest: fetches, decode). The bytes
// are never written to: they are only read (the codec copies them into
// the frame).
//
// Everything else (its type, descriptor, reflection, decoding back in
// decode) is that of an empty message of the resource's type carrying
// the bytes as unknown fields, so the slow paths (proto.Size, Range,
// GetUnknown) see exactly the same bytes.
type wire struct {
	refl wireReflect // its reflection, made once (ProtoReflect is called per marshaling)
	b    []byte
	// any and delta are the resource as SotW and delta responses carry
	// it (delta: under its name and content hash), made once and shared
	// by every response that carries it (nodeCache). Nothing writes to
	// them; concurrent encodings of the messages holding them are safe.
	any   *anypb.Any
	delta *discoverygrpc.Resource
}

// NewWire returns the wire form of res, whose deterministic marshaling is
// b, served under name with content hash hash.
func NewWire(res types.Resource, b []byte, name, hash string) types.Resource {
	m := res.ProtoReflect().Type().New()
	m.SetUnknown(protoreflect.RawFields(b))
	w := &wire{b: b}
	w.refl = wireReflect{Message: m, w: w}
	w.any = &anypb.Any{TypeUrl: resource.APITypePrefix + string(m.Descriptor().FullName()), Value: b}
	w.delta = &discoverygrpc.Resource{Name: name, Version: hash, Resource: w.any}
	return w
}

// ProtoReflect implements proto.Message.
func (w *wire) ProtoReflect() protoreflect.Message { return &w.refl }

// wireReflect is w's reflection: that of an empty message of its type
// carrying its bytes as unknown fields, but it
// marshals to w.b and reports w as its message.
type wireReflect struct {
	protoreflect.Message
	w *wire
}

func (r *wireReflect) Interface() protoreflect.ProtoMessage { return r.w }

func (r *wireReflect) ProtoMethods() *protoiface.Methods { return &wireMethods }

// wireMethods marshal a wire by handing out its bytes (appending them to a
// buffer that already holds something). There is no Size method, so that
// proto.Marshal does not allocate a buffer to fill: sizes come from the
// slow path, which counts the same bytes as unknown fields.
var wireMethods = protoiface.Methods{
	Flags: protoiface.SupportMarshalDeterministic,
	Marshal: func(in protoiface.MarshalInput) (protoiface.MarshalOutput, error) {
		b := in.Message.(*wireReflect).w.b
		if len(in.Buf) == 0 {
			return protoiface.MarshalOutput{Buf: b[:len(b):len(b)]}, nil // full slice: an append copies
		}
		return protoiface.MarshalOutput{Buf: append(in.Buf, b...)}, nil
	},
	// The bytes are a marshaling of a built, validated resource.
	CheckInitialized: func(protoiface.CheckInitializedInput) (protoiface.CheckInitializedOutput, error) {
		return protoiface.CheckInitializedOutput{}, nil
	},
}
