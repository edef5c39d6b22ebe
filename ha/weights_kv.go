package ha

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/consulstate"
	"github.com/xds-server/xds-server/internal/pause"
	"github.com/xds-server/xds-server/weights"
)

// encodeGzipJSON is the KV value of a summary or a table.
func encodeGzipJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err := json.NewEncoder(zw).Encode(v); err != nil {
		return nil, fmt.Errorf("ha: weights: encode: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("ha: weights: encode: %w", err)
	}
	return buf.Bytes(), nil
}

// decodeGzipJSON reads a value encodeGzipJSON wrote, at most
// 16 x MaxWeightsValueBytes once decompressed.
func decodeGzipJSON(b []byte, v any) error {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("ha: weights: decode: %w", err)
	}
	if err := json.NewDecoder(io.LimitReader(zr, 16*MaxWeightsValueBytes)).Decode(v); err != nil {
		return fmt.Errorf("ha: weights: decode: %w", err)
	}
	return nil
}

// publishLoop writes, every PublishInterval, this replica's summary when
// its content changed and the leader's table when handed over: one
// transaction, the table fenced by the lead's session.
func (w *Weights) publishLoop(ctx context.Context) {
	pause.Every(ctx, w.cfg.PublishInterval, func() {
		w.publishOnce(ctx)
		w.refreshAges()
	})
}

// publishOnce makes at most one write (a transaction, retried once without
// the table when the lead was lost).
func (w *Weights) publishOnce(ctx context.Context) {
	w.mu.Lock()
	sum, tab, session, last := w.pending, w.pendTable, w.session, w.written
	w.pendTable = nil
	w.mu.Unlock()
	ops, content, size := w.summaryOps(sum, last)
	nsum := len(ops)
	fenced := w.staleOps(session)
	if tab != nil && session != "" {
		if val, err := encodeGzipJSON(tab); err != nil || len(val) > MaxWeightsValueBytes {
			w.countError("table_too_large", fmt.Errorf("table of %d bytes (limit %d): %v", len(val), MaxWeightsValueBytes, err))
		} else {
			fenced = append(fenced, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVSet, Key: w.keys.Table(), Value: val}})
		}
	}
	if len(fenced) > 0 {
		ops = append(append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: w.keys.Leader(), Session: session}}), fenced...)
	}
	if len(ops) == 0 {
		return
	}
	ok, idx, err := consulstate.Txn(ctx, w.cfg.Client, ops)
	if !ok && err == nil && len(ops) > nsum && nsum > 0 { // lost the lead: the summary alone
		ok, idx, err = consulstate.Txn(ctx, w.cfg.Client, ops[:nsum])
		ops = ops[:nsum]
	}
	if err != nil || !ok {
		w.countError("publish", cmpErr(err, errors.New("transaction rolled back")))
		if tab != nil && len(ops) > nsum {
			w.mu.Lock()
			if w.pendTable == nil {
				w.pendTable = tab // try again next tick, if still leading
			}
			w.mu.Unlock()
		}
		return
	}
	w.countWrite("weights")
	w.mu.Lock()
	if nsum > 0 {
		w.written, w.wroteIdx, w.lastPub, w.lastBytes = content, idx, w.cfg.Now(), size
	}
	w.mu.Unlock()
}

// staleOps deletes, when this replica leads (session set), the summaries
// of other replicas older than SummaryTTL.
func (w *Weights) staleOps(session string) api.TxnOps {
	if session == "" {
		return nil
	}
	now := w.cfg.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	var ops api.TxnOps
	for r, s := range w.sums {
		if r != w.cfg.Replica && now.Sub(time.UnixMilli(s.At)) > w.cfg.SummaryTTL {
			ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: w.keys.Summary(r)}})
		}
	}
	return ops
}

