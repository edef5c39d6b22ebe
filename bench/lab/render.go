package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/xds-server/xds-server/bench/section"
)

// sectionName is the lab's section of BENCHMARKS.md.
const sectionName = "lab"

// Targets of issue 18 (max/mean utilization at defaults) and the bounds
// every weighted policy must meet.
var targets = map[string]float64{formula: 1.40, balanced: 1.15, perNode: 1.10}

const (
	convergeTarget    = 60.0 // seconds
	oscillationTarget = 0.05
	simTolerance      = 0.10 // |measured - simulated| max/mean
	cpuTarget         = 1.0  // cores for backends and clients together
)

// jsonPolicy is one policy in --json: issue 18's shape (medians over the
// runs, errors summed), then the runs and each run's figures.
type jsonPolicy struct {
	Name         string    `json:"name"`
	SubsetSize   int       `json:"subset_size"`
	MaxMean      float64   `json:"max_mean"`
	P99Mean      float64   `json:"p99_mean"`
	ConvergeS    float64   `json:"converge_s"` // -1: not converged
	Oscillation  float64   `json:"oscillation"`
	P99LatencyMS float64   `json:"p99_latency_ms"`
	Errors       int64     `json:"errors"`
	SimMaxMean   float64   `json:"sim_max_mean"`
	Runs         int       `json:"runs"`
	MaxMeanRuns  []float64 `json:"max_mean_runs"`   // in run order
	ConvergeRuns []float64 `json:"converge_s_runs"` // -1: not converged
	ErrorsRuns   []int64   `json:"errors_runs"`
	ChartRun     int       `json:"chart_run"` // 1-based: the run whose max/mean is the median
	// SubsetsUnlike is the clients whose subset was not the simulator's,
	// summed over the runs; -1: some run could not check.
	SubsetsUnlike int `json:"subsets_unlike_sim"`
}

