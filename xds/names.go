package xds

import (
	"hash/maphash"
	"maps"
	"slices"
	"sync"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-server/xds-server/internal/logclip"
)

// Resource names a node subscribes to. go-control-plane keeps, per stream
// and type, every name the node subscribes to (a SotW request names the
// whole set, delta requests add to it) and what a delta stream says it
// has (initial_resource_versions): unbounded, four delta streams of a
// million made-up names each pinned 466 MiB. The nameBook bounds them
// before go-control-plane keeps anything of a request:
//
//   - per stream and type, at most NameLimits.PerStream names: a SotW
//     request naming more, a delta request subscribing to (or saying it
//     has) more, and a delta stream whose subscriptions add up to more
//     (nodeCache.subscribed) are refused;
//   - per node, over all its streams, at most NameLimits.UnknownPerNode
//     unknown names: names not in the node's snapshot when subscribed to
//     (an Envoy subscribes only to the routes and load assignments of its
//     own listeners and clusters; a gRPC client names the listener of each
//     of its targets). A type that is not one of go-control-plane's counts
//     as one unknown name, so a stream's types are bounded too. An unknown
//     name is at most MaxResourceNameBytes long.
//
// A refused request ends its stream with ResourceExhausted (InvalidArgument
// for a name too long). A node's honest names (those its snapshot has)
// cost nothing here: only streams holding unknown names have an entry.

// MaxResourceNameBytes bounds each unknown resource name a node subscribes to.
const MaxResourceNameBytes = 1 << 10

// NameLimits bound the resource names nodes subscribe to; 0 means no bound.
type NameLimits struct {
	PerStream      int // names of one type one stream subscribes to
	UnknownPerNode int // names not in the node's snapshot, over all its streams and types
}

// Reasons of refused requests, the label of xds_resource_names_refused_total.
const (
	reasonMaxNames     = "max_resource_names"
	reasonMaxUnknown   = "max_unknown_resource_names"
	reasonNameTooLarge = "name_too_large"
)

// nameBook counts the unknown names of each stream and node. Safe for
// concurrent use.
type nameBook struct {
	limits NameLimits
	seed   maphash.Seed
	mu     sync.Mutex
	// streams holds the streams with unknown names, and the type of each
	// stream that is not ADS (found at its opening).
	streams map[int64]*streamNames
	nodes   map[string]int // node id -> unknown names over its streams; only > 0
}

// streamNames is what one stream holds.
type streamNames struct {
	node    string
	typeURL string                // the type of a stream that is not ADS; "" for ADS
	types   map[string]*typeNames // by type URL: those with unknown names
}

// typeNames is the unknown names of one type on one stream.
type typeNames struct {
	n     int                 // counted unknown names
	delta map[uint64]struct{} // a delta stream's unknown names, by hash; nil for SotW
	extra int                 // 1 for a type that is not one of go-control-plane's, else 0
}

func newNameBook(l NameLimits) *nameBook {
	return &nameBook{limits: l, seed: maphash.MakeSeed(), streams: map[int64]*streamNames{}, nodes: map[string]int{}}
}

// opened records the type of a stream that serves one type (not ADS).
func (b *nameBook) opened(stream int64, typeURL string) {
	if typeURL == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.streams[stream] = &streamNames{typeURL: typeURL}
}

// closed forgets a stream and its unknown names.
func (b *nameBook) closed(stream int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.streams[stream]
	if !ok {
		return
	}
	delete(b.streams, stream)
	for _, t := range s.types {
		b.add(s.node, -t.n)
	}
}

// add moves a node's count by d, dropping it at 0. Under b.mu.
func (b *nameBook) add(node string, d int) {
	if n := b.nodes[node] + d; n > 0 {
		b.nodes[node] = n
	} else {
		delete(b.nodes, node)
	}
}

