// Command weightsim simulates load balancing by utilization-driven weights
// (package weights) over the subsets xds serves (subsetting.NewSlotted) and
// compares five policies: round robin, least-loaded (each client alone,
// from the utilization it sees of its own subset), global weights (the
// weights Tracker fed backend reports), global weights balanced with the
// clients' rates (weights.BalanceService, fed per-node reports too) and
// per-node weights (weights.PerNode, fed backend and per-node reports).
// The three weighted policies run the product's own loop, weights.Runner,
// one Step per report interval: the tracker's smoothing and overload guard,
// the push policy and xds-server's default push interval (5s) are the
// product's code, not a model of it.
//
//	go run ./bench/weightsim                            # defaults: 100 backends, 300 clients, subset 10
//	go run ./bench/weightsim -noise 0 -trials 1         # noise-free only, one seed
//	go run ./bench/weightsim -go-bench bench.txt -markdown BENCHMARKS.md
//
// It prints, per policy, the max/mean and max/min utilization in steady
// state, the convergence time and the steady-state oscillation (medians
// over trials), max/mean over time, and the design guide's targets (§6)
// with the measured values. The targets are judged on the noise-free run;
// with -noise > 0 a second run with noisy reports is shown for
// information. -go-bench FILE adds the figures of
// `go test ./weights -run '^$' -bench 'Solve|Balance|Ingest' -benchmem` (medians).
//
// With -markdown FILE it rewrites, in FILE, only the lines between
// <!-- weightsim:begin --> and <!-- weightsim:end --> (appending the
// markers at the end if they are absent).
//
// With -json FILE it also writes the first trial's fleet (capacities,
// rates, subsets) and every policy's steady-state figures: the load lab
// (bench/lab) builds that fleet with real processes and compares.
//
// It must not import cmd, e2e, xds or discovery: it drives the pure
// weights and subsetting code only.
package main
