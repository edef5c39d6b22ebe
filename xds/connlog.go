package xds

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// connLog pairs the connect and disconnect lines of a node: a disconnect
// is logged (INFO, with the stream's duration) exactly when the connect
// line it ends was, so the per-node rate limit of connect lines applies to
// both and a log never shows two connects without the disconnect between.
// It holds one entry per connected node whose connect line was written.
// Safe for concurrent use.
type connLog struct {
	mu        sync.Mutex
	announced map[string]time.Time // node id -> when its connect line was written
}

func newConnLog() *connLog { return &connLog{announced: map[string]time.Time{}} }

// connected records that the connect line of node was written at now.
func (c *connLog) connected(node string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.announced[node] = now
}

// disconnected reports whether the disconnect line of node is due, and
// how long ago its connect line was written.
func (c *connLog) disconnected(node string, now time.Time) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.announced[node]
	delete(c.announced, node)
	return now.Sub(at), ok
}

// logPush writes a DEBUG line for a response sent on a stream.
func logPush(log *slog.Logger, node, typeURL, nonce string) {
	if node == "" || !log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	log.Debug("pushed", "node", clip(node), "type", knownType(typeURL), "nonce", clip(nonce))
}
