package main

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// TestWirePolicy: the config entry watcher is wired with discovery.source
// consul (its metrics on the process registry), and not with the static
// source or with discovery.consul.config_entries false.
func TestWirePolicy(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--discovery.source", "static"}, false},
		{[]string{"--discovery.source", "consul", "--discovery.consul.config_entries=false"}, false},
		{[]string{"--discovery.source", "consul"}, true},
	} {
		cfg, err := loadArgs(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		a := &app{cfg: cfg, log: slog.Default(), reg: newRegistry(), consul: sync.OnceValues(cfg.ConsulSource().ConsulClient)}
		var cl closers
		if err := a.wirePolicy(context.Background(), &cl); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		fams, err := a.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		registered := slices.ContainsFunc(fams, func(f *dto.MetricFamily) bool { return f.GetName() == "xds_policy_entries" })
		if (a.pol != nil) != tc.want || registered != tc.want {
			t.Errorf("%v: watcher %v, metrics registered %v; want %v", tc.args, a.pol != nil, registered, tc.want)
		}
	}
}
