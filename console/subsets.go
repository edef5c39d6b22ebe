package console

import (
	"sync"
	"time"

	"github.com/xds-server/xds-server/xds"
)

// subsetCache keeps each service's xds.SubsetSummary for refreshEvery.
// Only services discovery has are asked for (service checks first), and
// entries older than refreshEvery are dropped on every insert, so it holds
// at most the services asked for in the last second.
type subsetCache struct {
	fleet Fleet // nil: no subsets

	mu sync.Mutex
	m  map[string]cachedSummary
}

type cachedSummary struct {
	at  time.Time
	sum xds.SubsetSummary
	ok  bool
}

func newSubsetCache(f Fleet) *subsetCache {
	return &subsetCache{fleet: f, m: map[string]cachedSummary{}}
}

// get returns the summary of service at now (computed at most
// refreshEvery ago), and whether the xDS server has the service.
func (sc *subsetCache) get(service string, now time.Time) (xds.SubsetSummary, bool) {
	if sc.fleet == nil {
		return xds.SubsetSummary{}, false
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if e, ok := sc.m[service]; ok && fresh(e.at, now) {
		return e.sum, e.ok
	}
	sum, ok := sc.fleet.SubsetSummary(service, MaxNodeChoices)
	for name, e := range sc.m {
		if !fresh(e.at, now) {
			delete(sc.m, name)
		}
	}
	sc.m[service] = cachedSummary{at: now, sum: sum, ok: ok}
	return sum, ok
}
