package main

import (
	"math"
	"math/bits"
	"time"
)

// Histogram counts latencies in log-linear buckets, as HdrHistogram does:
// values below 2*subBuckets nanoseconds exactly, larger ones with
// subBuckets buckets per power of two, so every bucket is at most 1/128
// (0.8%) of its value wide. Recording is one array increment, no
// allocation; histograms of several workers are merged with Merge. The
// zero value is ready to use. Not safe for concurrent use.
type Histogram struct {
	counts [numBuckets]uint64
	total  uint64
	min    uint64 // ns; valid when total > 0
	max    uint64 // ns
}

const (
	subBits    = 7
	subBuckets = 1 << subBits // buckets per power of two
	// maxShift bounds the recorded range to 2^(maxShift+subBits+1) ns
	// (about 9 minutes); longer latencies land in the last bucket.
	maxShift   = 31
	numBuckets = 2*subBuckets + (maxShift-1)*subBuckets + subBuckets
)

// bucketOf returns the bucket of a latency of v ns.
func bucketOf(v uint64) int {
	if v < 2*subBuckets {
		return int(v)
	}
	shift := bits.Len64(v) - subBits - 1 // >= 1
	if shift > maxShift {
		return numBuckets - 1
	}
	top := v >> uint(shift) // in [subBuckets, 2*subBuckets)
	return 2*subBuckets + (shift-1)*subBuckets + int(top-subBuckets)
}

// bucketRange returns the smallest and largest value of bucket i, in ns.
func bucketRange(i int) (lo, hi uint64) {
	if i < 2*subBuckets {
		return uint64(i), uint64(i)
	}
	shift := uint((i-2*subBuckets)/subBuckets + 1)
	top := uint64((i-2*subBuckets)%subBuckets + subBuckets)
	return top << shift, (top+1)<<shift - 1
}

// Record counts one latency.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[bucketOf(v)]++
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.total++
}

// Merge adds the counts of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.total += o.total
}

// Count is the number of latencies recorded.
func (h *Histogram) Count() uint64 { return h.total }

// Max is the largest latency recorded (0 when empty).
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Quantile returns the latency at quantile q in [0, 1]: the value of
// rank ceil(q*n) (at least 1) in sorted order, reported as the middle of
// its bucket and clamped to the recorded minimum and maximum, so within
// 0.4% of the exact sample quantile. 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = min(max(rank, 1), h.total)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			mid := lo + (hi-lo)/2
			return time.Duration(min(max(mid, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

// exactQuantile is Quantile's definition on a sorted sample, for tests and
// small samples: the value of rank ceil(q*n), at least 1.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}
