package xds

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/xds-server/xds-server/nodeindex"
)

// Index sources (subsetting.index_source).
const (
	IndexMetadata = "metadata" // the node sends subset.index (and optionally subset.group) in its metadata
	IndexLocal    = "local"    // this process's table: lowest free index, sticky for the TTL
	IndexConsul   = "consul"   // the same table in Consul KV, shared by every replica
	indexFallback = "fallback" // the configured table failed; this process's table stood in
)

// Group keys (subsetting.group_by).
const (
	GroupByCluster  = "cluster"   // the node's cluster (the default)
	GroupByNone     = "none"      // one group for every node
	GroupByZone     = "zone"      // the node's locality zone
	GroupByMetadata = "metadata." // prefix: metadata.<key>, the node's metadata value at key
)

// SubsetConfig configures how nodes get their client indices.
type SubsetConfig struct {
	IndexSource string        // IndexMetadata, IndexLocal or IndexConsul; "" means local
	IndexTTL    time.Duration // a released index stays reserved this long; 0 means 10m
	GroupBy     string        // GroupByCluster, GroupByNone, GroupByZone or "metadata.<key>"; "" means cluster
	// Table is the index table for the local and consul sources (and for
	// metadata nodes that send no index); nil means a nodeindex.Local.
	Table nodeindex.Table
	// Timeout bounds one Acquire or Release on Table; 0 means 5s.
	Timeout time.Duration
	// MaxGroups bounds the groups of known nodes (connected, or gone for
	// less than the node grace); a node that would start one more is
	// refused with ResourceExhausted. 0 means no bound.
	MaxGroups int
}

// Validate reports configuration errors with their config keys.
func (c SubsetConfig) Validate() error {
	var errs []error
	switch c.IndexSource {
	case "", IndexMetadata, IndexLocal, IndexConsul:
	default:
		errs = append(errs, fmt.Errorf("subsetting.index_source: %q is not one of metadata, local, consul", c.IndexSource))
	}
	if c.MaxGroups < 0 {
		errs = append(errs, fmt.Errorf("subsetting.max_groups: %d is negative", c.MaxGroups))
	}
	if c.IndexTTL < 0 {
		errs = append(errs, fmt.Errorf("subsetting.index_ttl: %v is negative", c.IndexTTL))
	}
	switch g := c.GroupBy; {
	case g == "", g == GroupByCluster, g == GroupByNone, g == GroupByZone:
	case strings.HasPrefix(g, GroupByMetadata) && len(g) > len(GroupByMetadata):
	default:
		errs = append(errs, fmt.Errorf("subsetting.group_by: %q is not one of cluster, none, zone, metadata.<key>", g))
	}
	return errors.Join(errs...)
}

// indexer gives connecting nodes their group and client index.
type indexer struct {
	cfg      SubsetConfig
	fallback *nodeindex.Local // stands in when cfg.Table fails
	m        *metrics
	log      *slog.Logger
	groups   *groupCount // groups of known nodes, for cfg.MaxGroups
}

func newIndexer(cfg SubsetConfig, now func() time.Time, m *metrics, log *slog.Logger) *indexer {
	if cfg.IndexSource == "" {
		cfg.IndexSource = IndexLocal
	}
	if cfg.GroupBy == "" {
		cfg.GroupBy = GroupByCluster
	}
	if cfg.IndexTTL == 0 {
		cfg.IndexTTL = 10 * time.Minute
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	fb := nodeindex.NewLocal(cfg.IndexTTL, now)
	if cfg.Table == nil {
		cfg.Table = fb
	}
	groups := newGroupCount(cfg.MaxGroups)
	groups.counted = func(n int) { m.groups.Set(float64(n)) }
	return &indexer{cfg: cfg, fallback: fb, m: m, log: log, groups: groups}
}

// place admits node into its group (ResourceExhausted past
// cfg.MaxGroups) and gives it its index there.
func (x *indexer) place(n Node) (group string, index int, source string, err error) {
	group = x.group(n)
	if x.cfg.IndexSource == IndexMetadata {
		if g, _, err := metadataIndex(n.Metadata); err == nil {
			group = cmp.Or(g, group)
		}
	}
	if err := x.groups.admit(n.ID, group); err != nil {
		return "", -1, "", err
	}
	group, index, source = x.assign(n)
	return group, index, source, nil
}

// evict frees at once the index reservation of a node evicted to make
// room for another (xds.max_known_nodes), in tables that can (this
// process's: nodeindex.Local); others keep it for their TTL.
func (x *indexer) evict(n Node) {
	table, ok := x.tableOf(n)
	if !ok {
		return
	}
	if f, ok := table.(forgetter); ok {
		ctx, cancel := context.WithTimeout(context.Background(), x.cfg.Timeout)
		defer cancel()
		f.Forget(ctx, n.Group, n.ID)
	}
}

// forgetter is a table that frees a reservation on demand.
type forgetter interface {
	Forget(ctx context.Context, group, node string)
}

// forget drops an expired node from its group's count.
func (x *indexer) forget(id string) {
	x.groups.forget(id)
}

// sweep drops the expired reservations and empty groups of this process's
// tables; it returns how many reservations were dropped.
func (x *indexer) sweep() int {
	n := x.fallback.Sweep()
	if t, ok := x.cfg.Table.(sweeper); ok && x.cfg.Table != nodeindex.Table(x.fallback) {
		n += t.Sweep()
	}
	return n
}

// sweeper is a table that drops expired reservations on demand.
type sweeper interface{ Sweep() int }

// assign returns node's group, index and where the index came from.
func (x *indexer) assign(n Node) (group string, index int, source string) {
	group = x.group(n)
	if x.cfg.IndexSource == IndexMetadata {
		g, i, err := metadataIndex(n.Metadata)
		if err == nil {
			return cmp.Or(g, group), i, IndexMetadata
		}
		x.log.Warn("node sent no usable subset.index; using the local table", "node", clip(n.ID), "error", clip(err.Error()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), x.cfg.Timeout)
	defer cancel()
	i, err := x.cfg.Table.Acquire(ctx, group, n.ID)
	if err == nil {
		return group, i, x.tableName()
	}
	x.m.indexErrors.WithLabelValues("acquire").Inc()
	i, _ = x.fallback.Acquire(ctx, group, n.ID)
	x.log.Error("client index table failed; using this process's table", "node", clip(n.ID), "group", clip(group), "index", i, "error", err)
	return group, i, indexFallback
}

// release lets go of a node's index (it stays reserved for the TTL).
func (x *indexer) release(n Node) {
	table, ok := x.tableOf(n)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), x.cfg.Timeout)
	defer cancel()
	if err := table.Release(ctx, n.Group, n.ID); err != nil {
		x.m.indexErrors.WithLabelValues("release").Inc()
		x.log.Error("client index release failed; it expires with the table's own rules", "node", clip(n.ID), "group", clip(n.Group), "error", err)
	}
}

