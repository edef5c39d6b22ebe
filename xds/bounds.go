package xds

import (
	"strings"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/xds-server/xds-server/internal/logclip"
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
func clip(s string) string { return logclip.To(s, logDetailBytes) }

// Kinds of log lines the logLimiter limits, each on its own.
const (
	logConnect = "connect"
	logNACK    = "nack"
	logRefused = "refused" // per refused node (not kept): at most maxRefusedNodes tracked
	logEvicted = "evicted" // of every evicted node together (node "")
)

// Overall bounds of the log lines of one kind, over all nodes: bursts of
// logBurst lines, then logRate lines a second. A flood of fresh node ids
// (each allowed its own line) writes no more than this.
const (
	logBurst = 100
	logRate  = 10.0 // lines a second
)

// maxRefusedNodes bounds the refused nodes whose lines the logLimiter
// limits one by one: refused nodes are not kept, so nothing forgets them
// but time. Past it, until their lines are older than the interval, the
// others share one limit.
const maxRefusedNodes = 1024

// logLimiter lets through at most one line of a kind per node per
// interval, and at most logRate a second (bursts of logBurst) of a kind
// over all nodes; it counts the lines it holds back per node, reported
// with the node's next line. Nodes are forgotten when they expire or are
// evicted. Safe for concurrent use.
type logLimiter struct {
	every   time.Duration
	mu      sync.Mutex
	last    map[limitKey]limited // the last line and what was held back since
	rate    map[string]*bucket   // by kind
	refused int                  // entries of kind logRefused in last
	swept   time.Time            // when those were last swept
}

type limitKey struct{ kind, node string }

type limited struct {
	at         time.Time // zero: none written yet
	suppressed int
}

func newLogLimiter(every time.Duration) *logLimiter {
	return &logLimiter{every: every, last: map[limitKey]limited{}, rate: map[string]*bucket{}}
}

// allow reports whether a line of kind about node may be written now and
// how many such lines were held back since the last one.
func (l *logLimiter) allow(kind, node string, now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := limitKey{kind, node}
	e, seen := l.last[k]
	if !seen && kind == logRefused && node != "" {
		if l.tracking(now) {
			l.refused++
		} else {
			k = limitKey{kind, ""}
			e = l.last[k]
		}
	}
	if !e.at.IsZero() && now.Sub(e.at) < l.every {
		e.suppressed++
		l.last[k] = e
		return false, 0
	}
	b := l.rate[kind]
	if b == nil {
		b = &bucket{tokens: logBurst, at: now}
		l.rate[kind] = b
	}
	if !b.take(now) {
		e.suppressed++
		l.last[k] = e
		return false, 0
	}
	l.last[k] = limited{at: now}
	return true, e.suppressed
}

// tracking reports whether one more refused node may be limited on its
// own, sweeping those whose lines are past the interval (at most once an
// interval). Under l.mu.
func (l *logLimiter) tracking(now time.Time) bool {
	if l.refused < maxRefusedNodes {
		return true
	}
	if now.Sub(l.swept) < l.every {
		return false
	}
	l.swept = now
	for k, e := range l.last {
		if k.kind == logRefused && k.node != "" && now.Sub(e.at) >= l.every {
			delete(l.last, k)
			l.refused--
		}
	}
	return l.refused < maxRefusedNodes
}

// forget drops what the limiter knows of node.
func (l *logLimiter) forget(node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, kind := range []string{logConnect, logNACK} {
		delete(l.last, limitKey{kind, node})
	}
}

// bucket is a token bucket of logBurst tokens refilled at logRate a second.
type bucket struct {
	tokens float64
	at     time.Time // of the last refill
}

// take reports whether a token was left at now, and takes it.
func (b *bucket) take(now time.Time) bool {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(logBurst, b.tokens+d.Seconds()*logRate)
		b.at = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
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
