package xds

import (
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xdscache"
)

// encodeService translates one service and encodes its resources (in
// xdscache.Kinds order) once, for every node that gets them.
func encodeService(s envoy.Service) (xdscache.ServiceItems, error) {
	var out xdscache.ServiceItems
	r, err := translate.ServiceResources(s)
	if err != nil {
		return out, err
	}
	for i, res := range [...]types.Resource{r.Cluster, r.LoadAssignment, r.Listener, r.Route} {
		if out[i], err = xdscache.NewItem(s.Name, res); err != nil {
			return out, err
		}
	}
	return out, nil
}

// encodeEDS translates and encodes only the load assignment of a service,
// for nodes that see a subset of its endpoints or weights of their own.
func encodeEDS(s envoy.Service) (xdscache.Item, error) {
	e, err := envoy.LoadAssignment(s)
	if err != nil {
		return xdscache.Item{}, err
	}
	return xdscache.NewItem(s.Name, e)
}
