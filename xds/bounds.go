package xds

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
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

// logLimiter lets through at most one line per node per interval and
// counts the lines it holds back, reported with the next line let through.
// Nodes are forgotten when they expire. Safe for concurrent use.
type logLimiter struct {
	every time.Duration
	mu    sync.Mutex
	last  map[string]limited // node -> its last line and what was held back since
}

type limited struct {
	at         time.Time
	suppressed int
}

func newLogLimiter(every time.Duration) *logLimiter {
	return &logLimiter{every: every, last: map[string]limited{}}
}

// allow reports whether a line about node may be written now and how many
// lines about it were held back since the last one.
func (l *logLimiter) allow(node string, now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, seen := l.last[node]
	if seen && now.Sub(e.at) < l.every {
		e.suppressed++
		l.last[node] = e
		return false, 0
	}
	l.last[node] = limited{at: now}
	return true, e.suppressed
}

func (l *logLimiter) forget(node string) {
	l.mu.Lock()
	delete(l.last, node)
	l.mu.Unlock()
}

// decodeErrors answers a request the codec could not decode (invalid
// UTF-8 in a string, a malformed message) with InvalidArgument: grpc-go
// reports every codec error as Internal, and go-control-plane ends the
// stream without a status of its own.
func decodeErrors(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	w := &decodeStream{ServerStream: ss}
	err := handler(srv, w)
	if bad := w.bad.Load(); bad != nil {
		return bad.Err()
	}
	return err
}

type decodeStream struct {
	grpc.ServerStream
	bad atomic.Pointer[status.Status] // InvalidArgument, once a request did not decode
}

func (s *decodeStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if st, ok := status.FromError(err); ok && st.Code() == codes.Internal && strings.Contains(st.Message(), errDecodePrefix) {
		bad := status.New(codes.InvalidArgument, "xds: malformed request: "+clip(st.Message()))
		s.bad.Store(bad)
		return bad.Err()
	}
	return err
}

// errDecodePrefix starts the codec's decoding errors.
const errDecodePrefix = "xds: decoding "
