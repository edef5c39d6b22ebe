package main

import "github.com/xds-server/xds-server/weights"

// weightsPipeline converts the weights section and each service's weights
// settings (services.<name>.weights over services."*".weights) into the
// weight pipeline's config; serve adds the publisher, the gRPC server, the
// ORCA sink, the logger and the registerer.
func (c Config) weightsPipeline() weights.PipelineConfig {
	pc := weights.PipelineConfig{
		Tracker: c.Weights.tracker(), Solve: c.Weights.solver(),
		Services: func(service string) weights.ServiceConfig {
			set, on := c.weightsOf(service)
			return weights.ServiceConfig{Enabled: on, Mode: set.Mode, Sources: set.Sources, ORCAPortMeta: set.ORCAPortMeta}
		},
		UpdatePeriod: c.Weights.UpdatePeriod, MinChange: c.Weights.MinChange, MinPushInterval: c.Weights.MinPushInterval,
		ORCAInterval: c.Weights.ORCAInterval, LRSInterval: c.Weights.LRSInterval,
	}
	if c.Weights.Balance {
		b := c.Weights.balancer()
		pc.Balance = &b
	}
	return pc
}
