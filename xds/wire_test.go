package xds

import (
	"bytes"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestWireSharesItsBytes checks that marshaling a served resource hands out
// the one encoding every node shares (no copy per node), that appending it
// to something copies, and that sizes and embedding in an Any agree with
// the built resource.
func TestWireSharesItsBytes(t *testing.T) {
	items, err := translate(Service(world(1, 5).Services[0], ServiceSettings{}, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(it.res)
		a, err := cache.MarshalResource(it.wire)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := cache.MarshalResource(it.wire)
		if !bytes.Equal(a, want) || &a[0] != &b[0] {
			t.Errorf("%T: two marshalings are not the same shared bytes", it.res)
		}
		if cap(a) != len(a) {
			t.Errorf("%T: shared bytes have spare capacity %d: an append would write into them", it.res, cap(a)-len(a))
		}
		prefix := []byte{1, 2, 3}
		got, err := proto.MarshalOptions{}.MarshalAppend(prefix, it.wire)
		if err != nil || !bytes.Equal(got[3:], want) || &got[3] == &a[0] {
			t.Errorf("%T: MarshalAppend = %v, want a copy after the prefix", it.res, err)
		}
		if proto.Size(it.wire) != len(want) {
			t.Errorf("%T: size %d, want %d", it.res, proto.Size(it.wire), len(want))
		}
		in := &anypb.Any{TypeUrl: "t", Value: a}
		enc, err := proto.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var out anypb.Any
		if err := proto.Unmarshal(enc, &out); err != nil || !bytes.Equal(out.Value, want) {
			t.Errorf("%T: an Any of it does not round-trip (%v)", it.res, err)
		}
	}
}

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
