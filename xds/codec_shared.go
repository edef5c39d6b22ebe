package xds

import (
	"fmt"
	"sync"
	"time"
	"unsafe"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The responses of a push or a connect storm differ only in their nonce
// (set per stream): the nodes of a group are sent the same resources
// under the same version, and xdscache hands them one shared slice of
// those resources. The codec encodes such a response's head (version and
// resources, fields 1 and 2, most of its bytes) once, in a pooled buffer
// that every node's message refers to (grpc-go's buffers are reference
// counted), and only the tail (type URL, nonce, removals...) per node. The
// bytes written are those of the whole message: protobuf encodes fields
// in number order, and a message is the concatenation of its fields.
// Without it, 10,000 nodes of a full push each held their own copy of
// the same 86 KiB until written.

// headFields is the number of the last field in a response's head.
const headFields = 2

// minSharedHead is the smallest head worth sharing: smaller ones are
// encoded per node, as grpc-go would (not pooled).
const minSharedHead = 1 << 10

// heads keeps the last few shared heads, by the identity of their
// resources slice, version and type URL. A head is shared from the second
// response that has it on (a response of its own, a named subscription's
// for instance, is encoded whole, as before): that node encodes it, and
// the nodes that need it meanwhile wait for it rather than encode it too
// (a connect storm starts with 10,000 of them at once). A kept head is
// dropped after headLife (or when newer ones take its place), so that
// its bytes, counted by the pending budget while kept, do not stay held
// once the push that shared it is over.
type heads struct {
	mu       sync.Mutex
	slots    [8]*head
	next     int
	seen     [8]*head // keys of the last responses encoded whole
	nextSeen int
}

// headLife is how long a head is kept: a push or a connect storm of
// 10,000 nodes is written in a few seconds; one that lasts longer
// encodes the head again.
var headLife = time.Second // a var for tests (export_test.go)

// head is one shared encoding. keep holds the resources slice, so that
// its identity stays its own while the head is kept.
type head struct {
	data         unsafe.Pointer
	n            int
	version, url string
	keep         any
	ready        chan struct{} // closed once done
	done         bool          // encoded (or not shared: buf nil)
	evicted      bool          // no longer kept
	buf          mem.Buffer    // the memo's reference, while kept; nil: encode whole
}

func (h *head) same(o *head) bool {
	return h.data == o.data && h.n == o.n && h.version == o.version && h.url == o.url
}

// headKey is what identifies the head of a response: its resources slice
// (data pointer, length), version and type URL; ok is false for other
// messages and for responses without resources.
func headKey(m proto.Message) (h *head, ok bool) {
	switch r := m.(type) {
	case *discoverygrpc.DiscoveryResponse:
		h = &head{data: unsafe.Pointer(unsafe.SliceData(r.Resources)), n: len(r.Resources), version: r.VersionInfo,
			url: r.TypeUrl, keep: r.Resources}
	case *discoverygrpc.DeltaDiscoveryResponse:
		h = &head{data: unsafe.Pointer(unsafe.SliceData(r.Resources)), n: len(r.Resources), version: r.SystemVersionInfo,
			url: r.TypeUrl, keep: r.Resources}
	default:
		return nil, false
	}
	return h, h.n > 0
}

// marshal encodes m as a shared head and its own tail; ok is false when m
// is not a response whose head is shared (the caller encodes it whole).
// pool gives the buffer of a new head, of the given size.
func (hs *heads) marshal(m proto.Message, pool func(size int) mem.BufferPool) (bs mem.BufferSlice, ok bool, err error) {
	key, ok := headKey(m)
	if !ok {
		return nil, false, nil
	}
	buf, build := hs.get(key)
	if build != nil {
		if buf, err = hs.build(build, m, pool); err != nil {
			return nil, true, err
		}
	}
	if buf == nil {
		return nil, false, nil
	}
	tail, err := proto.MarshalOptions{}.Marshal(tailOf(m))
	if err != nil {
		buf.Free()
		return nil, true, fmt.Errorf("xds: encoding %T: %w", m, err)
	}
	return mem.BufferSlice{buf, mem.SliceBuffer(tail)}, true, nil
}

// get returns the kept head of key, with a reference for the caller, once
// encoded; or, if none is kept, a new kept head for the caller to build.
// Both nil: the head of key is not shared.
func (hs *heads) get(key *head) (mem.Buffer, *head) {
	for {
		hs.mu.Lock()
		var h *head
		for _, o := range hs.slots {
			if o != nil && o.same(key) {
				h = o
				break
			}
		}
		switch {
		case h == nil && !hs.saw(key):
			hs.mu.Unlock()
			return nil, nil
		case h == nil:
			key.ready = make(chan struct{})
			hs.keep(key)
			hs.mu.Unlock()
			return nil, key
		case h.done:
			if h.buf != nil {
				h.buf.Ref()
			}
			hs.mu.Unlock()
			return h.buf, nil
		}
		hs.mu.Unlock()
		<-h.ready // then look again: it may be gone meanwhile
	}
}

// saw reports whether a response with key's head was encoded whole
// lately, noting that this one is if not. Called with hs.mu held.
func (hs *heads) saw(key *head) bool {
	for _, o := range hs.seen {
		if o != nil && o.same(key) {
			return true
		}
	}
	hs.seen[hs.nextSeen] = &head{data: key.data, n: key.n, version: key.version, url: key.url, keep: key.keep}
	hs.nextSeen = (hs.nextSeen + 1) % len(hs.seen)
	return false
}

// keep keeps h in place of the oldest head. Called with hs.mu held.
func (hs *heads) keep(h *head) {
	if old := hs.slots[hs.next]; old != nil {
		old.drop()
	}
	hs.slots[hs.next] = h
	hs.next = (hs.next + 1) % len(hs.slots)
}

// drop stops keeping h, dropping the memo's reference to its buffer.
// Called with hs.mu held.
func (h *head) drop() {
	h.evicted = true
	if h.buf != nil {
		h.buf.Free()
		h.buf = nil
	}
}

// expire drops h, if still kept.
func (hs *heads) expire(h *head) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for i, o := range hs.slots {
		if o == h {
			hs.slots[i] = nil
			h.drop()
		}
	}
}

