package translate

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

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
				return nil, fmt.Errorf("translate: glob %q ends with an escape", glob)
			}
			i++
			b.WriteString(regexp.QuoteMeta(glob[i : i+1]))
		case '[':
			end := strings.IndexByte(glob[i+1:], ']')
			if end <= 0 {
				return nil, fmt.Errorf("translate: glob %q has an unterminated or empty [ ]", glob)
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
		return nil, fmt.Errorf("translate: glob %q: %w", glob, err)
	}
	return re, nil
}

// BuiltListener is one configured listener, translated.
type BuiltListener struct {
	Globs    []*regexp.Regexp // nil: every node
	Envoy    types.Resource   // Envoy's listener, bound to its address
	API      types.Resource   // proxyless gRPC's api_listener
	Route    types.Resource   // the RouteConfiguration both use
	NeedsRLS bool             // its rate-limit filter uses the generated RLS cluster
}

// BuildListener translates a configured listener.
func BuildListener(l Listener) (BuiltListener, error) {
	var b BuiltListener
	for _, g := range l.Nodes {
		re, err := ParseGlob(g)
		if err != nil {
			return b, fmt.Errorf("translate: listener %q: %w", l.Name, err)
		}
		b.Globs = append(b.Globs, re)
	}
	res, err := envoy.BuildHTTPListener(l.HTTPListener)
	if err != nil {
		return b, err
	}
	b.Envoy, b.API, b.Route = res.Listener, res.APIListener, res.Route
	b.NeedsRLS = l.RateLimit != nil && l.RateLimit.Cluster == ""
	return b, nil
}

// Matches reports whether a listener with these globs goes to the node
// with this id and cluster: every node when there are none, else a node
// whose id or (non-empty) cluster matches one of them.
func Matches(globs []*regexp.Regexp, id, cluster string) bool {
	if globs == nil {
		return true
	}
	return slices.ContainsFunc(globs, func(re *regexp.Regexp) bool {
		return re.MatchString(id) || (cluster != "" && re.MatchString(cluster))
	})
}

// RateLimitCluster is the cluster through which Envoy reaches xds-server's
// RLS at address (TLS when tls is not nil), for rate limits naming no
// cluster of their own.
func RateLimitCluster(address string, tls *envoy.RateLimitTLS) (*clusterv3.Cluster, error) {
	if tls != nil {
		return envoy.SecureRateLimitCluster(address, *tls)
	}
	return envoy.RateLimitCluster(address)
}
