package main

import (
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/weights"
	"github.com/xds-server/xds-server/xds"
)

// spillPublisher is the xDS server as the weights pipeline's publisher,
// taking the zone spill states in weights' terms (weights.SpillPublisher)
// and handing them on in translate's.
type spillPublisher struct{ *xds.Server }

// SetSpill converts the spill states and passes them to the server.
func (p spillPublisher) SetSpill(in map[string]map[weights.ZoneKey]weights.ZoneSpill) {
	out := make(xds.Spill, len(in))
	for svc, zones := range in {
		m := make(map[translate.Zone]translate.ZoneSpill, len(zones))
		for k, z := range zones {
			m[translate.Zone{Region: k.Region, Zone: k.Zone}] = translate.ZoneSpill{Keep: z.Keep, Spare: z.Spare}
		}
		out[svc] = m
	}
	p.Server.SetSpill(out)
}

var _ weights.SpillPublisher = spillPublisher{}
