package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/ha"
	"github.com/xds-server/xds-server/weights"
)

// haWeights builds the weights' HA exchange (ha.enabled): this replica's
// summaries and the leader's table in Consul KV under prefix
// (ha.consul.prefix), written at most every interval
// (ha.publish_interval), the lead taken with lockDelay
// (ha.leader_lock_delay). The caller sets wc.HA to the returned config
// and runs the exchange with the pipeline:
//
//	hw, hc, err := haWeights(client, cfg.HA.Consul.Prefix, replicaID, cfg.HA.PublishInterval, cfg.HA.LeaderLockDelay, log, reg, nil, nil)
//	wc.HA = hc
//	wg.Go(func() { hw.Run(bg) })
//
// countWrite and countError feed xds_ha_consul_writes_total{kind} and
// xds_ha_errors_total{op} (nil: not counted).
func haWeights(client *api.Client, prefix, replica string, interval, lockDelay time.Duration,
	log *slog.Logger, reg prometheus.Registerer, countWrite, countError func(string)) (*ha.Weights, *weights.HAConfig, error) {
	hw, err := ha.NewWeights(ha.WeightsConfig{Client: client, Prefix: prefix, Replica: replica,
		PublishInterval: interval, LockDelay: lockDelay, CountWrite: countWrite, CountError: countError,
		Logger: log, Registerer: reg})
	if err != nil {
		return nil, nil, fmt.Errorf("ha: %w", err)
	}
	return hw, &weights.HAConfig{Replica: replica, Summaries: hw, Tables: hw}, nil
}
