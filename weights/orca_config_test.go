package weights

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestORCABackoff(t *testing.T) {
	const base, maxDelay = 100 * time.Millisecond, time.Second
	for failures, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		for range 100 {
			if d := orcaBackoff(base, maxDelay, failures); d < want/2 || d > want {
				t.Fatalf("orcaBackoff(%d failures) = %v, want in [%v, %v]", failures, d, want/2, want)
			}
		}
	}
	if d := orcaBackoff(base, maxDelay, 1<<30); d > maxDelay {
		t.Errorf("orcaBackoff after many failures = %v, above %v", d, maxDelay)
	}
}

func TestORCAConfigValidate(t *testing.T) {
	sink := newChanSink()
	for name, tc := range map[string]struct {
		cfg     ORCAConfig
		wantErr bool
	}{
		"zero durations take defaults": {cfg: ORCAConfig{Sink: sink}},
		"all set": {cfg: ORCAConfig{Sink: sink, Interval: time.Second,
			BackoffBase: time.Second, BackoffMax: time.Minute}},
		"base above the default max is fine with a larger max": {cfg: ORCAConfig{Sink: sink,
			BackoffBase: time.Minute, BackoffMax: time.Hour}},
		"no sink":            {cfg: ORCAConfig{}, wantErr: true},
		"negative interval":  {cfg: ORCAConfig{Sink: sink, Interval: -1}, wantErr: true},
		"negative backoff":   {cfg: ORCAConfig{Sink: sink, BackoffBase: -1}, wantErr: true},
		"negative max":       {cfg: ORCAConfig{Sink: sink, BackoffMax: -1}, wantErr: true},
		"max below base":     {cfg: ORCAConfig{Sink: sink, BackoffBase: time.Second, BackoffMax: time.Millisecond}, wantErr: true},
		"base above default": {cfg: ORCAConfig{Sink: sink, BackoffBase: time.Minute}, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Validate() = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Validate() = %v, does not wrap ErrInvalidConfig", err)
			}
			if _, nerr := NewORCA(tc.cfg); (nerr != nil) != tc.wantErr {
				t.Errorf("NewORCA error = %v, want error %v", nerr, tc.wantErr)
			}
		})
	}
	err := ORCAConfig{Interval: -1}.Validate()
	if got := err.Error(); !strings.HasPrefix(got, "weights: orca: invalid config: ") ||
		!strings.Contains(got, "sink is required") || !strings.Contains(got, "interval -1ns is negative") {
		t.Errorf("Validate() = %q, want every problem after the package prefix", got)
	}
}

func TestORCAMetricsShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := ORCAConfig{Sink: newChanSink(), Registerer: reg}
	o1, err := NewORCA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o2, err := NewORCA(cfg)
	if err != nil {
		t.Fatalf("second client on the same registry: %v", err)
	}
	o1.metrics.reported()
	if n := testutil.ToFloat64(o2.metrics.reports); n != 1 {
		t.Errorf("shared xds_weights_orca_reports_total = %v, want 1", n)
	}
	if n, err := testutil.GatherAndCount(reg, "xds_weights_orca_errors_total"); err != nil || n != 3 {
		t.Errorf("xds_weights_orca_errors_total series = %d (%v), want 3 kinds", n, err)
	}
}
