package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/drain"
)

// MaxDrains bounds the admin drains read from KV: entries beyond it are
// ignored (xds_ha_errors_total{op="decode_drain"}). Admin drains name
// targets that exist, so a real fleet stays far below.
const MaxDrains = 10000

// DrainStoreConfig configures DrainStore.
type DrainStoreConfig struct {
	Client  *api.Client      // required
	Layout  Layout           // keys under ha.consul.prefix
	Metrics *Metrics         // required
	Logger  *slog.Logger     // nil: slog.Default()
	Now     func() time.Time // nil: time.Now; decides which drains expired
	Watch   WatchConfig      // Op, Metrics and Logger are set by DrainStore
}

// DrainStore keeps the admin drains in Consul KV: it is the drain.Store
// of every replica when ha.enabled.
type DrainStore struct {
	cfg DrainStoreConfig
	kv  *api.KV

	mu   sync.Mutex
	seen SeenDrains
}

// SeenDrains is the last content of the drains folder a watch read.
type SeenDrains struct {
	Index  uint64        `json:"index"`            // KV index of the read; 0: nothing read yet
	Read   time.Time     `json:"read,omitzero"`    // when it was read
	Drains []drain.Admin `json:"drains,omitempty"` // the drains stored, expired ones included
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
	cfg.Watch.Op, cfg.Watch.Metrics, cfg.Watch.Logger = "watch_drains", cfg.Metrics, cfg.Logger
	return &DrainStore{cfg: cfg, kv: cfg.Client.KV()}, nil
}

// Put writes the drain a (with its absolute expiry) and returns the KV
// index after it.
func (s *DrainStore) Put(ctx context.Context, a drain.Admin) (uint64, error) {
	val, err := json.Marshal(a)
	if err != nil {
		return 0, fmt.Errorf("ha: drain: %w", err)
	}
	if _, err := s.kv.Put(&api.KVPair{Key: s.cfg.Layout.Drain(a.Target), Value: val}, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		s.cfg.Metrics.Errors.WithLabelValues("drain_put").Inc()
		return 0, fmt.Errorf("ha: drain put: %w", err)
	}
	s.cfg.Metrics.Writes.WithLabelValues("drain_put").Inc()
	return s.indexAfterWrite(ctx), nil
}

// Delete removes the drain of t and returns the KV index after it.
func (s *DrainStore) Delete(ctx context.Context, t drain.Target) (uint64, error) {
	if _, err := s.kv.Delete(s.cfg.Layout.Drain(t), (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		s.cfg.Metrics.Errors.WithLabelValues("drain_delete").Inc()
		return 0, fmt.Errorf("ha: drain delete: %w", err)
	}
	s.cfg.Metrics.Writes.WithLabelValues("drain_delete").Inc()
	return s.indexAfterWrite(ctx), nil
}

// indexAfterWrite reads the drains folder's index (a leader read, so it
// includes the write just made; deletes count through their tombstones).
// A failed read returns 0: the write is durable, only the index is
// unknown.
func (s *DrainStore) indexAfterWrite(ctx context.Context) uint64 {
	_, meta, err := s.kv.Keys(s.cfg.Layout.Drains(), "", (&api.QueryOptions{}).WithContext(ctx))
	if err != nil || meta == nil {
		return 0
	}
	return meta.LastIndex
}

// Watch calls apply with every drain stored, at once and on every change,
// until ctx is done; expired drains are deleted (check-and-set, so a
// renewal in between wins).
func (s *DrainStore) Watch(ctx context.Context, apply func(drain.Drains)) {
	list := func(q *api.QueryOptions) (api.KVPairs, *api.QueryMeta, error) {
		return s.kv.List(s.cfg.Layout.Drains(), q)
	}
	Watch(ctx, s.cfg.Watch, list, func(pairs api.KVPairs, index uint64) {
		d := drain.Drains{Index: index, Drains: s.decode(pairs)}
		s.mu.Lock()
		s.seen = SeenDrains{Index: index, Read: s.cfg.Now(), Drains: d.Drains}
		s.mu.Unlock()
		apply(d)
		s.expire(ctx, pairs, d.Drains)
	})
}

// Seen returns the last content read.
func (s *DrainStore) Seen() SeenDrains {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen
}

// decode turns KV pairs into drains, skipping (and counting) the
// undecodable ones and those beyond MaxDrains.
func (s *DrainStore) decode(pairs api.KVPairs) []drain.Admin {
	out := make([]drain.Admin, 0, min(len(pairs), MaxDrains))
	for _, p := range pairs {
		a, err := decodeDrain(p.Value)
		if err == nil && s.cfg.Layout.Drain(a.Target) != p.Key {
			err = fmt.Errorf("key does not match target %+v", a.Target)
		}
		if err == nil && len(out) >= MaxDrains {
			err = fmt.Errorf("more than %d drains", MaxDrains)
		}
		if err != nil {
			s.cfg.Metrics.Errors.WithLabelValues("decode_drain").Inc()
			s.cfg.Logger.Warn("ignoring a drain in Consul KV", "key", p.Key, "error", err)
			continue
		}
		out = append(out, a)
	}
	return out
}

// decodeDrain reads one drain value.
func decodeDrain(val []byte) (drain.Admin, error) {
	var a drain.Admin
	if err := json.Unmarshal(val, &a); err != nil {
		return a, fmt.Errorf("ha: drain value: %w", err)
	}
	t := a.Target
	if (t.Node == "") == (t.Service == "") || (t.Node != "" && t.Endpoint != "") {
		return a, errors.New("ha: drain value: target needs a node, or a service (and optionally an endpoint)")
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
