package xds

import (
	"fmt"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// codec is grpc-go's protobuf codec ("proto") over buffers; the encoded
// messages it pools are bounded by budget (nil: not bounded).
type codec struct{ budget *sendBudget }

func (codec) Name() string { return "proto" }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("xds: cannot encode %T: not a protobuf message", v)
	}
	size := proto.Size(m)
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := proto.MarshalOptions{UseCachedSize: true}.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("xds: encoding %T: %w", v, err)
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	var pool mem.BufferPool = buffers
	if c.budget != nil {
		pool = c.budget.hold(size) // before the buffer exists: waiting costs no memory
	}
	buf := pool.Get(size)
	if _, err := (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend((*buf)[:0], m); err != nil {
		pool.Put(buf)
		return nil, fmt.Errorf("xds: encoding %T: %w", v, err)
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
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
