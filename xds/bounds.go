package xds

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Bounds of what a node may claim: a node over one is refused with
// InvalidArgument before anything of it is kept.
const (
	MaxNodeIDBytes       = 1 << 10  // node.id
	MaxClusterBytes      = 1 << 10  // node.cluster
	MaxLocalityBytes     = 1 << 10  // each of node.locality's region, zone and sub_zone
	MaxUserAgentBytes    = 1 << 10  // node.user_agent_name and user_agent_version, each
	MaxNodeMetadataBytes = 16 << 10 // node.metadata, encoded
)

// logDetailBytes is the most of a node id, error detail or other
// client-chosen text a log line carries.
const logDetailBytes = 256

// checkNode returns an InvalidArgument status if n is over a bound.
func checkNode(n *core.Node) error {
	for _, f := range []struct {
		name  string
		value string
		max   int
	}{
		{"id", n.GetId(), MaxNodeIDBytes}, {"cluster", n.GetCluster(), MaxClusterBytes},
		{"locality.region", n.GetLocality().GetRegion(), MaxLocalityBytes},
		{"locality.zone", n.GetLocality().GetZone(), MaxLocalityBytes},
		{"locality.sub_zone", n.GetLocality().GetSubZone(), MaxLocalityBytes},
		{"user_agent_name", n.GetUserAgentName(), MaxUserAgentBytes},
		{"user_agent_version", n.GetUserAgentVersion(), MaxUserAgentBytes},
	} {
		if len(f.value) > f.max {
			return status.Errorf(codes.InvalidArgument, "xds: node.%s is %d bytes, more than %d", f.name, len(f.value), f.max)
		}
	}
	if md := n.GetMetadata(); md != nil {
		if size := proto.Size(md); size > MaxNodeMetadataBytes {
			return status.Errorf(codes.InvalidArgument, "xds: node.metadata is %d bytes, more than %d", size, MaxNodeMetadataBytes)
		}
	}
	return nil
}

// clip shortens client-chosen text for a log line: at most
// logDetailBytes bytes (cut at a rune boundary) and a note of the length.
func clip(s string) string { return clipTo(s, logDetailBytes) }

// clipTo shortens s to at most max bytes and a note of its length.
func clipTo(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", strings.ToValidUTF8(s[:cut], "?"), len(s))
}

// Kinds of log lines the logLimiter limits, each on its own.
const (
	logConnect = "connect"
	logNACK    = "nack"
	logRefused = "refused" // of every refused stream together (node ""): refused nodes are not kept
)

// logLimiter lets through at most one line of a kind per node per
// interval and counts the lines it holds back, reported with the next line
// let through. Nodes are forgotten when they expire. Safe for concurrent use.
type logLimiter struct {
	every time.Duration
	mu    sync.Mutex
	last  map[limitKey]limited // the last line and what was held back since
}

type limitKey struct{ kind, node string }

type limited struct {
	at         time.Time
	suppressed int
}

func newLogLimiter(every time.Duration) *logLimiter {
	return &logLimiter{every: every, last: map[limitKey]limited{}}
}

// allow reports whether a line of kind about node may be written now and
// how many such lines were held back since the last one.
func (l *logLimiter) allow(kind, node string, now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := limitKey{kind, node}
	e, seen := l.last[k]
	if seen && now.Sub(e.at) < l.every {
		e.suppressed++
		l.last[k] = e
		return false, 0
	}
	l.last[k] = limited{at: now}
	return true, e.suppressed
}

// forget drops what the limiter knows of node.
func (l *logLimiter) forget(node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, kind := range []string{logConnect, logNACK} {
		delete(l.last, limitKey{kind, node})
	}
}

// malformedPrefix starts the type URL the codec gives a discovery request
// that did not decode (invalid UTF-8 in a string, a malformed message),
// followed by the error. grpc-go answers every codec error with Internal
// at once; decoding such a request as this marker instead lets the
// callbacks answer InvalidArgument (refuseMalformed).
const malformedPrefix = "xds-server.invalid/"

// markMalformed turns m, a discovery request that did not decode, into the
// marker; it reports false for other messages.
func markMalformed(m any, err error) bool {
	url := malformedPrefix + clip(err.Error())
	switch r := m.(type) {
	case *discoverygrpc.DiscoveryRequest:
		proto.Reset(r)
		r.TypeUrl = url
	case *discoverygrpc.DeltaDiscoveryRequest:
		proto.Reset(r)
		r.TypeUrl = url
	default:
		return false
	}
	return true
}

// malformed returns the InvalidArgument status of a marked request, or nil.
func malformed(typeURL string) error {
	if !strings.HasPrefix(typeURL, malformedPrefix) {
		return nil
	}
	return status.Error(codes.InvalidArgument, "xds: malformed request: "+strings.TrimPrefix(typeURL, malformedPrefix))
}
