package xds

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/xds-server/xds-server/nodeindex"
)

// Endpoint slots taken from this process's table while the shared one
// failed would otherwise stay for as long as their endpoints are
// registered: this replica would keep planning subsets over slots no other
// replica uses, and send nodes other subsets than its peers, long after
// Consul came back. Healing retries the shared table for them (Server.Expire,
// periodically) and rebuilds the services whose slots it could replace.

// fallbacks lists, by service, the endpoints holding slots from this
// process's table (sorted). Used under the reconciler's lock.
func (e *endpointSlots) fallbacks() map[string][]string {
	var out map[string][]string
	for service, cur := range e.known {
		for id, ref := range cur {
			if ref.fallback {
				if out == nil {
					out = map[string][]string{}
				}
				out[service] = append(out[service], id)
			}
		}
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}

// tryShared acquires the slots of todo (service -> endpoint ids) from the
// shared table, concurrently, without falling back; it returns the slots
// it got. It touches only the table (no lock needed).
func (e *endpointSlots) tryShared(todo map[string][]string) map[string]map[string]int {
	out := map[string]map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, service := range slices.Sorted(maps.Keys(todo)) {
		for _, id := range todo[service] {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), e.x.cfg.Timeout)
				defer cancel()
				s, err := e.x.cfg.Table.Acquire(ctx, "endpoints:"+service, id)
				if err != nil {
					e.x.m.indexErrors.WithLabelValues("acquire").Inc()
					return
				}
				mu.Lock()
				if out[service] == nil {
					out[service] = map[string]int{}
				}
				out[service][id] = s
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return out
}

// adopt replaces fallback slots by the shared ones got, releasing the
// fallback ones; a shared slot whose endpoint left meanwhile (or no longer
// holds a fallback slot) is released again. It returns the services whose
// slots changed. Used under the reconciler's lock.
func (e *endpointSlots) adopt(got map[string]map[string]int) []string {
	var changed []string
	for _, service := range slices.Sorted(maps.Keys(got)) {
		group := "endpoints:" + service
		for id, s := range got[service] {
			ref, ok := e.known[service][id]
			if !ok || !ref.fallback {
				e.release(group, id, slotRef{slot: s})
				continue
			}
			e.release(group, id, ref)
			e.known[service][id] = slotRef{slot: s}
			e.x.m.slotsHealed.Inc()
			if len(changed) == 0 || changed[len(changed)-1] != service {
				changed = append(changed, service)
			}
		}
	}
	return changed
}

// healSlots retries the shared table for fallback endpoint slots and, if
// it replaced any, queues a rebuild of their services. The table is called
// without the reconciler's lock held, so an outage never stalls a pass.
func (r *reconciler) healSlots() {
	r.mu.Lock()
	todo := r.slots.fallbacks()
	r.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	got := r.slots.tryShared(todo)
	if len(got) == 0 {
		return
	}
	r.mu.Lock()
	changed := r.slots.adopt(got)
	for _, service := range changed {
		delete(r.memo, service) // retranslated, and replanned over its new slots
	}
	r.mu.Unlock()
	if len(changed) > 0 {
		r.log.Info("endpoint slots moved back to the shared table", "services", changed)
		r.redo(func() {})
	}
}

// Client indices have the same problem: a node placed by this process's
// table (index source "fallback") would keep that index for as long as it
// stays connected, possibly the index another replica's node holds in the
// shared table. healIndices gives such nodes their shared index once the
// shared table answers again.

// healIndices retries the shared table for connected nodes whose index
// came from this process's table; it returns whether any node moved (its
// snapshot must then be rebuilt). It stops at the first failure: the
// shared table is still down.
func (x *indexer) healIndices(reg *registry) bool {
	if x.cfg.Table == nodeindex.Table(x.fallback) {
		return false
	}
	moved := false
	for _, n := range reg.list() {
		if n.IndexSource != indexFallback || n.Streams == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), x.cfg.Timeout)
		i, err := x.cfg.Table.Acquire(ctx, n.Group, n.ID)
		cancel()
		if err != nil {
			x.m.indexErrors.WithLabelValues("acquire").Inc()
			return moved
		}
		if !reg.healIndex(n.ID, n.Group, i, x.tableName()) {
			// The node left (or was placed anew) meanwhile: give it back.
			x.releaseFrom(x.cfg.Table, n.Group, n.ID)
			continue
		}
		x.releaseFrom(x.fallback, n.Group, n.ID)
		x.m.indicesHealed.Inc()
		x.log.Info("node index moved back to the shared table", "node", clip(n.ID), "group", clip(n.Group), "from", n.Index, "to", i)
		moved = true
	}
	return moved
}

func (x *indexer) releaseFrom(t nodeindex.Table, group, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), x.cfg.Timeout)
	defer cancel()
	if err := t.Release(ctx, group, id); err != nil {
		x.m.indexErrors.WithLabelValues("release").Inc()
		x.log.Error("client index release failed; it expires with the table's own rules", "node", clip(id), "group", clip(group), "error", err)
	}
}

// healIndex gives a connected node placed by this process's table its
// index from source, unless it left or was placed anew meanwhile.
func (r *registry) healIndex(id, group string, index int, source string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	node, ok := r.nodes[id]
	if !ok || node.Streams == 0 || node.IndexSource != indexFallback || node.Group != group {
		return false
	}
	node.Index, node.IndexSource = index, source
	return true
}
