package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/consulstate"
	"github.com/xds-server/xds-server/drain"
)

// MaxDeparted bounds the departures read from KV: entries beyond it are
// ignored (xds_ha_errors_total{op="decode_departed"}).
const MaxDeparted = 10000

// departQueue bounds the departure writes waiting for Consul; beyond it
// Record drops them (xds_ha_errors_total{op="departed_dropped"}): the
// local window stays in force.
const departQueue = 1024

// departOp is one queued departure write: a create, or a delete (back).
type departOp struct {
	d    drain.Departed
	back bool
}

// Record queues the departures first seen by this replica (written
// create-only: the first replica's removal time wins) and the
// re-registrations (their key deleted); it never blocks.
func (s *DrainStore) Record(departed, back []drain.Departed) {
	ops := make([]departOp, 0, len(departed)+len(back))
	for _, d := range back {
		ops = append(ops, departOp{d: d, back: true})
	}
	for _, d := range departed {
		ops = append(ops, departOp{d: d})
	}
	for _, op := range ops {
		select {
		case s.departQ <- op:
		default:
			s.cfg.Metrics.Errors.WithLabelValues("departed_dropped").Inc()
		}
	}
}

// OnDeparted sets the function Watch calls with the departures stored.
func (s *DrainStore) OnDeparted(apply func([]drain.Departed)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onDeparted = apply
}

// writeDeparted performs the queued departure writes until ctx is done:
// what is queued together goes in one transaction (at most consulstate.MaxTxnOps),
// and one by one when the transaction fails a check (another replica
// wrote one of the keys first).
func (s *DrainStore) writeDeparted(ctx context.Context) {
	for {
		var batch []departOp
		select {
		case <-ctx.Done():
			return
		case op := <-s.departQ:
			batch = append(batch, op)
		}
	more:
		for len(batch) < consulstate.MaxTxnOps {
			select {
			case op := <-s.departQ:
				batch = append(batch, op)
			default:
				break more
			}
		}
		wctx, cancel := context.WithTimeout(ctx, drain.StoreTimeout)
		s.writeBatch(wctx, batch)
		cancel()
	}
}

// writeBatch writes a batch of departures in one transaction, or one by
// one when it fails a check.
func (s *DrainStore) writeBatch(ctx context.Context, batch []departOp) {
	ops := make(api.TxnOps, 0, len(batch))
	kept, deleted := batch[:0], map[string]bool{}
	for _, op := range batch {
		if kv, ok := s.departTxnOp(op, deleted); ok {
			ops = append(ops, &api.TxnOp{KV: kv})
			kept = append(kept, op)
			deleted[kv.Key] = op.back
		}
	}
	if len(kept) <= 1 {
		for _, op := range kept {
			s.writeOne(ctx, op)
		}
		return
	}
	ok, _, err := consulstate.Txn(ctx, s.cfg.Client, ops)
	if err != nil {
		s.cfg.Metrics.Errors.WithLabelValues("departed_txn").Inc()
		s.cfg.Logger.Debug("could not write departures to consul; the local windows stay", "departures", len(kept), "error", err)
		return
	}
	s.cfg.Metrics.Writes.WithLabelValues("departed_txn").Inc()
	if !ok {
		for _, op := range kept {
			s.writeOne(ctx, op)
		}
		return
	}
	for key, del := range deleted {
		if del {
			s.forgetDeparted(key)
		}
	}
}

// departTxnOp is op as a transaction operation; false when there is
// nothing to write (a departure already stored and not deleted before it,
// or a delete of a key not read).
func (s *DrainStore) departTxnOp(op departOp, deleted map[string]bool) (*api.KVTxnOp, bool) {
	key := s.cfg.Layout.DepartedKey(op.d.Service, op.d.Endpoint.ID)
	s.mu.Lock()
	idx, stored := s.departedIdx[key]
	s.mu.Unlock()
	if op.back {
		return &api.KVTxnOp{Verb: api.KVDeleteCAS, Key: key, Index: idx}, stored
	}
	if stored && !deleted[key] {
		return nil, false // another replica's departure stands
	}
	val, err := json.Marshal(op.d)
	if err != nil {
		return nil, false
	}
	return &api.KVTxnOp{Verb: api.KVCAS, Key: key, Value: val, Index: 0}, true
}