// summaryOps is the write of sum, unless its content is last (the
// content written last time) or it is too large; with its content and
// size.
func (w *Weights) summaryOps(sum *weights.Summary, last []byte) (api.TxnOps, []byte, int) {
	if sum == nil {
		return nil, nil, 0
	}
	content, _ := json.Marshal(sum.Services)
	if bytes.Equal(content, last) {
		return nil, content, 0
	}
	val, err := encodeGzipJSON(sum)
	switch {
	case err != nil:
		w.countError("encode", err)
	case len(val) > MaxWeightsValueBytes:
		w.countError("summary_too_large", fmt.Errorf("summary of %d bytes over %d", len(val), MaxWeightsValueBytes))
	default:
		return api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVSet, Key: w.keys.Summary(w.cfg.Replica), Value: val}}}, content, len(val)
	}
	return nil, content, 0
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// watchLoop follows <prefix>weights/ with blocking queries (Watch: after
// a failed query the next one reads at once, so a Consul that came back
// empty, its index starting over, is read when it answers, not once its
// index passes the old one), every replica's summary and the table.
func (w *Weights) watchLoop(ctx context.Context) {
	cfg := consulstate.WatchConfig{Op: "weights_watch", Wait: time.Minute, BackoffBase: 100 * time.Millisecond, BackoffMax: 5 * time.Second,
		Failed: func() {
			if w.cfg.CountError != nil {
				w.cfg.CountError("watch")
			}
		}, Logger: w.log}
	list := func(q *api.QueryOptions) (api.KVPairs, *api.QueryMeta, error) { return w.kv.List(w.keys.Weights(), q) }
	consulstate.Watch(ctx, cfg, list, w.apply)
}

// apply takes the watched keys, read at index, into the cache and the age
// metric. When this replica's own summary is missing from a listing that
// is not older than its last write (or Consul's index went back: it lost
// its state), the summary is written again at the next tick even if its
// content did not change.
func (w *Weights) apply(pairs api.KVPairs, index uint64) {
	sums := map[string]weights.Summary{}
	var table weights.SharedTable
	var tableIdx uint64
	leader := ""
	for _, p := range pairs {
		switch {
		case strings.HasPrefix(p.Key, w.keys.Summaries()):
			var s weights.Summary
			if err := decodeGzipJSON(p.Value, &s); err != nil {
				w.countError("decode", fmt.Errorf("%s: %w", p.Key, err))
				continue
			}
			s.Replica = strings.TrimPrefix(p.Key, w.keys.Summaries()) // the key names the replica
			sums[s.Replica] = s
		case p.Key == w.keys.Table():
			if err := decodeGzipJSON(p.Value, &table); err != nil {
				w.countError("decode", fmt.Errorf("%s: %w", p.Key, err))
				continue
			}
			tableIdx = max(p.ModifyIndex, 1)
		case p.Key == w.keys.Leader() && p.Session != "":
			leader = string(p.Value)
		}
	}
	w.mu.Lock()
	for r := range w.sums {
		if _, ok := sums[r]; !ok {
			w.ages.DeleteLabelValues(r)
		}
	}
	if _, ok := sums[w.cfg.Replica]; !ok && w.written != nil && (index >= w.wroteIdx || index < w.listIdx) {
		w.written = nil // lost (Consul's state, or deleted): write it again
	}
	w.sums, w.leaderID, w.listIdx = sums, leader, index
	// A table key gone (or unreadable) keeps the last table for Status,
	// not as present: the pipeline keeps serving it and the leader writes
	// one. A table seen anew counts as a new one even when its
	// ModifyIndex is the old one's (a restarted Consul's indexes start
	// over).
	if tableIdx != 0 && (!w.tableIn || tableIdx != w.tableIdx) {
		w.table, w.tableIdx = table, tableIdx
		w.tableSeq++
	}
	w.tableIn = tableIdx != 0
	w.mu.Unlock()
	w.refreshAges()
}

// refreshAges sets xds_ha_summary_age_seconds from the summaries seen.
func (w *Weights) refreshAges() {
	now := w.cfg.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for r, s := range w.sums {
		w.ages.WithLabelValues(r).Set(now.Sub(time.UnixMilli(s.At)).Seconds())
	}
}
