package xds

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// messages returns the msg of every line whose msg starts with "node ".
func (l *lockedBuffer) nodeLines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for line := range strings.Lines(l.b.String()) {
		if strings.Contains(line, `msg="node `) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// TestConnectAndDisconnectLinesPair: connect and disconnect are both INFO,
// the disconnect carries the stream's duration, and the per-node limit of
// connect lines (one per 10s) holds back the disconnect of a held-back
// connect too, so the log alternates connected / disconnected.
func TestConnectAndDisconnectLinesPair(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var logs lockedBuffer
	s, err := New(Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	s.cb.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cycle := func(stream int64, up time.Duration) {
		if err := s.cb.OnStreamRequest(stream, &discoverygrpc.DiscoveryRequest{Node: &core.Node{Id: "flappy", Cluster: "c"}}); err != nil {
			t.Fatal(err)
		}
		now = now.Add(up)
		s.cb.OnStreamClosed(stream, nil)
	}
	cycle(1, 3*time.Second) // logged
	cycle(2, time.Second)   // within 10s of the first connect line: both held back
	cycle(3, time.Second)
	now = now.Add(10 * time.Second)
	cycle(4, 2500*time.Millisecond) // logged again
	lines := logs.nodeLines()
	want := []string{"connected", "disconnected connected_for=3s", "connected", "disconnected connected_for=2.5s"}
	if len(lines) != len(want) {
		t.Fatalf("got %d node lines, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i, w := range want {
		msg, attr, _ := strings.Cut(w, " ")
		if !strings.Contains(lines[i], "level=INFO") || !strings.Contains(lines[i], `msg="node `+msg+`"`) ||
			!strings.Contains(lines[i], attr) {
			t.Errorf("line %d = %s, want INFO node %s", i, lines[i], w)
		}
	}
	if got := testutil.ToFloat64(s.m.logSuppressed); got != 4 {
		t.Errorf("xds_log_lines_suppressed_total = %v, want 4 (two connects, two disconnects)", got)
	}
}

func TestPushesAreDebug(t *testing.T) {
	var logs lockedBuffer
	s := newTestServer(t, Config{})
	s.cb.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	connect(s, 1, "n1")
	s.cb.responded(1, resource.EndpointType, "nonce-7")
	out := logs.b.String()
	if !strings.Contains(out, `level=DEBUG msg=pushed node=n1 type=endpoint nonce=nonce-7`) {
		t.Errorf("no DEBUG push line:\n%s", out)
	}
}
