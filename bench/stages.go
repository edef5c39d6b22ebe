package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/xds-server/xds-server/xds"
)

// The stages of one change's path (issue 29), the keys of Run.Stages and
// Run.DrainStages, in path order. StageConsul is the bench's own: from
// the change's call (TTL update, maintenance) until Consul's blocking
// query returned to the server; the others are the server's
// (xds_change_stage_seconds, GET /debug/changes), and StageLastNode is
// the call -> the last node received it, as the fleet saw it.
const (
	StageConsul     = "consul"
	StageLastNode   = "last_node"
	StageFirstWrite = xds.StageFirstWrite
	StageLastWrite  = xds.StageLastWrite
)

// Stages lists every stage key in path order.
var Stages = []string{StageConsul, xds.StageDiscovery, xds.StageDebounce, xds.StageTranslate, xds.StageCache,
	StageFirstWrite, StageLastWrite, StageLastNode}

// FetchPasses reads the server's latest reconcile passes (GET
// /debug/changes on its admin address).
func FetchPasses(ctx context.Context, admin string) ([]xds.PassTimes, error) {
	body, err := httpGet(ctx, "http://"+admin+"/debug/changes")
	if err != nil {
		return nil, fmt.Errorf("bench: passes: %w", err)
	}
	defer body.Close()
	var passes struct {
		Passes []xds.PassTimes `json:"passes"`
	}
	if err := json.NewDecoder(body).Decode(&passes); err != nil {
		return nil, fmt.Errorf("bench: passes: %w", err)
	}
	return passes.Passes, nil
}

// StagesOf is where a change made at start went, in seconds per stage:
// its pass is the first whose change reached the reconcile loop at or
// after start; lastNode is start -> the last node had it. A stage the
// pass has no stamps for (no source read: an admin drain; no write) is
// absent; nil when no pass took the change.
func StagesOf(passes []xds.PassTimes, start time.Time, lastNode time.Duration) map[string]float64 {
	for _, p := range passes {
		if p.Changed.Before(start) || p.Cached.IsZero() {
			continue
		}
		s := func(from, to time.Time) float64 { return to.Sub(from).Seconds() }
		out := map[string]float64{
			xds.StageDebounce: s(p.Changed, p.Started), xds.StageTranslate: s(p.Started, p.Translated),
			xds.StageCache: s(p.Translated, p.Cached), StageLastNode: lastNode.Seconds(),
		}
		if !p.Read.At.IsZero() {
			out[StageConsul], out[xds.StageDiscovery] = s(start, p.Read.At), s(p.Read.At, p.Changed)
		}
		if !p.FirstWrite.IsZero() {
			out[StageFirstWrite], out[StageLastWrite] = s(p.Translated, p.FirstWrite), s(p.Translated, p.LastWrite)
		}
		return out
	}
	return nil
}
