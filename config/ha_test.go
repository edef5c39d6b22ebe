package config

import (
	"strings"
	"testing"
	"time"
)

func TestHASettings(t *testing.T) {
	cfg, err := loadArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	if h := cfg.HA; h.Enabled || h.Consul.Prefix != "xds-server/" || h.PublishInterval != 5*time.Second || h.LeaderLockDelay != 15*time.Second || h.AliveTTL != 3*time.Second {
		t.Errorf("ha defaults: %+v", h)
	}
	cfg, err = loadArgs(t, "--discovery.source=consul", "--subsetting.index_source=consul", "--ha.enabled", "--ha.consul.prefix=prod/xds",
		"--ha.publish_interval=2s", "--ha.leader_lock_delay=5s", "--ha.alive_ttl=6s")
	if err != nil {
		t.Fatal(err)
	}
	hc := cfg.HAConfig()
	if !cfg.HA.Enabled || hc.Prefix != "prod/xds/" || hc.PublishInterval != 2*time.Second || hc.LeaderLockDelay != 5*time.Second || hc.AliveTTL != 6*time.Second {
		t.Errorf("ha: %+v, converted %+v", cfg.HA, hc)
	}
}

func TestHAValidation(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want []string
	}{
		"needs consul": {args: []string{"--ha.enabled"}, want: []string{"ha.enabled: true: needs discovery.source: consul"}},
		"needs shared indices": {args: []string{"--ha.enabled", "--discovery.source", "consul"},
			want: []string{"subsetting.index_source: local: with ha.enabled, replicas need one table"}},
		"zero interval":       {args: []string{"--ha.publish_interval=0s"}, want: []string{"ha.publish_interval: 0s: must be positive"}},
		"lock delay too big":  {args: []string{"--ha.leader_lock_delay=2m"}, want: []string{"ha.leader_lock_delay: 2m", "[0s, 1m]"}},
		"alive ttl too short": {args: []string{"--ha.alive_ttl=500ms"}, want: []string{"ha.alive_ttl: 500ms", "[1s, 20s]"}},
		"alive ttl too long":  {args: []string{"--ha.alive_ttl=30s"}, want: []string{"ha.alive_ttl: 30s", "[1s, 20s]"}},
		"empty prefix":        {args: []string{"--ha.consul.prefix="}, want: []string{"ha.consul.prefix"}},
		"absolute prefix":     {args: []string{"--ha.consul.prefix=/x"}, want: []string{"ha.consul.prefix: /x"}},
		"every problem":       {args: []string{"--ha.enabled", "--ha.publish_interval=-1s"}, want: []string{"ha.enabled", "ha.publish_interval"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadArgs(t, tc.args...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
