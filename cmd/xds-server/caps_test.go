package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/xds-server/xds-server/netlimit"
)

// fitCapsLog runs fitConnectionCapsTo on the configuration of args at an
// open-file limit of n and returns the caps (xds, ratelimit, admin) and
// the log it wrote.
func fitCapsLog(t *testing.T, n uint64, args ...string) ([3]uint32, string) {
	t.Helper()
	cfg, err := loadArgs(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	cfg = fitConnectionCapsTo(cfg, n, slog.New(slog.NewTextHandler(&buf, nil)))
	return [3]uint32{cfg.XDS.MaxConnections, cfg.RateLimit.MaxConnections, cfg.Admin.MaxConnections}, buf.String()
}

// TestDefaultConnectionCapsNeverWarn: with the default configuration,
// the connection caps fit the open-file limit the process got (ulimit -n
// 1,024, 4,096, this machine's 20,000, 1,048,576), leave netlimit.Reserve
// free and log at INFO, not WARN (`make run`'s first line was once a
// warning about our own defaults).
func TestDefaultConnectionCapsNeverWarn(t *testing.T) {
	for _, n := range []uint64{1024, 4096, 20000, 1 << 20} {
		caps, log := fitCapsLog(t, n)
		if strings.Contains(log, "level=WARN") || !strings.Contains(log, "level=INFO msg=\"open file limit and connection caps\"") {
			t.Errorf("limit %d: want one INFO line, got:\n%s", n, log)
		}
		sum := uint64(caps[0]) + uint64(caps[1]) + uint64(caps[2])
		if caps[0] == 0 || caps[1] == 0 || caps[2] == 0 || sum+netlimit.Reserve(n) > n {
			t.Errorf("limit %d: caps %v (sum %d) + reserve %d exceed it or leave a listener uncapped", n, caps, sum, netlimit.Reserve(n))
		}
	}
	// Every limit from 96 files up (the least that holds 16 connections
	// per listener beside the reserve) fits the defaults.
	for n := uint64(96); n <= 1<<17; n++ {
		shares := []netlimit.Share{{Max: xdsConnCeiling, Auto: true}, {Max: rateLimitConnCeiling, Auto: true}, {Max: adminConnCeiling, Auto: true}}
		if caps, fits := netlimit.Fit(n, shares); !fits {
			t.Fatalf("limit %d: the default caps %v do not fit", n, caps)
		}
	}
}

// TestExplicitConnectionCapsOverTheLimitWarn: a cap set over what the
// limit leaves is kept as given, and warned about.
func TestExplicitConnectionCapsOverTheLimitWarn(t *testing.T) {
	caps, log := fitCapsLog(t, 20000, "--xds.max_connections", "19000")
	if caps[0] != 19000 || !strings.Contains(log, "level=WARN") {
		t.Errorf("caps %v, log:\n%s", caps, log)
	}
}
