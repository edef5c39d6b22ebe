package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

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

// writeDeparted performs the queued departure writes until ctx is done.
func (s *DrainStore) writeDeparted(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case op := <-s.departQ:
			wctx, cancel := context.WithTimeout(ctx, drain.StoreTimeout)
			s.writeOne(wctx, op)
			cancel()
		}
	}
}

// writeOne creates a departure's key if absent, or deletes it (by
// check-and-set on the index last read, so a newer departure stands).
func (s *DrainStore) writeOne(ctx context.Context, op departOp) {
	key := s.cfg.Layout.DepartedKey(op.d.Service, op.d.Endpoint.ID)
	wo := (&api.WriteOptions{}).WithContext(ctx)
	kind, ok, err := "departed_put", false, error(nil)
	if op.back {
		kind = "departed_delete"
		s.mu.Lock()
		idx, ok := s.departedIdx[key]
		s.mu.Unlock()
		if !ok {
			return
		}
		ok, _, err = s.kv.DeleteCAS(&api.KVPair{Key: key, ModifyIndex: idx}, wo)
	} else {
		var val []byte
		if val, err = json.Marshal(op.d); err == nil {
			ok, _, err = s.kv.CAS(&api.KVPair{Key: key, Value: val, ModifyIndex: 0}, wo)
		}
	}
	if err != nil {
		s.cfg.Metrics.Errors.WithLabelValues(kind).Inc()
		s.cfg.Logger.Debug("could not write a departure to consul; the local window stays", "key", key, "error", err)
		return
	}
	s.cfg.Metrics.Writes.WithLabelValues(kind).Inc() // a failed check-and-set is a write too
	if !ok {
		s.cfg.Logger.Debug("departure written by another replica first; its removal time stands", "key", key)
	}
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
// the undecodable ones and those beyond MaxDeparted.
func (s *DrainStore) decodeDeparted(pairs api.KVPairs) []drain.Departed {
	out := make([]drain.Departed, 0, min(len(pairs), MaxDeparted))
	for _, p := range pairs {
		d, err := decodeDeparted(p.Value)
		if err == nil && s.cfg.Layout.DepartedKey(d.Service, d.Endpoint.ID) != p.Key {
			err = errors.New("key does not match the departure")
		}
		if err == nil && len(out) >= MaxDeparted {
			err = fmt.Errorf("more than %d departures", MaxDeparted)
		}
		if err != nil {
			s.cfg.Metrics.Errors.WithLabelValues("decode_departed").Inc()
			s.cfg.Logger.Warn("ignoring a departure in Consul KV", "key", p.Key, "error", err)
			continue
		}
		out = append(out, d)
	}
	return out
}

// decodeDeparted reads one departure value.
func decodeDeparted(val []byte) (drain.Departed, error) {
	var d drain.Departed
	if err := json.Unmarshal(val, &d); err != nil {
		return d, fmt.Errorf("ha: departure value: %w", err)
	}
	if d.Service == "" || d.Endpoint.ID == "" || d.Until.IsZero() {
		return d, errors.New("ha: departure value: needs a service, an endpoint id and a removal time")
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