func toJSON(ss []summary, backends int) []byte {
	out := struct {
		Policies []jsonPolicy `json:"policies"`
	}{}
	for _, s := range ss {
		r := s.med
		p := jsonPolicy{Name: r.policy.name, SubsetSize: cmpOr(r.policy.subset, backends),
			MaxMean: round3(r.fig.MaxMean), P99Mean: round3(r.fig.P99Mean), ConvergeS: r.fig.Converge,
			Oscillation: round3(r.fig.Oscillation), P99LatencyMS: round3(r.p99), Errors: r.errors, SimMaxMean: round3(r.simMaxMean),
			Runs: len(s.runs), ChartRun: s.chart + 1}
		for _, run := range s.runs {
			if run.mismatched < 0 || p.SubsetsUnlike < 0 {
				p.SubsetsUnlike = -1
			} else {
				p.SubsetsUnlike += run.mismatched
			}
			p.MaxMeanRuns = append(p.MaxMeanRuns, round3(run.fig.MaxMean))
			p.ConvergeRuns = append(p.ConvergeRuns, run.fig.Converge)
			p.ErrorsRuns = append(p.ErrorsRuns, run.errors)
		}
		out.Policies = append(out.Policies, p)
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	return append(b, '\n')
}

// mismatchSummary sums every run's subset checks.
func mismatchSummary(ss []summary) string {
	total, unchecked := 0, 0
	for _, s := range ss {
		for _, r := range s.runs {
			if r.mismatched < 0 {
				unchecked++
				continue
			}
			total += r.mismatched
		}
	}
	if unchecked > 0 {
		return fmt.Sprintf("%d (%d runs not checked)", total, unchecked)
	}
	return fmt.Sprint(total)
}

// errorsCell is the count of failed requests, with their status codes.
func errorsCell(r result) string {
	if r.errors == 0 {
		return "0"
	}
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(r.codes)) {
		parts = append(parts, fmt.Sprintf("%s %d", code, r.codes[code]))
	}
	return fmt.Sprintf("%d (%s)", r.errors, strings.Join(parts, ", "))
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// maxMeanCell is the median max/mean, and each run's in run order when
// there are several: "1.061 (1.055 / 1.072 / 1.061)".
func maxMeanCell(s summary) string {
	cell := fmt.Sprintf("%.3f", s.med.fig.MaxMean)
	if len(s.runs) < 2 {
		return cell
	}
	var each []string
	for _, r := range s.runs {
		each = append(each, fmt.Sprintf("%.3f", r.fig.MaxMean))
	}
	return cell + " (" + strings.Join(each, " / ") + ")"
}

// table is the figures (medians over the runs, errors summed) as a
// Markdown table (also the stdout table).
func table(ss []summary, backends int) string {
	var b strings.Builder
	b.WriteString("| policy | subsets | max/mean | p99/mean | simulator max/mean | noise floor | converged | oscillation | mean utilization | latency p50 / p99 | requests | errors | backends+clients CPU | xds-server CPU |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range ss {
		r := s.med
		sub := "none"
		if r.policy.subset > 0 && r.policy.subset < backends {
			sub = fmt.Sprint(r.policy.subset)
		}
		conv := "no"
		if r.fig.Converge >= 0 {
			conv = fmt.Sprintf("%.0f s", r.fig.Converge)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.3f | %.3f | %.3f | %s | %.1f%% | %.2f | %.1f / %.1f ms | %d | %s | %.2f cores | %.2f cores |\n",
			r.policy.name, sub, maxMeanCell(s), r.fig.P99Mean, r.simMaxMean, r.floor, conv, 100*r.fig.Oscillation, r.fig.MeanUtil,
			r.p50, r.p99, r.requests, errorsCell(r), r.cpuLoad, r.cpuServer)
	}
	return b.String()
}

// verdicts judges each policy's medians (errors: the sum over the runs)
// against issue 18's targets.
func verdicts(ss []summary, backends int) string {
	var b strings.Builder
	b.WriteString("| policy | target max/mean | measured | converged <= 60 s | oscillation < 5% | errors 0 | within 0.10 of the simulator |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	for _, s := range ss {
		r := s.med
		label := r.policy.label(backends)
		if !r.policy.weights {
			fmt.Fprintf(&b, "| %s | reported (about 1.6-1.8 expected) | %.3f | | | %s | %s |\n", label, r.fig.MaxMean,
				yes(r.errors == 0), yes(math.Abs(r.fig.MaxMean-r.simMaxMean) <= simTolerance))
			continue
		}
		target := "none"
		met := true
		if t, ok := targets[r.policy.name]; ok {
			target, met = fmt.Sprintf("<= %.2f", t), r.fig.MaxMean <= t
		}
		fmt.Fprintf(&b, "| %s | %s | %.3f (%s) | %s | %s | %s | %s (sim %.3f) |\n", label, target, r.fig.MaxMean, yes(met),
			yes(r.fig.Converge >= 0 && r.fig.Converge <= convergeTarget), yes(r.fig.Oscillation < oscillationTarget),
			yes(r.errors == 0), yes(math.Abs(r.fig.MaxMean-r.simMaxMean) <= simTolerance), r.simMaxMean)
	}
	return b.String()
}

// write prints the table (or the JSON to stdout), and writes the JSON
// file, the charts and the Markdown section as asked.
func (e *env) write(ss []summary, args []string, took time.Duration, stdout io.Writer) error {
	o := e.o
	js := toJSON(ss, o.backends)
	switch o.json {
	case "":
	case "-":
		if _, err := stdout.Write(js); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
	default:
		if err := os.WriteFile(o.json, js, 0o644); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
	}
	if o.json != "-" {
		fmt.Fprint(stdout, table(ss, o.backends))
		fmt.Fprintf(stdout, "\n%s\nlogs and configs: %s; took %s\n", verdicts(ss, o.backends), e.dir, took.Round(time.Second))
	}
	var charts []string
	if o.charts != "" {
		if err := os.MkdirAll(o.charts, 0o755); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		for _, s := range ss {
			r := s.runs[s.chart]
			path := filepath.Join(o.charts, r.policy.slug()+".svg")
			svg := chart(r, e.backends, o)
			if err := os.WriteFile(path, []byte(svg), 0o644); err != nil {
				return fmt.Errorf("lab: %w", err)
			}
			charts = append(charts, path)
		}
	}
	if o.markdown == "" {
		return nil
	}
	body := e.markdown(ss, args, took, charts)
	return section.Rewrite(o.markdown, sectionOf(o), body)
}

// runsNote says what the figures of n runs are.
func runsNote(n int) string {
	if n == 1 {
		return "One run of every policy (`--runs 1`): the issue's targets are medians of 3 runs (`make lab` runs 3)."
	}
	return fmt.Sprintf("%d runs of every policy on the same fleet (`--runs %d`), each with its own arrivals (another stream of the\n"+
		"same seed): every figure is the median over the runs, max/mean followed by each run's in run order;\n"+
		"**converged** is the median of the converge times, a run that did not converge counting as +inf; errors\n"+
		"are the sum over the runs. The targets below are judged on these medians and sums.", n, n)
}

// markdown is the lab's section of BENCHMARKS.md.
func (e *env) markdown(ss []summary, args []string, took time.Duration, charts []string) string {
	o := e.o
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("%s", heading(o))
	p("")
	p("Written by `%s` (`%s`) on %s in %s, on %d cores (%s); do not edit by hand, run it again.",
		command(args), makeCommand(o), time.Now().UTC().Format("2006-01-02 15:04 UTC"), took.Round(time.Second), runtime.NumCPU(), runtime.GOOS+"/"+runtime.GOARCH)
	p("%s", runsNote(o.runs))
	p("")
	p("Real processes on loopback: a Consul agent (`-dev`), the xds-server binary (a fresh one per policy),")
	p("%d example backends (`examples/backend -slots %d`: capacity = slots / service time, calls beyond the slots", o.backends, o.slots)
	p("queue, utilization reported over ORCA is the slot time in use, measured by the backend) with the capacities")
	median := ""
	if o.medianFleet {
		median = ": the median fleet of this shape among seeds 1-200, `weightsim -median-fleet`"
	}
	b.WriteString(clientsProse(o, median))
	p("`[orca, lrs]`: the formula (`weights.balance: false`), balanced (`weights.balance: true`), per-node")
	p("(`mode: per_node`). Each run lasts %s. Utilization is each backend's own ORCA report, every second;", o.duration)
	p("**max/mean** and **p99/mean** are over the backends' mean utilization in the last %s; the spread over time", o.final)
	p("is max/mean of %s trailing means; **converged** is when it stays within 5%% of its own mean over the", o.window)
	p("last %s (it includes up to %s of that window's lag); **oscillation** is its standard deviation after", o.final, o.window)
	p("that, relative to that mean. **simulator** is `bench/weightsim`'s noise-free figure for the same fleet;")
	p("**noise floor** is what a perfectly balanced fleet would measure over the same window (Poisson arrivals: the")
	p("max of a dozen noisy means sits above their mean), so a measured figure is at best about the simulator's")
	p("times the floor. CPU is")
	p("process CPU time over wall time (backends%s: /proc; clients: the lab process). **mean utilization** should be", envoysCPU(o))
	p("%g: a backend's busy time includes its timers' lateness, so a loaded machine makes every backend slower", o.util)
	p("(a higher mean) and the figures noisier; run the lab on a quiet machine.")
	p("")
	b.WriteString(table(ss, o.backends))
	p("")
	p("Clients whose subset (read from `/debug/config`%s) is not the simulator's: %s.", envoysSubsets(o), mismatchSummary(ss))
	p("")
	p("Against the targets of issue 18:")
	p("")
	b.WriteString(verdicts(ss, o.backends))
	p("")
	p("Utilization per backend over time (one chart per policy, from the run whose max/mean is the median):")
	p("")
	for k, c := range charts {
		rel, err := filepath.Rel(filepath.Dir(o.markdown), c)
		if err != nil {
			rel = c
		}
		p("- [%s](%s) (run %d of %d)", ss[k].med.policy.label(o.backends), filepath.ToSlash(rel), ss[k].chart+1, len(ss[k].runs))
	}
	return b.String()
}
