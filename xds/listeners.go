package xds

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xdscache"
)

// builtListener is one configured listener, translated.
type builtListener struct {
	globs    []*regexp.Regexp            // nil: every node
	envoyL   xdscache.Item               // Envoy's listener, bound to its address
	apiL     xdscache.Item               // proxyless gRPC's api_listener
	route    xdscache.Item               // the RouteConfiguration both use (with the policies, see withPolicies)
	routeRes *routev3.RouteConfiguration // the route as configured
	needsRLS bool                        // its rate-limit filter uses the generated RLS cluster
}

// listenerSet is the translation of the configured listeners, made once:
// listeners are static configuration.
type listenerSet struct {
	ls      []builtListener
	rls     *xdscache.Item     // the RLS cluster; nil when no listener uses it
	targets map[string]int     // service routed to -> number of routes to it
	splits  []translate.Target // the targets split routes send to
}

// newListenerSet translates the listeners; rlsAddress is where Envoy
// reaches xds-server's RLS, needed when a rate limit names no cluster, and
// rlsTLS, when not nil, says that the RLS serves TLS.
func newListenerSet(cfg []translate.Listener, rlsAddress string, rlsTLS *envoy.RateLimitTLS) (*listenerSet, error) {
	s := &listenerSet{}
	var errs []error
	names := map[string]bool{}
	for _, l := range cfg {
		b, err := buildListener(l)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if names[l.Name] {
			errs = append(errs, fmt.Errorf("xds: listener %q: duplicate name", l.Name))
		}
		names[l.Name] = true
		s.ls = append(s.ls, b)
		if b.needsRLS && s.rls == nil {
			c, err := translate.RateLimitCluster(rlsAddress, rlsTLS)
			if err != nil {
				errs = append(errs, fmt.Errorf("xds: listener %q: %w", l.Name, err))
				continue
			}
			it, err := xdscache.NewItem(c.GetName(), c)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			s.rls = &it
		}
	}
	s.targets, s.splits = translate.RouteTargets(cfg), translate.Demanded(cfg)
	return s, errors.Join(errs...)
}

func buildListener(l translate.Listener) (builtListener, error) {
	var b builtListener
	t, err := translate.BuildListener(l)
	if err != nil {
		return b, err
	}
	b.globs, b.needsRLS = t.Globs, t.NeedsRLS
	if b.envoyL, err = xdscache.NewItem(l.Name, t.Envoy); err != nil {
		return b, err
	}
	if b.apiL, err = xdscache.NewItem(l.Name, t.API); err != nil {
		return b, err
	}
	b.routeRes = t.Route.(*routev3.RouteConfiguration)
	if b.route, err = xdscache.NewItem(l.Name, t.Route); err != nil {
		return b, err
	}
	return b, nil
}

// matches reports whether listener b goes to node n.
func (b builtListener) matches(n Node) bool {
	return translate.Matches(b.globs, n.ID, n.Cluster)
}

// assemblyKey groups nodes that receive identical resources: the kind of
// node, and the positions of the listeners it gets ("envoy:0,2"). Keys
// never contain "/" (variant keys extend them after one).
func (s *listenerSet) assemblyKey(n Node) string {
	base := keyProxyless
	if isEnvoy(n) {
		base = keyEnvoy
	}
	if s == nil {
		return base
	}
	var b strings.Builder
	for i, l := range s.ls {
		if !l.matches(n) {
			continue
		}
		if b.Len() == 0 {
			b.WriteString(base + ":")
		} else {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(i))
	}
	if b.Len() == 0 {
		return base
	}
	return b.String()
}

// forKey returns what nodes of an assembly key get besides the services':
// Envoy nodes their listeners, the listeners' routes and the RLS cluster
// if one of them uses it; proxyless nodes the api_listeners and routes.
// It also returns how many kinds of the services' resources they get.
func (s *listenerSet) forKey(key string) (xdscache.Extras, int, error) {
	var ex xdscache.Extras
	base, list, _ := strings.Cut(key, ":")
	envoyNode := base == keyEnvoy
	n := len(xdscache.Kinds)
	if envoyNode {
		n = xdscache.LDS // Envoy takes api_listeners only from its bootstrap
	}
	if list == "" {
		return ex, n, nil
	}
	rls := false
	for f := range strings.SplitSeq(list, ",") {
		i, err := strconv.Atoi(f)
		if err != nil || s == nil || i < 0 || i >= len(s.ls) {
			return ex, n, fmt.Errorf("xds: bad assembly key %q", key)
		}
		l := s.ls[i]
		if envoyNode {
			ex[xdscache.LDS] = append(ex[xdscache.LDS], l.envoyL)
			rls = rls || l.needsRLS
		} else {
			ex[xdscache.LDS] = append(ex[xdscache.LDS], l.apiL)
		}
		ex[xdscache.RDS] = append(ex[xdscache.RDS], l.route)
	}
	if rls && s.rls != nil {
		ex[xdscache.CDS] = append(ex[xdscache.CDS], *s.rls)
	}
	return ex, n, nil
}

// Assembly keys: nodes with the same key receive identical resources and
// share one cache snapshot (per-node subsets and weights refine them, see
// variants.go). A key is the node's kind, followed by the positions of the
// configured listeners it gets: "envoy:0,2" (see listenerSet.assemblyKey).
const (
	// keyProxyless: proxyless gRPC (and any other non-Envoy client) gets
	// clusters, endpoints, and an api_listener with its route per service,
	// plus an api_listener and route per configured listener it matches.
	keyProxyless = "proxyless"
	// keyEnvoy: Envoy gets clusters and endpoints (it accepts
	// api_listeners only from its bootstrap), plus the configured
	// listeners it matches, their routes and the RLS cluster they use.
	keyEnvoy = "envoy"
)

// isEnvoy reports whether the node is an Envoy proxy (user_agent_name "envoy").
func isEnvoy(n Node) bool { return xdscache.IsEnvoyAgent(n.UserAgent) }
