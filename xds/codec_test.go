package xds

import (
	"testing"
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
