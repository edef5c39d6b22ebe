package xds

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/xds-server/xds-server/nodeindex"
)

// endpointSlots gives the endpoints of steady-subset services stable
// slots, the task indices of Ringsteady: an endpoint keeps its slot while
// it is registered and, for subsetting.index_ttl after it leaves, so a
// backend restarting under the same id comes back to its place and nobody's
// subset changes. Slots live in the client index table (group
// "endpoints:<service>"): in this process with index_source local (assigned
// in id order, so replicas that see the same history agree), in Consul KV
// with index_source consul (shared by every replica). Used by the
// reconciler under its lock.
type endpointSlots struct {
	x     *indexer
	known map[string]map[string]slotRef // service -> endpoint id -> its slot
}

// slotRef is an endpoint's slot and the table that gave it.
type slotRef struct {
	slot     int
	fallback bool // from this process's table, after the configured one failed
}

func newEndpointSlots(x *indexer) *endpointSlots {
	return &endpointSlots{x: x, known: map[string]map[string]slotRef{}}
}

// assign returns the slots of a service's endpoints (ids sorted): known
// ones keep theirs, new ones acquire one, departed ones release theirs.
func (e *endpointSlots) assign(service string, ids []string) map[string]int {
	cur := e.known[service]
	if cur == nil {
		cur = map[string]slotRef{}
		e.known[service] = cur
	}
	group := "endpoints:" + service
	var fresh []string
	for _, id := range ids {
		if _, ok := cur[id]; !ok {
			fresh = append(fresh, id)
		}
	}
	for id, ref := range cur {
		if _, still := slices.BinarySearch(ids, id); !still {
			e.release(group, id, ref)
			delete(cur, id)
		}
	}
	for id, ref := range e.acquire(group, fresh) {
		cur[id] = ref
	}
	out := make(map[string]int, len(cur))
	for id, ref := range cur {
		out[id] = ref.slot
	}
	return out
}

// retain releases the slots of every service not in keep.
func (e *endpointSlots) retain(keep map[string]bool) {
	for _, service := range slices.Sorted(maps.Keys(e.known)) {
		if keep[service] {
			continue
		}
		for id, ref := range e.known[service] {
			e.release("endpoints:"+service, id, ref)
		}
		delete(e.known, service)
	}
}

// acquire gets slots for ids: one by one in id order from this process's
// table (deterministic), concurrently from a shared table (whose client
// batches them into few round trips).
func (e *endpointSlots) acquire(group string, ids []string) map[string]slotRef {
	out := make(map[string]slotRef, len(ids))
	if _, local := e.x.cfg.Table.(*nodeindex.Local); local || len(ids) < 2 {
		for _, id := range ids {
			out[id] = e.acquireOne(group, id)
		}
		return out
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			ref := e.acquireOne(group, id)
			mu.Lock()
			out[id] = ref
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func (e *endpointSlots) acquireOne(group, id string) slotRef {
	ctx, cancel := context.WithTimeout(context.Background(), e.x.cfg.Timeout)
	defer cancel()
	s, err := e.x.cfg.Table.Acquire(ctx, group, id)
	if err == nil {
		return slotRef{slot: s}
	}
	e.x.m.indexErrors.WithLabelValues("acquire").Inc()
	s, _ = e.x.fallback.Acquire(ctx, group, id)
	e.x.log.Error("endpoint slot table failed; using this process's table", "group", group, "endpoint", id, "slot", s, "error", err)
	return slotRef{slot: s, fallback: true}
}

func (e *endpointSlots) release(group, id string, ref slotRef) {
	ctx, cancel := context.WithTimeout(context.Background(), e.x.cfg.Timeout)
	defer cancel()
	table := e.x.cfg.Table
	if ref.fallback {
		table = e.x.fallback
	}
	if err := table.Release(ctx, group, id); err != nil {
		e.x.m.indexErrors.WithLabelValues("release").Inc()
		e.x.log.Error("endpoint slot release failed", "group", group, "endpoint", id, "error", err)
	}
}
