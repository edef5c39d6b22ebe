package main

import (
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	cfg, err := parseConfig([]string{"-service", "echo", "-meta", "zone=a", "-meta", "empty=",
		"-tags", "v1, canary,,", "-drain-delay", "0s", "-utilization", "0.5"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Service != "echo" || cfg.Meta["zone"] != "a" || cfg.Meta["empty"] != "" || len(cfg.Meta) != 2 ||
		!slices.Equal(cfg.Tags, []string{"v1", "canary"}) || cfg.DrainDelay != 0 || cfg.Utilization != 0.5 {
		t.Errorf("config = %+v", cfg)
	}
	defaults, err := parseConfig(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if defaults.Consul != "127.0.0.1:8500" || defaults.DrainDelay != 5*time.Second ||
		defaults.LameDuckMetric != "lame_duck" || defaults.Utilization >= 0 {
		t.Errorf("defaults = %+v", defaults)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want []string // substrings of the error
	}{
		"meta without =":   {[]string{"-meta", "zone"}, []string{`meta "zone" is not key=value`}},
		"meta without key": {[]string{"-meta", "=a"}, []string{`meta "=a" is not key=value`}},
		"unknown flag":     {[]string{"-nope"}, []string{"not defined: -nope"}},
		"stray argument":   {[]string{"serve"}, []string{`unexpected arguments ["serve"]`}},
		"every problem at once": {
			args: []string{"-service", "", "-capacity", "0", "-drain-delay", "-1s", "-shutdown-timeout", "0s",
				"-utilization", "2", "-lame-duck-metric", ""},
			want: []string{"-service is empty", "-capacity is 0", "-drain-delay is -1s", "-shutdown-timeout is 0s",
				"-utilization is 2", "-lame-duck-metric is empty"},
		},
		"zero consul timeout": {[]string{"-consul-timeout", "0s"}, []string{"-consul-timeout is 0s, want > 0"}},
		"register port":       {[]string{"-register-port", "orca"}, []string{`-register-port is "orca", want grpc or http`}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseConfig(tc.args, io.Discard)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestRegistrationPort(t *testing.T) {
	grpcAddr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9081}
	httpAddr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8081}
	for port, want := range map[string]int{"grpc": 9081, "http": 8081} {
		reg := registration(Config{Service: "web", RegisterPort: port, CheckInterval: time.Second}, "web-1", grpcAddr, httpAddr)
		if reg.Port != want || reg.Address != "127.0.0.1" || reg.Meta["orca_port"] != "9081" {
			t.Errorf("-register-port %s: port %d, address %q, meta %v; want port %d", port, reg.Port, reg.Address, reg.Meta, want)
		}
	}
}
