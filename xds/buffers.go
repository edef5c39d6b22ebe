package xds

import (
	"google.golang.org/grpc/mem"
)

// buffers hold encoded messages until they are written (and requests
// until they are decoded). grpc-go's default pool has no size between
// 32 KiB and 1 MiB, so each CDS or EDS response of a few tens of KiB took
// a 1 MiB buffer, and pooled every buffer the connection burst of a fleet
// needed: 160 MiB after 1000 nodes connected. Here buffers up to 1 MiB
// come from pools (see bufferSizes), so a response takes at most 1/8 more
// than its size, and the nodes of a push or a connect storm reuse each
// other's buffers instead of leaving one garbage buffer each (at 10,000
// nodes that was about 2 GB of garbage per storm, and the GC work to
// match); the pools are sync.Pools, emptied by the collector once idle.
// Larger buffers are allocated at their size and left to the collector.
var buffers mem.BufferPool = bufferPool{small: mem.NewTieredBufferPool(bufferSizes()...)}

// bufferSizes are the pooled buffer sizes: powers of two up to 32 KiB,
// then eight steps per doubling up to 1 MiB. Every node of a push holds
// one encoded response until it is written, so waste counts: a SotW EDS
// response of 50 services x 20 endpoints (86 KiB) would take a 128 KiB
// power-of-two buffer, 10,000 of them 1.2 GiB; here it takes 96 KiB.
func bufferSizes() []int {
	sizes := []int{1 << 8, 1 << 10, 1 << 12, 1 << 13, 1 << 14, 1 << 15}
	for base := 32 << 10; base < maxPooledBuffer; base *= 2 {
		for step := 1; step <= 8; step++ {
			sizes = append(sizes, base+step*base/8)
		}
	}
	return sizes
}

// maxPooledBuffer is the largest buffer kept for reuse.
const maxPooledBuffer = 1 << 20

type bufferPool struct{ small mem.BufferPool }

func (p bufferPool) Get(n int) *[]byte {
	if n <= maxPooledBuffer {
		return p.small.Get(n)
	}
	b := make([]byte, n)
	return &b
}

func (p bufferPool) Put(b *[]byte) {
	if cap(*b) <= maxPooledBuffer {
		p.small.Put(b)
	}
}
