package discovery

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
)

// MaxChangeLines bounds the "endpoints changed" lines of one update; the
// services past it are summed up in one "more services changed" line.
const MaxChangeLines = 100

// ChangeLog writes the story of the snapshots handed to Observe: a "first
// snapshot" summary (services, endpoints by health), then at most one INFO
// line per changed service per update, with counts and sources, e.g.
//
//	msg="endpoints changed" service=api endpoints=4 healthy=-1 draining=+1 drained=consul_maintenance:1 source=consul_maintenance
//
// so a flapping fleet writes one line per service per update, not one per
// endpoint. Safe for concurrent use.
type ChangeLog struct {
	log    *slog.Logger
	source string // the discovery source's name: the source of check and catalog changes
	mu     sync.Mutex
	prev   *Snapshot
}

// NewChangeLog returns a ChangeLog writing to log (nil: slog.Default())
// with component=discovery; source names the discovery source ("consul",
// "static").
func NewChangeLog(log *slog.Logger, source string) *ChangeLog {
	log = cmp.Or(log, slog.Default()).With("component", "discovery")
	return &ChangeLog{log: log, source: source}
}

// Observe logs what s changed since the previous snapshot.
func (c *ChangeLog) Observe(s Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.prev
	c.prev = &s
	if prev == nil {
		attrs := []any{"source", c.source, "services", len(s.Services), "endpoints", s.EndpointCount()}
		for h, n := range HealthCounts(s) {
			attrs = append(attrs, Health(h).String(), n)
		}
		c.log.Info("first snapshot", attrs...)
		return
	}
	changes := Changes(*prev, s)
	for i, ch := range changes {
		if i == MaxChangeLines {
			c.log.Info("more services changed", "services", len(changes)-i)
			return
		}
		c.log.Info("endpoints changed", c.attrs(ch)...)
	}
}

// attrs are the attributes of one "endpoints changed" line: only the
// counts that moved.
func (c *ChangeLog) attrs(ch ServiceChange) []any {
	attrs := []any{"service", ch.Service, "endpoints", ch.Endpoints}
	if ch.Added > 0 {
		attrs = append(attrs, "added", ch.Added)
	}
	if ch.Removed > 0 {
		attrs = append(attrs, "removed", ch.Removed)
	}
	for h, d := range ch.Health {
		if d != 0 {
			attrs = append(attrs, Health(h).String(), fmt.Sprintf("%+d", d))
		}
	}
	if len(ch.Drained) > 0 {
		attrs = append(attrs, "drained", bySource(ch.Drained))
	}
	if len(ch.Undrained) > 0 {
		attrs = append(attrs, "undrained", bySource(ch.Undrained))
	}
	return append(attrs, "source", strings.Join(ch.Sources(c.source), ","))
}

// bySource writes counts per source as "a:1,b:2", sorted.
func bySource(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for _, s := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s:%d", s, m[s]))
	}
	return strings.Join(parts, ",")
}
