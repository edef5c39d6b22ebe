// Command report renders BENCHMARKS.md from the results of the benchmarks
// in package bench: the JSON lines BenchmarkConsulFleet appends (-runs) and
// the text output of BenchmarkInProcessPush (-inprocess). It prints medians
// over runs, pooled percentiles and the ratio of each figure to its target
// of the design guide (§6). scripts/bench.sh runs it; it imports only
// package bench and bench/section. The section between <!-- subsetting:begin --> and
// <!-- subsetting:end --> belongs to bench/subsetsim: a rewrite keeps it
// verbatim at the end of the file, like the other simulators' sections
// and the HA section. With -ha it renders only that HA section (issue 15,
// BenchmarkHAFleet's JSON lines) and leaves the rest of the file as is.
// With -model it fits the cost model (issue 29) on BenchmarkConsulFleet's
// JSON lines at 4 or more fleet sizes and renders only its section: every
// input is read from that file (fewer sizes, or a run without the
// measured inputs, refuse to render).
//
// report must not import cmd or e2e.
package main