// typeOf is typeURL, or the type of a stream that is not ADS for "".
func (b *nameBook) typeOf(stream int64, typeURL string) string {
	if typeURL != "" {
		return typeURL
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.streams[stream]; ok {
		return s.typeURL
	}
	return ""
}

// knownIn reports whether a name of typeURL is in snap (nil: nothing is),
// and whether typeURL is one of go-control-plane's types.
func knownIn(snap *cache.Snapshot, typeURL string) (known func(string) bool, served bool) {
	kind := cache.GetResponseType(typeURL)
	if kind >= types.UnknownType || kind < 0 {
		return func(string) bool { return false }, false
	}
	if snap == nil {
		return func(string) bool { return false }, true
	}
	items := snap.Resources[kind].Items
	return func(name string) bool { _, ok := items[name]; return ok }, true
}

// refusal is a refused request: its reason and the status ending its stream.
type refusal struct {
	reason string
	err    error
}

func tooMany(typeURL string, n, limit int) *refusal {
	return &refusal{reasonMaxNames, status.Errorf(codes.ResourceExhausted,
		"xds: %d resource names of type %s on one stream, more than xds.max_resource_names (%d)", n, clip(typeURL), limit)}
}

func tooLarge(name string) *refusal {
	return &refusal{reasonNameTooLarge, status.Errorf(codes.InvalidArgument,
		"xds: resource name %q is %d bytes, more than %d", logclip.To(name, 64), len(name), MaxResourceNameBytes)}
}

// sotw checks a SotW request on stream of node that names names of
// typeURL (the whole subscription), and records its unknown names.
func (b *nameBook) sotw(stream int64, node, typeURL string, names []string, snap *cache.Snapshot) *refusal {
	if typeURL = b.typeOf(stream, typeURL); typeURL == "" {
		return nil // go-control-plane refuses it
	}
	if l := b.limits.PerStream; l > 0 && len(names) > l {
		return tooMany(typeURL, len(names), l)
	}
	known, served := knownIn(snap, typeURL)
	unknown := 0
	for _, name := range names {
		if name == "*" || known(name) {
			continue
		}
		if len(name) > MaxResourceNameBytes {
			return tooLarge(name)
		}
		unknown++
	}
	if !served {
		unknown++
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.typeNames(stream, node, typeURL, unknown > 0)
	old := 0
	if t != nil {
		old = t.n
	}
	if r := b.overNode(node, unknown-old); r != nil {
		return r
	}
	if t != nil {
		t.n = unknown
		b.add(node, unknown-old)
	}
	return nil
}

// overNode is the refusal of node going d unknown names up, if over. Under b.mu.
func (b *nameBook) overNode(node string, d int) *refusal {
	l := b.limits.UnknownPerNode
	if n := b.nodes[node] + d; l > 0 && d > 0 && n > l {
		return &refusal{reasonMaxUnknown, status.Errorf(codes.ResourceExhausted,
			"xds: node %q subscribes to %d resource names its config does not have, more than xds.max_unknown_resource_names (%d)",
			logclip.To(node, 64), n, l)}
	}
	return nil
}

// typeNames returns the entry of typeURL on stream, made if make; nil if
// there is none. Under b.mu.
func (b *nameBook) typeNames(stream int64, node, typeURL string, make bool) *typeNames {
	s, ok := b.streams[stream]
	if !ok {
		if !make {
			return nil
		}
		s = &streamNames{}
		b.streams[stream] = s
	}
	s.node = node
	t, ok := s.types[typeURL]
	if !ok && make {
		if s.types == nil {
			s.types = map[string]*typeNames{}
		}
		t = &typeNames{}
		s.types[typeURL] = t
	}
	return t
}

// delta checks a delta request on stream of node of typeURL that
// subscribes to sub, unsubscribes from unsub and says it has initial
// resources, and records its unknown names.
func (b *nameBook) delta(stream int64, node, typeURL string, sub, unsub []string, initial int, snap *cache.Snapshot) *refusal {
	if typeURL = b.typeOf(stream, typeURL); typeURL == "" {
		return nil
	}
	if l := b.limits.PerStream; l > 0 && max(len(sub), initial) > l {
		return tooMany(typeURL, max(len(sub), initial), l)
	}
	known, served := knownIn(snap, typeURL)
	var add []uint64
	for _, name := range sub {
		if name == "*" || known(name) {
			continue
		}
		if len(name) > MaxResourceNameBytes {
			return tooLarge(name)
		}
		add = append(add, maphash.String(b.seed, name))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.typeNames(stream, node, typeURL, len(add) > 0 || !served)
	if t == nil {
		return nil // no unknown names before or now
	}
	if !served {
		t.extra = 1
	}
	// go-control-plane subscribes, then unsubscribes: a name in both goes.
	next := make(map[uint64]struct{}, len(t.delta)+len(add))
	maps.Copy(next, t.delta)
	for _, h := range add {
		next[h] = struct{}{}
	}
	for _, name := range unsub {
		delete(next, maphash.String(b.seed, name))
	}
	n := t.extra + len(next)
	if r := b.overNode(node, n-t.n); r != nil {
		return r
	}
	t.delta = next
	b.add(node, n-t.n)
	t.n = n
	return nil
}

// trimInitial drops from a delta request's initial_resource_versions the
// names it does not subscribe to, unless it subscribes to the wildcard
// (by name, or by naming nothing). go-control-plane keeps that map as
// what the stream has until it answers, and a named subscription never
// reads a name it does not subscribe to, so without this a stream that
// subscribes to nothing could keep xds.max_resource_names made-up names
// there for its whole life.
func trimInitial(req *discoverygrpc.DeltaDiscoveryRequest) {
	initial, sub := req.GetInitialResourceVersions(), req.GetResourceNamesSubscribe()
	if len(initial) == 0 || len(sub) == 0 || slices.Contains(sub, "*") {
		return
	}
	keep := make(map[string]struct{}, len(sub))
	for _, name := range sub {
		keep[name] = struct{}{}
	}
	for name := range initial {
		if _, ok := keep[name]; !ok {
			delete(initial, name)
		}
	}
}
