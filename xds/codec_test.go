package xds

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestBufferSizes checks that pooled buffers waste at most 1/8 of a
// response above 32 KiB, and that the pool hands out buffers that fit.
func TestBufferSizes(t *testing.T) {
	sizes := bufferSizes()
	if sizes[len(sizes)-1] != maxPooledBuffer {
		t.Fatalf("largest pooled size %d, want %d", sizes[len(sizes)-1], maxPooledBuffer)
	}
	for _, n := range []int{1, 300, 32 << 10, 32<<10 + 1, 86 << 10, 700 << 10, maxPooledBuffer, maxPooledBuffer + 1} {
		b := buffers.Get(n)
		if len(*b) != n {
			t.Errorf("Get(%d): len %d", n, len(*b))
		}
		if n > 32<<10 && cap(*b) > n+n/8 {
			t.Errorf("Get(%d): cap %d wastes more than 1/8", n, cap(*b))
		}
		buffers.Put(b)
	}
}

// TestCodecSharesHeads: from the second response carrying the same
// resources slice on, responses share one encoding of their head, and
// each is encoded byte for byte as protobuf encodes it whole, with its own
// nonce.
func TestCodecSharesHeads(t *testing.T) {
	res := make([]*discoverygrpc.Resource, 20)
	for i := range res {
		a, err := anypb.New(&wrapperspb.StringValue{Value: strings.Repeat("x", 200) + strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		res[i] = &discoverygrpc.Resource{Name: "r" + strconv.Itoa(i), Version: "h" + strconv.Itoa(i), Resource: a}
	}
	c := codec{heads: &heads{}}
	msg := func(res []*discoverygrpc.Resource, nonce string) *discoverygrpc.DeltaDiscoveryResponse {
		return &discoverygrpc.DeltaDiscoveryResponse{SystemVersionInfo: "v1", Resources: res, TypeUrl: "type.googleapis.com/x",
			Nonce: nonce, RemovedResources: []string{"gone"}}
	}
	var heads [][]byte
	for i, m := range []*discoverygrpc.DeltaDiscoveryResponse{msg(res, "1"), msg(res, "2"), msg(res, "3"), msg(slices.Clone(res), "4")} {
		bs, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := bs.Materialize(); !bytes.Equal(got, want) {
			t.Errorf("message %d: encoded %d bytes unlike protobuf's %d", i, len(got), len(want))
		}
		if shared := len(bs) == 2; shared != (i == 1 || i == 2) {
			t.Errorf("message %d: %d buffers (a shared head and a tail: 2)", i, len(bs))
		}
		heads = append(heads, bs[0].ReadOnlyData())
		bs.Free()
	}
	if &heads[1][0] != &heads[2][0] {
		t.Error("two responses with the same resources do not share their head")
	}
}

// TestCodecTailHasEveryField: a response with every field set encodes,
// head and tail, as protobuf encodes it whole; a field added to the
// responses and missing from tailOf's lists fails it.
func TestCodecTailHasEveryField(t *testing.T) {
	for _, m := range []proto.Message{&discoverygrpc.DiscoveryResponse{}, &discoverygrpc.DeltaDiscoveryResponse{}} {
		r := m.ProtoReflect()
		fields := r.Descriptor().Fields()
		for i := range fields.Len() {
			fill(r, fields.Get(i))
		}
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		head, err := proto.Marshal(part(m, true))
		if err != nil {
			t.Fatal(err)
		}
		tail, err := proto.Marshal(tailOf(m))
		if err != nil {
			t.Fatal(err)
		}
		if got := append(head, tail...); !bytes.Equal(got, want) {
			t.Errorf("%T: head and tail are %d bytes, protobuf's whole message %d", m, len(got), len(want))
		}
	}
}

// fill sets field fd of r to a value that is not its default.
func fill(r protoreflect.Message, fd protoreflect.FieldDescriptor) {
	switch {
	case fd.IsList() && fd.Message() != nil:
		r.Mutable(fd).List().Append(protoreflect.ValueOfMessage(r.Mutable(fd).List().NewElement().Message()))
	case fd.IsList():
		r.Mutable(fd).List().Append(protoreflect.ValueOfString("x"))
	case fd.Message() != nil:
		r.Mutable(fd)
	case fd.Kind() == protoreflect.BoolKind:
		r.Set(fd, protoreflect.ValueOfBool(true))
	default:
		r.Set(fd, protoreflect.ValueOfString(string(fd.Name())))
	}
}
