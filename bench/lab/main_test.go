package main

import (
	"io"
	"testing"
)

func TestRunsOption(t *testing.T) {
	for name, tc := range map[string]struct {
		args    []string
		runs    int
		invalid bool
	}{
		"1 run by default":       {runs: 1},
		"1 with --quick":         {args: []string{"--quick"}, runs: 1},
		"--runs overrides quick": {args: []string{"--runs", "2", "--quick"}, runs: 2},
		"--runs 0 makes no lab":  {args: []string{"--runs=0"}, invalid: true},
		"--runs 100 is too many": {args: []string{"--runs=100"}, invalid: true},
	} {
		t.Run(name, func(t *testing.T) {
			o, err := parseOptions(tc.args, io.Discard)
			if (err != nil) != tc.invalid || (!tc.invalid && o.runs != tc.runs) {
				t.Errorf("runs %d, error %v; want %d, invalid %v", o.runs, err, tc.runs, tc.invalid)
			}
		})
	}
}
