package drain

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrUnavailable is wrapped by Manager.Set and Delete when the Store
// cannot record the change (Consul unreachable): nothing changed. The
// admin API answers 503.
var ErrUnavailable = errors.New("drain: drain store unavailable")

// StoreTimeout bounds one Store write of Set or Delete.
const StoreTimeout = 5 * time.Second

// Store keeps the admin drains outside this process, shared by every
// replica (ha.DrainStore keeps them in Consul KV). Without a Store (the
// default) admin drains live in Manager's memory.
type Store interface {
	// Put records an admin drain, replacing one of the same target; it
	// returns once Watch has passed on a content that includes it (or ctx
	// is done: the write stands, it is applied when the watch catches up).
	Put(ctx context.Context, a Admin) error
	// Delete removes the admin drain of t, if any; it returns as Put does.
	Delete(ctx context.Context, t Target) error
	// Watch calls apply with every admin drain in the store (expired ones
	// may be included), first as soon as it can read them and then on
	// every change, until ctx is done. A content older than the Store's
	// own last write is never passed on. A store it cannot read is
	// retried; apply is not called then (the drains known stay).
	Watch(ctx context.Context, apply func([]Admin))
}

// Watch applies the admin drains of cfg.Store until ctx is done (a no-op
// without a Store): this Manager's admin drains become exactly the
// store's.
func (s *Manager) Watch(ctx context.Context) {
	if s.cfg.Store == nil {
		return
	}
	if s.dep != nil {
		s.dep.OnDeparted(s.replaceDeparted)
	}
	s.cfg.Store.Watch(ctx, s.replace)
}

// replaceDeparted makes the shared departures those of list.
func (s *Manager) replaceDeparted(list []Departed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d.ReplaceDeparted(list) {
		s.applyLocked()
	}
}

// replace makes the admin drains those of list.
func (s *Manager) replace(list []Admin) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := !s.loaded
	s.loaded = true
	if s.d.ReplaceAdmin(list) || first {
		s.applyLocked()
	}
}

// store records a Set or Delete in the Store (a no-op without one). s.mu
// must not be held: the write may wait for Consul.
func (s *Manager) store(put *Admin, del Target) error {
	if s.cfg.Store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
	defer cancel()
	var err error
	if put != nil {
		err = s.cfg.Store.Put(ctx, *put)
	} else {
		err = s.cfg.Store.Delete(ctx, del)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// ReplaceAdmin makes the admin drains exactly list and reports whether
// that changed any.
func (d *Overlay) ReplaceAdmin(list []Admin) bool {
	next := make(map[Target]Admin, len(list))
	for _, a := range list {
		next[a.Target] = a
	}
	changed := len(next) != len(d.admin)
	for t, a := range next {
		old, ok := d.admin[t]
		changed = changed || !ok || !old.Since.Equal(a.Since) || !old.Until.Equal(a.Until)
	}
	d.admin = next
	return changed
}

// hasAdmin reports whether an admin drain of t is in force at now.
func (d *Overlay) hasAdmin(t Target, now time.Time) bool {
	a, ok := d.admin[t]
	return ok && (a.Until.IsZero() || now.Before(a.Until))
}
