package main

import (
	"flag"
	"fmt"
	"runtime"
	"time"

	"github.com/xds-server/xds-server/bench/section"
)

// modelFlags registers the flags of -model on fs: the results file and
// the question the model answers.
func modelFlags(fs *flag.FlagSet) (runs *string, q func() modelQuestion) {
	runs = fs.String("model", "", "JSON lines written by BenchmarkConsulFleet -results at 4 or more fleet sizes: rewrite only the cost model section of -out")
	nodes := fs.Int("model-nodes", 100000, "the cost model's question: xDS nodes over every replica")
	p99 := fs.Duration("model-p99", time.Second, "the cost model's question: p99 budget of a change (Consul change or drain -> every node)")
	pushP99 := fs.Duration("model-push-p99", 1200*time.Millisecond, "the cost model's question: p99 budget of a full push (every service changes at once)")
	replicas := fs.Int("model-min-replicas", 3, "the cost model's question: fewest replicas")
	cores := fs.Int("model-max-cores", 16, "the cost model's question: most cores of a replica")
	memory := fs.Float64("model-max-memory-gib", 16, "the cost model's question: most peak RSS of a replica, GiB")
	return runs, func() modelQuestion {
		return modelQuestion{Nodes: *nodes, P99: p99.Seconds(), PushP99: pushP99.Seconds(), MinReplicas: *replicas, MaxCores: *cores, MaxMemory: *memory * (1 << 30)}
	}
}

// runModel fits the cost model on the BenchmarkConsulFleet results at path
// (measured on this machine's cores) and rewrites the model section of
// out; the rest of out is kept byte for byte.
func runModel(path, commandsPath, out string, q modelQuestion) error {
	body, err := modelSectionFile(path, commandsPath, q, float64(runtime.NumCPU()), time.Now().UTC())
	if err != nil {
		return err
	}
	if err := section.Rewrite(out, modelSection, body); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
