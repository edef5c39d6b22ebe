package main

import (
	"encoding/json"
	"fmt"
	"os"
)

// jsonResult is what -json writes: the fleet of the first trial (seed),
// as the load lab (bench/lab) builds it with real processes, and each
// policy's steady-state max/mean utilization (medians over trials) at
// every noise level simulated.
type jsonResult struct {
	Fleet    jsonFleet    `json:"fleet"`
	Policies []jsonPolicy `json:"policies"`
}

// jsonFleet is one trial's fleet.
type jsonFleet struct {
	Capacities []float64 `json:"capacities"` // requests/s at utilization 1, by backend (slot)
	Rates      []float64 `json:"rates"`      // requests/s, by client (index)
	Subsets    [][]int   `json:"subsets"`    // backend indices, by client
}

// jsonPolicy is one policy's steady state at one noise level.
type jsonPolicy struct {
	Name        string  `json:"name"`
	Noise       float64 `json:"noise"`
	MaxMean     float64 `json:"max_mean"`
	Oscillation float64 `json:"oscillation"`
	Converged   int     `json:"converged_intervals"` // -1: not before the steady-state window
}

// writeJSON writes the -json file of res.
func writeJSON(path string, res results) error {
	f, err := newFleet(res.opts, newRand(res.opts.seed, fleetStream))
	if err != nil {
		return err
	}
	out := jsonResult{Fleet: jsonFleet{Capacities: f.caps, Rates: f.rates, Subsets: f.subsets}}
	for _, m := range res.modes {
		for _, p := range m.policies {
			st := p.medians()
			out.Policies = append(out.Policies, jsonPolicy{Name: p.name, Noise: m.noise,
				MaxMean: st.maxMean, Oscillation: st.oscillation, Converged: st.converged})
		}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("weightsim: json: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("weightsim: json: %w", err)
	}
	return nil
}
