package xdscache

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/translate/translatetest"
)

// What the cache tests serve is built as the reconciler builds it (package
// xds, which this package may not import): translate, then encode.

// Assembly keys as xds makes them: the node's kind, then the positions of
// the configured listeners it gets ("envoy:0,1").
const (
	keyProxyless = "proxyless"
	keyEnvoy     = "envoy"
)

// world is translatetest.World.
func world(services, endpoints int) discovery.Snapshot {
	return translatetest.World(services, endpoints)
}

// encode translates a service and encodes its resources.
func encode(s envoy.Service) (ServiceItems, error) {
	var out ServiceItems
	r, err := translate.ServiceResources(s)
	if err != nil {
		return out, err
	}
	for i, res := range [...]types.Resource{r.Cluster, r.LoadAssignment, r.Listener, r.Route} {
		if out[i], err = NewItem(s.Name, res); err != nil {
			return out, err
		}
	}
	return out, nil
}

// testListeners are translatetest.Listeners.
func testListeners() []translate.Listener { return translatetest.Listeners() }

// listenerSet is configured listeners, encoded.
type listenerSet struct {
	envoyL, apiL, route []Item
	needsRLS            []bool
	rls                 Item
}

func newListenerSet(cfg []translate.Listener, rlsAddress string) (*listenerSet, error) {
	s := &listenerSet{}
	c, err := translate.RateLimitCluster(rlsAddress, nil)
	if err != nil {
		return nil, err
	}
	if s.rls, err = NewItem(c.GetName(), c); err != nil {
		return nil, err
	}
	for _, l := range cfg {
		b, err := translate.BuildListener(l)
		if err != nil {
			return nil, err
		}
		var its [3]Item
		for i, res := range [...]types.Resource{b.Envoy, b.API, b.Route} {
			if its[i], err = NewItem(l.Name, res); err != nil {
				return nil, err
			}
		}
		s.envoyL, s.apiL, s.route = append(s.envoyL, its[0]), append(s.apiL, its[1]), append(s.route, its[2])
		s.needsRLS = append(s.needsRLS, b.NeedsRLS)
	}
	return s, nil
}

// base is the snapshot of an assembly key: the services' items and the
// listeners the key names (a nil set: none).
func (s *listenerSet) base(key string, items []ServiceItems) (*cache.Snapshot, error) {
	var ex Extras
	kind, list, _ := strings.Cut(key, ":")
	n := len(Kinds)
	if kind == keyEnvoy {
		n = LDS
	}
	rls := false
	for f := range strings.SplitSeq(list, ",") {
		if f == "" {
			continue
		}
		i, err := strconv.Atoi(f)
		if err != nil || s == nil || i >= len(s.route) {
			return nil, fmt.Errorf("bad assembly key %q", key)
		}
		if kind == keyEnvoy {
			ex[LDS] = append(ex[LDS], s.envoyL[i])
			rls = rls || s.needsRLS[i]
		} else {
			ex[LDS] = append(ex[LDS], s.apiL[i])
		}
		ex[RDS] = append(ex[RDS], s.route[i])
	}
	if rls {
		ex[CDS] = append(ex[CDS], s.rls)
	}
	return NewSnapshot(items, n, &ex)
}
