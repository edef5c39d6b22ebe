package main

import "runtime"

// gcBallast keeps the heap floor alive for the life of the process.
var gcBallast []byte

// setHeapFloor makes the garbage collector let the heap grow to about
// twice mib MiB before it collects: a ballast of mib MiB that nothing
// touches (fresh heap pages are zero already, so it costs address space,
// not resident memory; it holds no pointers, so marking it is free).
// A small process serving many short requests (the rate-limit service
// allocates about 10 KiB per call in gRPC) otherwise collects tens of
// times a second, and each collection also shrinks the stacks its
// request goroutines must grow again. 0 leaves the collector alone.
func setHeapFloor(mib uint32) {
	if mib == 0 {
		return
	}
	gcBallast = make([]byte, int(mib)<<20)
	runtime.KeepAlive(gcBallast)
}