// writeOne creates a departure's key if absent, or deletes it (by
// check-and-set on the index last read, so a newer departure stands).
func (s *DrainStore) writeOne(ctx context.Context, op departOp) {
	kv, ok := s.departTxnOp(op, nil)
	if !ok {
		return
	}
	kind, wo := "departed_put", (&api.WriteOptions{}).WithContext(ctx)
	var err error
	if op.back {
		kind = "departed_delete"
		ok, _, err = s.kv.DeleteCAS(&api.KVPair{Key: kv.Key, ModifyIndex: kv.Index}, wo)
	} else {
		ok, _, err = s.kv.CAS(&api.KVPair{Key: kv.Key, Value: kv.Value, ModifyIndex: 0}, wo)
	}
	if err != nil {
		s.cfg.Metrics.Errors.WithLabelValues(kind).Inc()
		s.cfg.Logger.Debug("could not write a departure to consul; the local window stays", "key", kv.Key, "error", err)
		return
	}
	s.cfg.Metrics.Writes.WithLabelValues(kind).Inc() // a failed check-and-set is a write too
	if ok && op.back {
		s.forgetDeparted(kv.Key)
	}
	if !ok {
		s.cfg.Logger.Debug("departure written or deleted by another replica first", "key", kv.Key)
	}
}

// forgetDeparted notes that key was deleted here (until the watch reads
// the folder again), so a new departure of the endpoint is written.
func (s *DrainStore) forgetDeparted(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.departedIdx, key)
}

// splitDeparted separates the departures folder from the admin drains.
func (s *DrainStore) splitDeparted(pairs api.KVPairs) (drains, departed api.KVPairs) {
	for _, p := range pairs {
		if strings.HasPrefix(p.Key, s.cfg.Layout.Departed()) {
			departed = append(departed, p)
		} else {
			drains = append(drains, p)
		}
	}
	return drains, departed
}

// passDeparted decodes the departures read, notes their indices and
// passes them on.
func (s *DrainStore) passDeparted(pairs api.KVPairs) []drain.Departed {
	list := s.decodeDeparted(pairs)
	idx := make(map[string]uint64, len(pairs))
	for _, p := range pairs {
		idx[p.Key] = p.ModifyIndex
	}
	s.mu.Lock()
	s.departedIdx = idx
	s.seen.Departed = list
	apply := s.onDeparted
	s.mu.Unlock()
	if apply != nil {
		apply(list)
	}
	return list
}

// decodeDeparted turns KV pairs into departures, skipping (and counting)
// the undecodable ones, those beyond the bounds and those beyond
// MaxDeparted. Whether a departure is served is drain's to judge (only
// endpoints discovery saw, within the drain window).
func (s *DrainStore) decodeDeparted(pairs api.KVPairs) []drain.Departed {
	out := make([]drain.Departed, 0, min(len(pairs), MaxDeparted))
	now := s.cfg.Now()
	for _, p := range pairs {
		err := s.checkKey(p.Key)
		var d drain.Departed
		if err == nil {
			d, err = decodeDeparted(p.Value)
		}
		if err == nil && s.cfg.Layout.DepartedKey(d.Service, d.Endpoint.ID) != p.Key {
			err = errors.New("key does not match the departure")
		}
		if err == nil && d.Until.After(now.Add(drain.MaxTTL)) {
			err = fmt.Errorf("removal time %v is more than %v away", d.Until.Format(time.RFC3339), drain.MaxTTL)
		}
		if err == nil && len(out) >= MaxDeparted {
			err = fmt.Errorf("more than %d departures", MaxDeparted)
		}
		if err != nil {
			s.bad.skip("decode_departed", p, err)
			continue
		}
		out = append(out, d)
	}
	return out
}

// decodeDeparted reads one departure value: at most maxDepartedValue
// bytes, names within MaxKVNameBytes, an endpoint with an IP address or
// DNS name and a port, a removal time.
func decodeDeparted(val []byte) (drain.Departed, error) {
	var d drain.Departed
	if len(val) > maxDepartedValue {
		return d, fmt.Errorf("ha: departure value: %d bytes, more than %d", len(val), maxDepartedValue)
	}
	if err := json.Unmarshal(val, &d); err != nil {
		return d, fmt.Errorf("ha: departure value: %w", err)
	}
	if d.Until.IsZero() {
		return d, errors.New("ha: departure value: needs a removal time")
	}
	if err := checkEndpoint(&d); err != nil {
		return d, fmt.Errorf("ha: departure value: %w", err)
	}
	return d, nil
}

// expireDeparted deletes the departures whose removal time passed (their
// key unchanged since read).
func (s *DrainStore) expireDeparted(ctx context.Context, pairs api.KVPairs, list []drain.Departed, now time.Time) {
	byKey := make(map[string]*api.KVPair, len(pairs))
	for _, p := range pairs {
		byKey[p.Key] = p
	}
	for _, d := range list {
		if now.Before(d.Until) {
			continue
		}
		p := byKey[s.cfg.Layout.DepartedKey(d.Service, d.Endpoint.ID)]
		if _, _, err := s.kv.DeleteCAS(&api.KVPair{Key: p.Key, ModifyIndex: p.ModifyIndex}, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
			s.cfg.Metrics.Errors.WithLabelValues("departed_expire").Inc()
			continue
		}
		s.cfg.Metrics.Writes.WithLabelValues("departed_expire").Inc()
	}
}
