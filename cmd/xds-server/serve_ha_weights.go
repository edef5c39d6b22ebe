package main

import (
	"fmt"

	"github.com/xds-server/xds-server/ha"
	"github.com/xds-server/xds-server/weights"
)

// haWeights builds the weights' HA exchange (ha.enabled) from c: Client
// (discovery.consul's), Prefix (ha.consul.prefix), Replica (the replica
// id), PublishInterval (ha.publish_interval), LockDelay
// (ha.leader_lock_delay), CountWrite and CountError (the ha package's
// xds_ha_consul_writes_total and xds_ha_errors_total), Logger and
// Registerer. The caller sets wc.HA to the returned config and runs the
// exchange with the pipeline:
//
//	hw, hc, err := haWeights(ha.WeightsConfig{...})
//	wc.HA = hc
//	l.loop(hw.Run)
func haWeights(c ha.WeightsConfig) (*ha.Weights, *weights.HAConfig, error) {
	hw, err := ha.NewWeights(c)
	if err != nil {
		return nil, nil, fmt.Errorf("serve: %w", err)
	}
	return hw, &weights.HAConfig{Replica: c.Replica, Summaries: hw, Tables: hw}, nil
}