// build encodes h's head from m and returns it with a reference for the
// caller (nil if it is too small to share), keeping one for the memo
// while h is kept.
func (hs *heads) build(h *head, m proto.Message, pool func(size int) mem.BufferPool) (mem.Buffer, error) {
	var buf mem.Buffer
	var err error
	hd := part(m, true)
	if size := proto.Size(hd); size >= minSharedHead {
		p := pool(size)
		b := p.Get(size)
		if _, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend((*b)[:0], hd); err != nil {
			p.Put(b)
			err = fmt.Errorf("xds: encoding %T: %w", m, err)
		} else {
			buf = mem.NewBuffer(b, p)
		}
	}
	hs.mu.Lock()
	h.done = true
	if buf != nil && !h.evicted {
		buf.Ref()
		h.buf = buf
		time.AfterFunc(headLife, func() { hs.expire(h) })
	}
	hs.mu.Unlock()
	close(h.ready)
	return buf, err
}

// tailOf is m's tail (its fields after headFields): a new message
// sharing m's field values, built field by field for the two responses
// (TestCodecTailHasEveryField keeps the lists whole), else by reflection.
func tailOf(m proto.Message) proto.Message {
	if len(m.ProtoReflect().GetUnknown()) == 0 {
		switch r := m.(type) {
		case *discoverygrpc.DiscoveryResponse:
			return &discoverygrpc.DiscoveryResponse{Canary: r.Canary, TypeUrl: r.TypeUrl, Nonce: r.Nonce, ControlPlane: r.ControlPlane,
				ResourceErrors: r.ResourceErrors}
		case *discoverygrpc.DeltaDiscoveryResponse:
			return &discoverygrpc.DeltaDiscoveryResponse{TypeUrl: r.TypeUrl, Nonce: r.Nonce, RemovedResources: r.RemovedResources,
				RemovedResourceNames: r.RemovedResourceNames, ControlPlane: r.ControlPlane, ResourceErrors: r.ResourceErrors}
		}
	}
	return part(m, false)
}

// part is m's head (fields up to headFields) or its tail (the others,
// and unknown fields): a new message sharing m's field values.
func part(m proto.Message, headPart bool) proto.Message {
	r := m.ProtoReflect()
	p := r.New()
	r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if (fd.Number() <= headFields) == headPart {
			p.Set(fd, v)
		}
		return true
	})
	if !headPart {
		p.SetUnknown(r.GetUnknown())
	}
	return p.Interface()
}
