package xds

import (
	"fmt"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// codec is grpc-go's protobuf codec ("proto") over buffers; the encoded
// messages it pools are bounded by budget (nil: not bounded). Responses'
// heads are shared between nodes through heads (nil: not shared; see
// codec_shared.go).
type codec struct {
	budget *sendBudget
	heads  *heads
}

func (codec) Name() string { return "proto" }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("xds: cannot encode %T: not a protobuf message", v)
	}
	if c.heads != nil {
		if bs, ok, err := c.heads.marshal(m, c.pool); ok {
			return bs, err
		}
	}
	size := proto.Size(m)
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := proto.MarshalOptions{UseCachedSize: true}.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("xds: encoding %T: %w", v, err)
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	pool := c.pool(size)
	buf := pool.Get(size)
	if _, err := (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend((*buf)[:0], m); err != nil {
		pool.Put(buf)
		return nil, fmt.Errorf("xds: encoding %T: %w", v, err)
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// pool is the pool of a buffer of size bytes about to be encoded: it
// waits for the budget, before the buffer exists (waiting costs no memory).
func (c codec) pool(size int) mem.BufferPool {
	if c.budget != nil {
		return c.budget.hold(size)
	}
	return buffers
}

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("xds: cannot decode into %T: not a protobuf message", v)
	}
	buf := data.MaterializeToBuffer(buffers)
	defer buf.Free()
	if err := proto.Unmarshal(buf.ReadOnlyData(), m); err != nil {
		if markMalformed(m, err) {
			return nil // answered InvalidArgument by the callbacks
		}
		return fmt.Errorf("xds: decoding %T: %w", v, err)
	}
	return nil
}
