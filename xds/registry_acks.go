package xds

import (
	"maps"
	"sync"
)

// ackedVersions are a node's acknowledged versions by type URL, with their
// own lock: every SotW ACK of every node records one, and the registry's
// lock is the fleet's.
type ackedVersions struct {
	mu sync.Mutex
	m  map[string]string
}

// clone copies the versions (nil for a nil a).
func (a *ackedVersions) clone() map[string]string {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.m)
}

// ack records the version of typeURL a stream's node acknowledged,
// without the registry's lock.
func (r *registry) ack(stream int64, typeURL, version string) {
	v, ok := r.byStream.Load(stream)
	if !ok {
		return
	}
	st := v.(*streamState)
	st.mu.Lock()
	a := st.acked
	st.mu.Unlock()
	if a != nil {
		a.mu.Lock()
		a.m[typeURL] = version
		a.mu.Unlock()
	}
}
