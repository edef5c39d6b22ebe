package xdscache

import (
	"bytes"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-server/xds-server/translate"
)

// TestWireSharesItsBytes checks that marshaling a served resource hands out
// the one encoding every node shares (no copy per node), that appending it
// to something copies, and that sizes and embedding in an Any agree with
// the built resource.
func TestWireSharesItsBytes(t *testing.T) {
	items, err := encode(translate.Service(world(1, 5).Services[0], translate.ServiceSettings{}, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(it.Res)
		a, err := cache.MarshalResource(it.Wire)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := cache.MarshalResource(it.Wire)
		if !bytes.Equal(a, want) || &a[0] != &b[0] {
			t.Errorf("%T: two marshalings are not the same shared bytes", it.Res)
		}
		if cap(a) != len(a) {
			t.Errorf("%T: shared bytes have spare capacity %d: an append would write into them", it.Res, cap(a)-len(a))
		}
		prefix := []byte{1, 2, 3}
		got, err := proto.MarshalOptions{}.MarshalAppend(prefix, it.Wire)
		if err != nil || !bytes.Equal(got[3:], want) || &got[3] == &a[0] {
			t.Errorf("%T: MarshalAppend = %v, want a copy after the prefix", it.Res, err)
		}
		if proto.Size(it.Wire) != len(want) {
			t.Errorf("%T: size %d, want %d", it.Res, proto.Size(it.Wire), len(want))
		}
		in := &anypb.Any{TypeUrl: "t", Value: a}
		enc, err := proto.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var out anypb.Any
		if err := proto.Unmarshal(enc, &out); err != nil || !bytes.Equal(out.Value, want) {
			t.Errorf("%T: an Any of it does not round-trip (%v)", it.Res, err)
		}
	}
}
