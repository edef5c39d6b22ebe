package xdscache

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// snapType is one type of a snapshot.
type snapType struct {
	items   map[string]types.ResourceWithTTL
	hashes  map[string]string // resource name -> content hash (the snapshot's version map)
	version string
}

func typeIn(s *cache.Snapshot, kind types.ResponseType, url string) snapType {
	if s == nil || kind < 0 || kind >= types.UnknownType {
		return snapType{}
	}
	return snapType{items: s.Resources[kind].Items, hashes: s.VersionMap[url], version: s.Resources[kind].Version}
}

// hash is a resource's content hash (the type's version if the snapshot
// has no version map, which ours always have).
func (t snapType) hash(name string) string {
	if v, ok := t.hashes[name]; ok {
		return v
	}
	return t.version
}

// all lists every resource name of the type, sorted (read only: it may
// be shared).
func (t snapType) all() []string {
	if len(t.hashes) == len(t.items) {
		return namesOf(t.hashes) // the version map names every item: kept per map
	}
	return slices.Sorted(maps.Keys(t.items))
}

// hashesOf maps names to their hashes.
func (t snapType) hashesOf(names []string) map[string]string {
	if len(names) == len(t.items) && len(t.hashes) == len(t.items) {
		return maps.Clone(t.hashes) // all of them
	}
	out := make(map[string]string, len(names))
	for _, n := range names {
		out[n] = t.hash(n)
	}
	return out
}

// whole is what a stream that has every resource of t has, at epoch.
func (t snapType) whole(epoch uint64) map[string]string {
	if len(t.hashes) != len(t.items) {
		return t.hashesOf(t.all())
	}
	return map[string]string{versionKey: t.version + "@" + strconv.FormatUint(epoch, 10)}
}

// versionKey, in what a stream has (its returned resources), stands for
// every resource of the type at a version: what a wildcard subscription
// has after every response. Reported so, the stream holds a map of one
// entry, not a copy of the type's version map (the same for every node of
// a group); the version map itself is found in the node's current or
// previous snapshot (holding). Its value is "version@epoch", epoch being
// the node's snapshot count when the response was made. A wildcard delta
// stream's map is the same, resolved by the node's record of what it
// reported (sentMaps, deltaHas). The server never adds to the map of a
// SotW stream; if it drops the key (a subscription
// turned named), the stream is taken to have nothing, and is sent what it
// asks for. No resource name starts with a NUL.
const versionKey = "\x00version"

// history is what a node's state knows of a type's past.
type history struct {
	prev   snapType // the type before its last change
	epoch  uint64   // the node's snapshot count
	lossAt uint64   // the count at the latest snapshot that dropped a resource of the type
}

// hasView is what a stream has (name -> content hash), as holding
// resolves it: a map, one entry of which (carrier) may carry the epoch of
// the response that reported it ("hash@epoch", see stamp).
type hasView struct {
	m       map[string]string
	carrier string // "" if none
	hash    string // the carrier's hash
	shared  bool   // m is a snapshot's version map (immutable, the same for a group)
}

func (h hasView) len() int { return len(h.m) }

func (h hasView) get(name string) (string, bool) {
	v, ok := h.m[name]
	if ok && name == h.carrier {
		return h.hash, true
	}
	return v, ok
}

func (h hasView) each(f func(name, hash string)) {
	for n, v := range h.m {
		if n == h.carrier {
			v = h.hash
		}
		f(n, v)
	}
}

// stamp records in next (named load assignments or route
// configurations) the epoch at which it is reported, on one entry: the
// server deletes no other entries from what a stream has than those it
// stops naming, so the epoch survives as long as that entry (see holding).
func stamp(next map[string]string, epoch uint64) {
	for n, v := range next {
		next[n] = v + "@" + strconv.FormatUint(epoch, 10)
		return
	}
}

// holding resolves what a stream has from its returned resources.
// versionKey stands for the version map of t or of h.prev. known is false
// when it stands for an older version, or, for load assignments and route
// configurations (dropsWithReferrer), when one of them left the snapshot
// since the stream's last response (the epoch stamped on it, see stamp,
// or in versionKey's value): a client drops a load assignment or route
// configuration when its cluster or listener goes, so a stream whose
// response was on its way then may lack one that came back since,
// unchanged, and must be sent all it asks for. A named stream that lost
// its stamp (it stopped naming that entry) is taken to be behind too.
func holding(returned map[string]string, t snapType, h history, dropsWithReferrer bool) (has hasView, known bool) {
	m, ok := returned[versionKey]
	if !ok {
		has = hasView{m: returned}
		if !dropsWithReferrer || len(returned) == 0 {
			return has, true
		}
		for n, v := range returned {
			if at := strings.LastIndexByte(v, '@'); at >= 0 {
				epoch, err := strconv.ParseUint(v[at+1:], 10, 64)
				has.carrier, has.hash = n, v[:at]
				return has, err == nil && epoch >= h.lossAt
			}
		}
		return has, h.lossAt == 0
	}
	at := strings.LastIndexByte(m, '@')
	epoch, err := strconv.ParseUint(m[at+1:], 10, 64)
	switch v := m[:max(at, 0)]; {
	case at < 0 || err != nil || dropsWithReferrer && epoch < h.lossAt:
		return hasView{}, false
	case v == t.version && len(t.hashes) == len(t.items):
		return hasView{m: t.hashes, shared: true}, true
	case v == h.prev.version && h.prev.hashes != nil:
		return hasView{m: h.prev.hashes, shared: true}, true
	}
	return hasView{}, false
}

// changed lists (sorted) the requested resources in t whose hash differs
// from has's, or that has lacks.
func (t snapType) changed(wildcard bool, subscribed map[string]struct{}, has hasView) []string {
	var out []string
	if wildcard {
		for name := range t.items {
			if v, ok := has.get(name); !ok || v != t.hash(name) {
				out = append(out, name)
			}
		}
	} else {
		for name := range subscribed {
			if _, ok := t.items[name]; !ok {
				continue
			}
			if v, ok := has.get(name); !ok || v != t.hash(name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// lost reports whether has holds a resource that t does not.
func (t snapType) lost(has hasView) bool {
	for name := range has.m {
		if _, ok := t.items[name]; !ok {
			return true
		}
	}
	return false
}

// requested lists (sorted) the requested resources in t.
func (t snapType) requested(wildcard bool, subscribed map[string]struct{}) []string {
	if wildcard {
		return t.all()
	}
	out := make([]string, 0, len(subscribed))
	for name := range subscribed {
		if _, ok := t.items[name]; ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// partial reports whether SotW responses of kind carry only what changed.
func partial(kind types.ResponseType) bool {
	return kind == types.Endpoint || kind == types.Route
}

// anyOf is res as a response carries it: a wire resource's shared Any,
// else a new one.
func anyOf(res types.Resource, url string) (*anypb.Any, error) {
	if w, ok := res.(*wire); ok && w.any.GetTypeUrl() == url {
		return w.any, nil
	}
	b, err := cache.MarshalResource(res)
	if err != nil {
		return nil, fmt.Errorf("xdscache: marshal %s: %w", cache.GetResourceName(res), err)
	}
	return &anypb.Any{TypeUrl: url, Value: b}, nil
}
