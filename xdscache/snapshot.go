package xdscache

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
)

// The resource Kinds we serve, in snapshot order.
var Kinds = [...]types.ResponseType{types.Cluster, types.Endpoint, types.Listener, types.Route}

// Item is one translated resource with its content hash.
type Item struct {
	Name string
	Res  types.Resource // the resource as built, for consistency checks and debug pages
	Wire types.Resource // the same, pre-marshaled: what the cache serves (see wire.go)
	Hash string         // hex SHA-256 of the deterministic marshaling, as go-control-plane hashes
}

// ServiceItems are the four resources of one service, in kinds order.
type ServiceItems [len(Kinds)]Item

func NewItem(name string, res types.Resource) (Item, error) {
	b, err := cache.MarshalResource(res)
	if err != nil {
		return Item{}, fmt.Errorf("xdscache: marshal %s: %w", name, err)
	}
	hash := cache.HashResource(b)
	return Item{Name: name, Res: res, Wire: NewWire(res, b, name, hash), Hash: hash}, nil
}

// NewSnapshot assembles a cache snapshot from per-service items (sorted by
// service name) and extra items per kind (listeners from configuration,
// their routes, the RLS cluster; nil means none). Only the first n kinds
// of the services' items are used (all of them, or just clusters and
// endpoints); a service's listener or route whose name an extra item of
// the same kind takes is left out (configured listeners win; validation
// keeps configured names apart from service names). Kinds without
// resources are still versioned, so a node subscribing to them gets an
// empty answer rather than none. Each type's version is a hash of its
// resources' names and hashes, so equal content always gives equal
// versions; the delta version map is filled from the same hashes.
func NewSnapshot(services []ServiceItems, n int, extra *Extras) (*cache.Snapshot, error) {
	snap := &cache.Snapshot{VersionMap: make(map[string]map[string]string, len(Kinds))}
	built := &cache.Snapshot{} // the same with the resources as built, to check consistency
	for k, kind := range Kinds {
		var more []Item
		if extra != nil {
			more = extra[k]
		}
		taken := make(map[string]bool, len(more))
		for _, it := range more {
			taken[it.Name] = true
		}
		its := make([]Item, 0, len(services)+len(more))
		for _, s := range services {
			if k >= n {
				break
			}
			if !taken[s[k].Name] {
				its = append(its, s[k])
			}
		}
		its = append(its, more...)
		items := make([]types.Resource, len(its))
		for i, it := range its {
			items[i] = it.Res
		}
		res, versions := Served(its)
		built.Resources[kind] = cache.NewResources(res.Version, items)
		snap.Resources[kind] = res
		url, err := cache.GetResponseTypeURL(kind)
		if err != nil {
			return nil, fmt.Errorf("xdscache: %w", err)
		}
		snap.VersionMap[url] = versions
	}
	if err := Consistent(built); err != nil {
		return nil, fmt.Errorf("xdscache: inconsistent snapshot: %w", err)
	}
	return snap, nil
}

// Served is what the cache serves of one type's items: their wire forms
// under a version that hashes their names and hashes, and the delta
// version map (name -> hash).
func Served(its []Item) (cache.Resources, map[string]string) {
	wire := make(map[string]types.ResourceWithTTL, len(its))
	versions := make(map[string]string, len(its))
	h := sha256.New()
	for _, it := range its {
		wire[it.Name] = types.ResourceWithTTL{Resource: it.Wire}
		versions[it.Name] = it.Hash
		h.Write([]byte(it.Name))
		h.Write([]byte{0})
		h.Write([]byte(it.Hash))
	}
	return cache.Resources{Version: hex.EncodeToString(h.Sum(nil)[:8]), Items: wire}, versions
}

// Extras are the resources a snapshot carries besides the services', per
// kind (in Kinds order).
type Extras [len(Kinds)][]Item

// Positions in Kinds.
const (
	CDS = 0 // clusters
	EDS = 1 // load assignments
	LDS = 2 // listeners
	RDS = 3 // route configurations
)

// Variant returns base (built by NewSnapshot from services) with the load
// assignments of some services replaced: repl maps a position in services
// to the item to serve instead. Every other type shares base's maps, so a
// Variant costs one EDS map; it needs no consistency check of its own, as
// the resource names are base's.
func Variant(base *cache.Snapshot, services []ServiceItems, repl map[int]Item) *cache.Snapshot {
	snap := &cache.Snapshot{Resources: base.Resources, VersionMap: maps.Clone(base.VersionMap)}
	its := make([]Item, len(services))
	for i, s := range services {
		its[i] = s[EDS]
		if r, ok := repl[i]; ok {
			its[i] = r
		}
	}
	snap.Resources[types.Endpoint], snap.VersionMap[resource.EndpointType] = Served(its)
	return snap
}

// Decode turns a wire resource back into a regular message (for debug
// pages and tests; the hot path never needs it).
func Decode(r types.Resource) (types.Resource, error) {
	b, err := cache.MarshalResource(r)
	if err != nil {
		return nil, fmt.Errorf("xdscache: marshal: %w", err)
	}
	m := r.ProtoReflect().Type().New().Interface()
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("xdscache: unmarshal: %w", err)
	}
	return m, nil
}

// SameVersions reports whether two snapshots carry the same versions of
// every kind (and so the same content).
func SameVersions(a, b *cache.Snapshot) bool {
	if a == nil || b == nil {
		return a == b
	}
	for _, kind := range Kinds {
		if a.Resources[kind].Version != b.Resources[kind].Version {
			return false
		}
	}
	return true
}

// TypeName is a short label for a type URL ("cluster", "endpoint", ...).
func TypeName(url string) string {
	switch url {
	case resource.ClusterType:
		return "cluster"
	case resource.EndpointType:
		return "endpoint"
	case resource.ListenerType:
		return "listener"
	case resource.RouteType:
		return "route"
	}
	return strings.ToLower(url[strings.LastIndexByte(url, '.')+1:])
}

func SortByName(items []ServiceItems) {
	slices.SortFunc(items, func(a, b ServiceItems) int { return strings.Compare(a[0].Name, b[0].Name) })
}
