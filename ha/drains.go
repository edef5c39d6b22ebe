package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/consulstate"
	"github.com/xds-server/xds-server/drain"
)

// MaxDrains bounds the admin drains read from KV: entries beyond it are
// ignored (xds_ha_errors_total{op="decode_drain"}). Admin drains name
// targets that exist, so a real fleet stays far below.
const MaxDrains = 10000

// DrainStoreConfig configures DrainStore.
type DrainStoreConfig struct {
	Client  *api.Client             // required
	Layout  Layout                  // keys under ha.consul.prefix
	Metrics *Metrics                // required
	Logger  *slog.Logger            // nil: slog.Default()
	Now     func() time.Time        // nil: time.Now; decides which drains expired
	Watch   consulstate.WatchConfig // Op, Failed and Logger are set by DrainStore
}

// DrainStore keeps the admin drains in Consul KV: it is the drain.Store
// of every replica when ha.enabled.
type DrainStore struct {
	cfg DrainStoreConfig
	kv  *api.KV

	mu     sync.Mutex
	seen   SeenDrains
	wrote  uint64 // KV index after this replica's last write
	last   uint64 // KV index of the last content read
	synced bool   // the watch read the folder (with its epoch) since its last failure

	applied   uint64        // KV index of the last content passed on
	appliedCh chan struct{} // closed and replaced whenever applied grows

	bad badEntries // entries skipped, counted and logged once each

	departQ     chan departOp          // departure writes waiting (Record)
	onDeparted  func([]drain.Departed) // OnDeparted
	departedIdx map[string]uint64      // departure key -> ModifyIndex last read
}

// SeenDrains is the last content of the drains folder a watch read.
type SeenDrains struct {
	Index  uint64        `json:"index"`            // KV index of the read; 0: nothing read yet
	Read   time.Time     `json:"read,omitzero"`    // when it was read
	Drains []drain.Admin `json:"drains,omitempty"` // the drains stored, expired ones included
	// Departed are the departures stored (drains/departed/), expired ones
	// included.
	Departed []drain.Departed `json:"departed,omitempty"`
}

// NewDrainStore returns a DrainStore.
func NewDrainStore(cfg DrainStoreConfig) (*DrainStore, error) {
	if cfg.Client == nil || cfg.Metrics == nil {
		return nil, fmt.Errorf("%w: drain store needs a Consul client and metrics", ErrInvalid)
	}
	if cfg.Layout.Prefix == "" {
		return nil, fmt.Errorf("%w: drain store needs a prefix", ErrInvalid)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Watch.Op, cfg.Watch.Logger = "watch_drains", cfg.Logger
	return &DrainStore{cfg: cfg, kv: cfg.Client.KV(), appliedCh: make(chan struct{}),
		departQ: make(chan departOp, departQueue),
		bad:     badEntries{log: cfg.Logger, errors: cfg.Metrics.Errors, now: cfg.Now}}, nil
}

// Put writes the drain a (with its absolute expiry).
func (s *DrainStore) Put(ctx context.Context, a drain.Admin) error {
	if err := s.writable(); err != nil {
		return err
	}
	val, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("ha: drain: %w", err)
	}
	if _, err := s.kv.Put(&api.KVPair{Key: s.cfg.Layout.Drain(a.Target), Value: val}, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		s.cfg.Metrics.Errors.WithLabelValues("drain_put").Inc()
		return fmt.Errorf("ha: drain put: %w", err)
	}
	s.cfg.Metrics.Writes.WithLabelValues("drain_put").Inc()
	s.awaitApplied(ctx, s.wroteAt(ctx))
	return nil
}

