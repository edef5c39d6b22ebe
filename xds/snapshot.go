package xds

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

	"github.com/xds-server/xds-server/envoy"
)

// The resource kinds we serve, in snapshot order.
var kinds = [...]types.ResponseType{types.Cluster, types.Endpoint, types.Listener, types.Route}

// item is one translated resource with its content hash.
type item struct {
	name string
	res  types.Resource // the resource as built, for consistency checks and debug pages
	wire types.Resource // the same, pre-marshaled: what the cache serves (see wire.go)
	hash string         // hex SHA-256 of the deterministic marshaling, as go-control-plane hashes
}

// serviceItems are the four resources of one service, in kinds order.
type serviceItems [len(kinds)]item

// translate builds and hashes the resources of one service.
func translate(s envoy.Service) (serviceItems, error) {
	var out serviceItems
	c, err := envoy.Cluster(s)
	if err != nil {
		return out, err
	}
	e, err := envoy.LoadAssignment(s)
	if err != nil {
		return out, err
	}
	l, err := envoy.Listener(s)
	if err != nil {
		return out, err
	}
	r, err := envoy.RouteConfig(s)
	if err != nil {
		return out, err
	}
	for i, res := range [...]types.Resource{c, e, l, r} {
		if out[i], err = newItem(s.Name, res); err != nil {
			return out, err
		}
	}
	return out, nil
}

// translateEDS builds and hashes only the load assignment of a service, for
// nodes that see a subset of its endpoints.
func translateEDS(s envoy.Service) (item, error) {
	e, err := envoy.LoadAssignment(s)
	if err != nil {
		return item{}, err
	}
	return newItem(s.Name, e)
}

func newItem(name string, res types.Resource) (item, error) {
	b, err := cache.MarshalResource(res)
	if err != nil {
		return item{}, fmt.Errorf("xds: marshal %s: %w", name, err)
	}
	hash := cache.HashResource(b)
	return item{name: name, res: res, wire: newWire(res, b, name, hash), hash: hash}, nil
}

// newSnapshot assembles a cache snapshot from per-service items (sorted by
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
func newSnapshot(services []serviceItems, n int, extra *extras) (*cache.Snapshot, error) {
	snap := &cache.Snapshot{VersionMap: make(map[string]map[string]string, len(kinds))}
	built := &cache.Snapshot{} // the same with the resources as built, to check consistency
	for k, kind := range kinds {
		var more []item
		if extra != nil {
			more = extra[k]
		}
		taken := make(map[string]bool, len(more))
		for _, it := range more {
			taken[it.name] = true
		}
		its := make([]item, 0, len(services)+len(more))
		for _, s := range services {
			if k >= n {
				break
			}
			if !taken[s[k].name] {
				its = append(its, s[k])
			}
		}
		its = append(its, more...)
		items := make([]types.Resource, len(its))
		for i, it := range its {
			items[i] = it.res
		}
		res, versions := served(its)
		built.Resources[kind] = cache.NewResources(res.Version, items)
		snap.Resources[kind] = res
		url, err := cache.GetResponseTypeURL(kind)
		if err != nil {
			return nil, fmt.Errorf("xds: %w", err)
		}
		snap.VersionMap[url] = versions
	}
	if err := consistent(built); err != nil {
		return nil, fmt.Errorf("xds: inconsistent snapshot: %w", err)
	}
	return snap, nil
}

// served is what the cache serves of one type's items: their wire forms
// under a version that hashes their names and hashes, and the delta
// version map (name -> hash).
func served(its []item) (cache.Resources, map[string]string) {
	wire := make(map[string]types.ResourceWithTTL, len(its))
	versions := make(map[string]string, len(its))
	h := sha256.New()
	for _, it := range its {
		wire[it.name] = types.ResourceWithTTL{Resource: it.wire}
		versions[it.name] = it.hash
		h.Write([]byte(it.name))
		h.Write([]byte{0})
		h.Write([]byte(it.hash))
	}
	return cache.Resources{Version: hex.EncodeToString(h.Sum(nil)[:8]), Items: wire}, versions
}

// Positions in kinds.
const (
	cdsKind = 0 // clusters
	edsKind = 1 // load assignments
	ldsKind = 2 // listeners
	rdsKind = 3 // route configurations
)

// variant returns base (built by newSnapshot from services) with the load
// assignments of some services replaced: repl maps a position in services
// to the item to serve instead. Every other type shares base's maps, so a
// variant costs one EDS map; it needs no consistency check of its own, as
// the resource names are base's.
func variant(base *cache.Snapshot, services []serviceItems, repl map[int]item) *cache.Snapshot {
	snap := &cache.Snapshot{Resources: base.Resources, VersionMap: maps.Clone(base.VersionMap)}
	its := make([]item, len(services))
	for i, s := range services {
		its[i] = s[edsKind]
		if r, ok := repl[i]; ok {
			its[i] = r
		}
	}
	snap.Resources[types.Endpoint], snap.VersionMap[resource.EndpointType] = served(its)
	return snap
}

// decode turns a wire resource back into a regular message (for debug
// pages and tests; the hot path never needs it).
func decode(r types.Resource) (types.Resource, error) {
	b, err := cache.MarshalResource(r)
	if err != nil {
		return nil, fmt.Errorf("xds: marshal: %w", err)
	}
	m := r.ProtoReflect().Type().New().Interface()
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("xds: unmarshal: %w", err)
	}
	return m, nil
}

// sameVersions reports whether two snapshots carry the same versions of
// every kind (and so the same content).
func sameVersions(a, b *cache.Snapshot) bool {
	if a == nil || b == nil {
		return a == b
	}
	for _, kind := range kinds {
		if a.Resources[kind].Version != b.Resources[kind].Version {
			return false
		}
	}
	return true
}

// typeName is a short label for a type URL ("cluster", "endpoint", ...).
func typeName(url string) string {
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

func sortedByName(items []serviceItems) {
	slices.SortFunc(items, func(a, b serviceItems) int { return strings.Compare(a[0].name, b[0].name) })
}
