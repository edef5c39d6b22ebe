// Command subsetsim simulates the subsetting algorithms of package
// subsetting (classic, steady and the random baseline) and prints, per
// configuration, the connections per backend and the churn when one backend
// or one client comes or goes, as medians over trials with random backend
// ids, plus the time to compute 10,000 clients x 1,000 backends and each
// target of the design guide (§6) with its measured value.
//
//	go run ./bench/subsetsim                      # 300 clients x 300 backends x size 10
//	go run ./bench/subsetsim -preset all          # also 1000 x 200 x 20
//	go run ./bench/subsetsim -preset all -markdown BENCHMARKS.md
//
// With -markdown FILE it rewrites, in FILE, only the lines between
// <!-- subsetting:begin --> and <!-- subsetting:end --> (appending the
// markers at the end if they are absent). It imports only package
// subsetting.
//
// It must not import cmd, e2e, xds or discovery: it drives the pure
// subsetting package only.
package main