// hold takes a released node's index again: a stream of the node
// attached (and acquired the index it still reserved) between its last
// stream's detach and the release. Acquire returns that reserved index.
func (x *indexer) hold(n Node) {
	table, ok := x.tableOf(n)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), x.cfg.Timeout)
	defer cancel()
	i, err := table.Acquire(ctx, n.Group, n.ID)
	if err != nil {
		x.m.indexErrors.WithLabelValues("acquire").Inc()
		x.log.Error("client index acquire failed after a reconnect; the index expires with the table's own rules", "node", clip(n.ID), "group", clip(n.Group), "error", err)
	} else if i != n.Index {
		x.log.Warn("node index changed across a reconnect", "node", clip(n.ID), "group", clip(n.Group), "held", n.Index, "table", i)
	}
}

// tableOf is the table that holds n's index; ok is false when it holds
// none (no index yet, or one the node sends itself).
func (x *indexer) tableOf(n Node) (nodeindex.Table, bool) {
	switch {
	case n.Index < 0 || n.IndexSource == IndexMetadata:
		return nil, false
	case n.IndexSource == indexFallback:
		return x.fallback, true
	default:
		return x.cfg.Table, true
	}
}

func (x *indexer) tableName() string {
	if x.cfg.IndexSource == IndexConsul {
		return IndexConsul
	}
	return IndexLocal
}

// group is the node's subsetting group under cfg.GroupBy.
func (x *indexer) group(n Node) string {
	switch g := x.cfg.GroupBy; {
	case g == GroupByNone:
		return ""
	case g == GroupByZone:
		return n.Locality["zone"]
	case strings.HasPrefix(g, GroupByMetadata):
		return metadataString(n.Metadata, strings.TrimPrefix(g, GroupByMetadata))
	default:
		return n.Cluster
	}
}

// metadataIndex reads subset.index (and subset.group) from node metadata,
// either as flat keys ("subset.index") or nested ({"subset": {"index": 3}}).
func metadataIndex(md map[string]any) (group string, index int, err error) {
	v, ok := lookup(md, "subset.index")
	if !ok {
		return "", 0, errors.New("no subset.index in node metadata")
	}
	var f float64
	switch t := v.(type) {
	case float64:
		f = t
	case string:
		if f, err = strconv.ParseFloat(strings.TrimSpace(t), 64); err != nil {
			return "", 0, fmt.Errorf("subset.index %q is not a number", t)
		}
	default:
		return "", 0, fmt.Errorf("subset.index is a %T, want a number", v)
	}
	if f < 0 || f != math.Trunc(f) || f > 1<<30 {
		return "", 0, fmt.Errorf("subset.index %v is not an integer in [0, 2^30]", f)
	}
	return metadataString(md, "subset.group"), int(f), nil
}

// metadataString returns the metadata value at a dotted key as a string.
func metadataString(md map[string]any, key string) string {
	v, ok := lookup(md, key)
	if !ok {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// lookup finds key in md as a flat key first, then as a dotted path.
func lookup(md map[string]any, key string) (any, bool) {
	if v, ok := md[key]; ok {
		return v, true
	}
	var cur any = md
	for part := range strings.SplitSeq(key, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}