// Delete removes the drain of t.
func (s *DrainStore) Delete(ctx context.Context, t drain.Target) error {
	if err := s.writable(); err != nil {
		return err
	}
	if _, err := s.kv.Delete(s.cfg.Layout.Drain(t), (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		s.cfg.Metrics.Errors.WithLabelValues("drain_delete").Inc()
		return fmt.Errorf("ha: drain delete: %w", err)
	}
	s.cfg.Metrics.Writes.WithLabelValues("drain_delete").Inc()
	s.awaitApplied(ctx, s.wroteAt(ctx))
	return nil
}

// wroteAt notes and returns the drains folder's index after a write (a
// leader read, so it includes the write; deletes count through their
// tombstones): watch answers older than it are not passed on. A failed
// read returns 0.
func (s *DrainStore) wroteAt(ctx context.Context) uint64 {
	_, meta, err := s.kv.Keys(s.cfg.Layout.Drains(), "", (&api.QueryOptions{}).WithContext(ctx))
	if err != nil || meta == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wrote = max(s.wrote, meta.LastIndex)
	return meta.LastIndex
}

// awaitApplied waits until the watch has passed on a content at index or
// later, or ctx is done (the write stands either way).
func (s *DrainStore) awaitApplied(ctx context.Context, index uint64) {
	for {
		s.mu.Lock()
		done, ch := s.applied >= index, s.appliedCh
		s.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// Watch calls apply with every drain stored, at once and on every change,
// until ctx is done; expired drains are deleted (check-and-set, so a
// renewal in between wins). The folder holds an epoch key, created once;
// when it is missing (a fresh Consul, or one that lost its state), this
// replica writes it back together with the drains it knew, in one
// transaction that only succeeds if the key is still missing, so exactly
// one replica restores and no undrain made since is undone. Writes are
// refused (ErrUnavailable) until the watch has read the folder with its
// epoch after a failure.
func (s *DrainStore) Watch(ctx context.Context, apply func([]drain.Admin)) {
	list := func(q *api.QueryOptions) (api.KVPairs, *api.QueryMeta, error) {
		return s.kv.List(s.cfg.Layout.Drains(), q)
	}
	wc := s.cfg.Watch
	wc.Failed = func() {
		s.cfg.Metrics.Errors.WithLabelValues(wc.Op).Inc()
		s.setSynced(false)
	}
	go s.writeDeparted(ctx)
	consulstate.Watch(ctx, wc, list, func(all api.KVPairs, index uint64) {
		s.bad.begin()
		pairs, dpairs := s.splitDeparted(all)
		drains := s.decode(pairs)
		epoch := slices.ContainsFunc(pairs, func(p *api.KVPair) bool { return p.Key == s.epochKey() })
		known := s.next(index, epoch)
		if !epoch {
			s.restore(ctx, known, drains)
			return // what was written (here or by another replica) comes with the next answer
		}
		s.mu.Lock()
		stale := index < s.wrote
		if !stale {
			s.seen = SeenDrains{Index: index, Read: s.cfg.Now(), Drains: drains}
			s.synced = true
		}
		s.mu.Unlock()
		if stale {
			return
		}
		departed := s.passDeparted(dpairs)
		apply(drains)
		s.mu.Lock()
		s.applied = index
		close(s.appliedCh)
		s.appliedCh = make(chan struct{})
		s.mu.Unlock()
		s.expire(ctx, pairs, drains)
		s.expireDeparted(ctx, dpairs, departed, s.cfg.Now())
	})
}

func (s *DrainStore) setSynced(v bool) {
	s.mu.Lock()
	s.synced = v
	s.mu.Unlock()
}

// writable fails when the watch has not read the folder since a failure.
func (s *DrainStore) writable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.synced {
		return errors.New("ha: drains not in sync with consul yet (reconnecting)")
	}
	return nil
}

// epochKey marks the drains folder as written by a replica since Consul
// last lost its state.
func (s *DrainStore) epochKey() string { return s.cfg.Layout.Drains() + "_epoch" }

// next records a content read at index, with or without the epoch key,
// and returns the drains known before when the epoch key is missing. An
// index that goes backwards, or a missing epoch, forgets the index of
// this replica's last write (indices started over).
func (s *DrainStore) next(index uint64, epoch bool) []drain.Admin {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index < s.last || !epoch {
		s.wrote, s.applied = 0, 0
		s.synced = false
	}
	s.last = index
	if epoch {
		return nil
	}
	return s.seen.Drains
}

// restore writes the epoch key and the drains known (still in force, and
// missing from have) in transactions of at most consulstate.MaxTxnOps operations; the
// first one checks that the epoch key is still missing, the others create
// only.
func (s *DrainStore) restore(ctx context.Context, known, have []drain.Admin) {
	now := s.cfg.Now()
	in := map[drain.Target]bool{}
	for _, a := range have {
		in[a.Target] = true
	}
	ops := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckNotExists, Key: s.epochKey()}},
		{KV: &api.KVTxnOp{Verb: api.KVSet, Key: s.epochKey(), Value: []byte(now.UTC().Format(time.RFC3339))}},
	}
	n := 0
	for _, a := range known {
		if in[a.Target] || (!a.Until.IsZero() && !now.Before(a.Until)) {
			continue
		}
		val, err := json.Marshal(a)
		if err != nil {
			continue
		}
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: s.cfg.Layout.Drain(a.Target), Value: val, Index: 0}})
		n++
	}
	for i := 0; i < len(ops); i += consulstate.MaxTxnOps {
		ok, _, err := consulstate.Txn(ctx, s.cfg.Client, ops[i:min(i+consulstate.MaxTxnOps, len(ops))])
		if err != nil {
			s.cfg.Metrics.Errors.WithLabelValues("drain_restore").Inc()
			s.cfg.Logger.Warn("could not write the drains epoch back to consul", "error", err)
			return
		}
		s.cfg.Metrics.Writes.WithLabelValues("drain_restore").Inc()
		if !ok {
			return // another replica restored first (or a drain exists): its writes stand
		}
	}
	if len(known) > 0 {
		s.cfg.Logger.Warn("consul had lost the drains (no epoch key); the drains known were written back", "drains", n)
	}
}

