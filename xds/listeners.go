package xds

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"

	"github.com/xds-server/xds-server/envoy"
)

// Listener is an HTTP listener from configuration and the nodes it is
// served to.
type Listener struct {
	envoy.HTTPListener
	// Nodes are globs (see ParseGlob) matched against a node's id and its
	// cluster; the listener goes to the nodes that match any of them.
	// Empty means every node.
	Nodes []string
}

// ParseGlob compiles a node glob: "*" matches any run of characters
// ("/" included), "?" any one character, "[...]" a character class
// ("[!...]" negated), and "\" escapes the next character; everything else
// matches itself. The whole id (or cluster) must match.
func ParseGlob(glob string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(glob); i++ {
		switch c := glob[i]; c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '\\':
			if i+1 == len(glob) {
				return nil, fmt.Errorf("xds: glob %q ends with an escape", glob)
			}
			i++
			b.WriteString(regexp.QuoteMeta(glob[i : i+1]))
		case '[':
			end := strings.IndexByte(glob[i+1:], ']')
			if end <= 0 {
				return nil, fmt.Errorf("xds: glob %q has an unterminated or empty [ ]", glob)
			}
			class := glob[i+1 : i+1+end]
			if neg, ok := strings.CutPrefix(class, "!"); ok {
				class = "^" + neg
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(glob[i : i+1]))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("xds: glob %q: %w", glob, err)
	}
	return re, nil
}

// builtListener is one configured listener, translated.
type builtListener struct {
	globs    []*regexp.Regexp // nil: every node
	envoyL   item             // Envoy's listener, bound to its address
	apiL     item             // proxyless gRPC's api_listener
	route    item             // the RouteConfiguration both use
	needsRLS bool             // its rate-limit filter uses the generated RLS cluster
}

// listenerSet is the translation of the configured listeners, made once:
// listeners are static configuration.
type listenerSet struct {
	ls      []builtListener
	rls     *item          // the RLS cluster; nil when no listener uses it
	targets map[string]int // service routed to -> number of routes to it
}

// newListenerSet translates the listeners; rlsAddress is where Envoy
// reaches xds-server's RLS, needed when a rate limit names no cluster, and
// rlsTLS, when not nil, says that the RLS serves TLS.
func newListenerSet(cfg []Listener, rlsAddress string, rlsTLS *envoy.RateLimitTLS) (*listenerSet, error) {
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
		for _, r := range l.Routes {
			if s.targets == nil {
				s.targets = map[string]int{}
			}
			s.targets[r.Service]++
		}
		if b.needsRLS && s.rls == nil {
			c, err := envoy.RateLimitCluster(rlsAddress)
			if rlsTLS != nil {
				c, err = envoy.SecureRateLimitCluster(rlsAddress, *rlsTLS)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("xds: listener %q: %w", l.Name, err))
				continue
			}
			it, err := newItem(c.GetName(), c)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			s.rls = &it
		}
	}
	return s, errors.Join(errs...)
}

func buildListener(l Listener) (builtListener, error) {
	var b builtListener
	for _, g := range l.Nodes {
		re, err := ParseGlob(g)
		if err != nil {
			return b, fmt.Errorf("xds: listener %q: %w", l.Name, err)
		}
		b.globs = append(b.globs, re)
	}
	res, err := envoy.BuildHTTPListener(l.HTTPListener)
	if err != nil {
		return b, err
	}
	b.needsRLS = l.RateLimit != nil && l.RateLimit.Cluster == ""
	if b.envoyL, err = newItem(l.Name, res.Listener); err != nil {
		return b, err
	}
	if b.apiL, err = newItem(l.Name, res.APIListener); err != nil {
		return b, err
	}
	if b.route, err = newItem(l.Name, res.Route); err != nil {
		return b, err
	}
	return b, nil
}

// matches reports whether listener b goes to node n.
func (b builtListener) matches(n Node) bool {
	if b.globs == nil {
		return true
	}
	return slices.ContainsFunc(b.globs, func(re *regexp.Regexp) bool {
		return re.MatchString(n.ID) || (n.Cluster != "" && re.MatchString(n.Cluster))
	})
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

// extras are the resources a snapshot carries besides the services', per
// kind (in kinds order).
type extras [len(kinds)][]item

// forKey returns what nodes of an assembly key get besides the services':
// Envoy nodes their listeners, the listeners' routes and the RLS cluster
// if one of them uses it; proxyless nodes the api_listeners and routes.
// It also returns how many kinds of the services' resources they get.
func (s *listenerSet) forKey(key string) (extras, int, error) {
	var ex extras
	base, list, _ := strings.Cut(key, ":")
	envoyNode := base == keyEnvoy
	n := len(kinds)
	if envoyNode {
		n = ldsKind // Envoy takes api_listeners only from its bootstrap
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
			ex[ldsKind] = append(ex[ldsKind], l.envoyL)
			rls = rls || l.needsRLS
		} else {
			ex[ldsKind] = append(ex[ldsKind], l.apiL)
		}
		ex[rdsKind] = append(ex[rdsKind], l.route)
	}
	if rls && s.rls != nil {
		ex[cdsKind] = append(ex[cdsKind], *s.rls)
	}
	return ex, n, nil
}

// base builds the shared snapshot of an assembly key from the services' items.
func (s *listenerSet) base(key string, items []serviceItems) (*cache.Snapshot, error) {
	ex, n, err := s.forKey(key)
	if err != nil {
		return nil, err
	}
	return newSnapshot(items, n, &ex)
}
