package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// Workload is what every request carries: Descriptors descriptors in
// Domain, each a single entry Key=ValuePrefix+k with k drawn uniformly
// from [0, Keys), independently per descriptor.
type Workload struct {
	Domain      string
	Key         string
	ValuePrefix string
	Keys        int // distinct values, in [1, 1e9]
	Descriptors int // per request, in [1, 64]
}

// Validate reports the settings that make no workload.
func (w Workload) Validate() error {
	var errs []error
	if w.Domain == "" {
		errs = append(errs, errors.New("rlsbench: empty domain"))
	}
	if w.Key == "" {
		errs = append(errs, errors.New("rlsbench: empty descriptor key"))
	}
	if w.Keys < 1 || w.Keys > 1e9 {
		errs = append(errs, fmt.Errorf("rlsbench: keys %d not in [1, 1e9]", w.Keys))
	}
	if w.Descriptors < 1 || w.Descriptors > 64 {
		errs = append(errs, fmt.Errorf("rlsbench: descriptors per request %d not in [1, 64]", w.Descriptors))
	}
	return errors.Join(errs...)
}

// String describes the workload in a line.
func (w Workload) String() string {
	return fmt.Sprintf("domain %s, %d descriptor(s) per request, %s=%s<k> with k uniform in [0, %d)",
		w.Domain, w.Descriptors, w.Key, w.ValuePrefix, w.Keys)
}

// Field numbers of envoy.service.ratelimit.v3.RateLimitRequest and of
// envoy.extensions.common.ratelimit.v3.RateLimitDescriptor(.Entry).
const (
	fieldRequestDomain      = 1
	fieldRequestDescriptors = 2
	fieldDescriptorEntries  = 1
	fieldEntryKey           = 1
	fieldEntryValue         = 2
)

// AppendRequest appends to dst a RateLimitRequest in protobuf wire format
// with the values given (one per descriptor), using scratch (returned, to
// reuse) for the nested messages. It allocates nothing once dst and
// scratch have grown.
func (w Workload) AppendRequest(dst, scratch []byte, values []int) (req, scratchOut []byte) {
	dst = protowire.AppendTag(dst, fieldRequestDomain, protowire.BytesType)
	dst = protowire.AppendString(dst, w.Domain)
	for _, k := range values {
		// entry = {key, value}; descriptor = {entries: [entry]}
		scratch = scratch[:0]
		scratch = protowire.AppendTag(scratch, fieldEntryKey, protowire.BytesType)
		scratch = protowire.AppendString(scratch, w.Key)
		scratch = protowire.AppendTag(scratch, fieldEntryValue, protowire.BytesType)
		valueLen := len(w.ValuePrefix) + decimalLen(k)
		scratch = protowire.AppendVarint(scratch, uint64(valueLen))
		scratch = append(scratch, w.ValuePrefix...)
		scratch = strconv.AppendInt(scratch, int64(k), 10)
		entryLen := len(scratch)
		dst = protowire.AppendTag(dst, fieldRequestDescriptors, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(protowire.SizeTag(fieldDescriptorEntries)+protowire.SizeBytes(entryLen)))
		dst = protowire.AppendTag(dst, fieldDescriptorEntries, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(entryLen))
		dst = append(dst, scratch...)
	}
	return dst, scratch
}

// decimalLen is the number of decimal digits of k >= 0.
func decimalLen(k int) int {
	n := 1
	for k >= 10 {
		k /= 10
		n++
	}
	return n
}

// generator draws the requests of one worker. Not safe for concurrent use.
type generator struct {
	w       Workload
	rng     *rand.Rand
	values  []int
	msg     []byte
	scratch []byte
}

func newGenerator(w Workload, seed uint64) *generator {
	return &generator{w: w, rng: rand.New(rand.NewPCG(seed, 0x726c7362656e6368)), values: make([]int, w.Descriptors)}
}

// next returns the next request in wire format; valid until the next call.
func (g *generator) next() []byte {
	for i := range g.values {
		g.values[i] = g.rng.IntN(g.w.Keys)
	}
	g.msg, g.scratch = g.w.AppendRequest(g.msg[:0], g.scratch, g.values)
	return g.msg
}