// Seen returns the last content read.
func (s *DrainStore) Seen() SeenDrains {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen
}

// decode turns KV pairs into drains, skipping (and counting) the
// undecodable ones, those beyond the bounds and those beyond MaxDrains.
func (s *DrainStore) decode(pairs api.KVPairs) []drain.Admin {
	out := make([]drain.Admin, 0, min(len(pairs), MaxDrains))
	now := s.cfg.Now()
	for _, p := range pairs {
		if p.Key == s.epochKey() {
			continue
		}
		err := s.checkKey(p.Key)
		var a drain.Admin
		if err == nil {
			a, err = decodeDrain(p.Value)
		}
		if err == nil && s.cfg.Layout.Drain(a.Target) != p.Key {
			err = errors.New("key does not match the drain's target")
		}
		if err == nil && !a.Until.IsZero() && a.Until.After(now.Add(drain.MaxTTL)) {
			err = fmt.Errorf("expiry %v is more than %v away", a.Until.Format(time.RFC3339), drain.MaxTTL)
		}
		if err == nil && len(out) >= MaxDrains {
			err = fmt.Errorf("more than %d drains", MaxDrains)
		}
		if err != nil {
			s.bad.skip("decode_drain", p, err)
			continue
		}
		out = append(out, a)
	}
	return out
}

// checkKey refuses a key too long to hold names within MaxKVNameBytes.
func (s *DrainStore) checkKey(key string) error {
	if n := len(key) - len(s.cfg.Layout.Drains()); n > maxKeyBytes {
		return fmt.Errorf("key is %d bytes past the folder, more than %d", n, maxKeyBytes)
	}
	return nil
}

// decodeDrain reads one drain value: at most maxDrainValue bytes, names
// within MaxKVNameBytes, a TTL within drain.MaxTTL.
func decodeDrain(val []byte) (drain.Admin, error) {
	var a drain.Admin
	if len(val) > maxDrainValue {
		return a, fmt.Errorf("ha: drain value: %d bytes, more than %d", len(val), maxDrainValue)
	}
	if err := json.Unmarshal(val, &a); err != nil {
		return a, fmt.Errorf("ha: drain value: %w", err)
	}
	t := a.Target
	if (t.Node == "") == (t.Service == "") || (t.Node != "" && t.Endpoint != "") {
		return a, errors.New("ha: drain value: target needs a node, or a service (and optionally an endpoint)")
	}
	for _, n := range []struct{ what, name string }{{"service", t.Service}, {"endpoint", t.Endpoint}, {"node", t.Node}} {
		if n.name == "" {
			continue
		}
		if err := checkName(n.what, n.name); err != nil {
			return a, fmt.Errorf("ha: drain value: %w", err)
		}
	}
	if !a.Until.IsZero() && (a.Since.IsZero() || a.Until.Sub(a.Since) > drain.MaxTTL || a.Until.Before(a.Since)) {
		return a, fmt.Errorf("ha: drain value: since and until must be set, until within %v after since", drain.MaxTTL)
	}
	return a, nil
}

// expire deletes the drains that expired (their key unchanged since read).
func (s *DrainStore) expire(ctx context.Context, pairs api.KVPairs, drains []drain.Admin) {
	now := s.cfg.Now()
	byKey := make(map[string]*api.KVPair, len(pairs))
	for _, p := range pairs {
		byKey[p.Key] = p
	}
	for _, a := range drains {
		if a.Until.IsZero() || now.Before(a.Until) {
			continue
		}
		p := byKey[s.cfg.Layout.Drain(a.Target)]
		if _, _, err := s.kv.DeleteCAS(&api.KVPair{Key: p.Key, ModifyIndex: p.ModifyIndex}, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
			s.cfg.Metrics.Errors.WithLabelValues("drain_expire").Inc()
			continue
		}
		s.cfg.Metrics.Writes.WithLabelValues("drain_expire").Inc()
	}
}
