package ratelimit

import (
	"context"
	"time"
)

// Store keeps the usage of every key and decides checks against it.
//
// Decide applies checks in order at now (the service's clock, so that
// every replica and store agrees on windows) and returns one Result per
// check. Each check is atomic on its own; checks of one call are
// independent (one refused check does not undo the others, as in
// envoyproxy/ratelimit). A store backed by a server makes one round trip
// per call, whatever the number of checks. An error means no decision
// was made: the service applies its failure mode to every check; but a
// *PartialError names the checks not decided, and only those get it.
type Store interface {
	Decide(ctx context.Context, now time.Time, checks []Check) ([]Result, error)
}
