package nodeindex

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// indexTableVersion is the "version" of the JSON value this code writes:
// 2, the table's JSON gzipped in "gzip" (about 3 bytes a slot for node ids
// that share their form, 9 for ids with 13 random characters, against 30
// plus the id in version 1's plain JSON). It reads version 1 too, so a
// table written before keeps its indices; a table of a newer version is an
// error, never overwritten (a newer replica wrote it); one of no version
// is corrupt.
const indexTableVersion = 2

// maxTableJSON bounds a stored table's JSON once decompressed: a value
// that inflates past it is corrupt (a gzip bomb costs a bounded read).
const maxTableJSON = 64 << 20

// maxTableNode bounds a node id in a stored table, in bytes (xDS refuses
// longer node ids).
const maxTableNode = 1024

// errTableNewer is wrapped by decodeIndexTable for a table of a newer
// version: never repaired nor overwritten.
var errTableNewer = errors.New("decode table: a newer version")

// indexTable is the decoded value of one group's key: the pure core of
// Consul (no I/O, no clock, no logging). Its rules are Local's,
// with "held" widened to a set of holder sessions, one per replica the node
// is connected through.
type indexTable struct {
	slots    []indexSlot       // by client index
	byNode   map[string]int    // node -> position in slots
	replicas map[string]string // session id -> replica name, for debugging only
	// open: every slot below it is held, so acquire's search for a free
	// slot starts there (a table of 30,000 held slots costs a new node
	// one step, not 30,000); lowered wherever a slot stops being held.
	open int
}

// indexSlot is one client index.
type indexSlot struct {
	node       string    // "" when never used or cleared after expiry
	holders    []string  // sessions holding the node; empty when released
	releasedAt time.Time // when the last holder let go; valid when node != "" and holders is empty
}

func newIndexTable() *indexTable {
	return &indexTable{byNode: map[string]int{}, replicas: map[string]string{}}
}

// held reports whether slot s is held by at least one session.
func (s *indexSlot) held() bool { return len(s.holders) > 0 }

// has reports whether node has a slot (held or reserved, expired or not).
func (tb *indexTable) has(node string) bool {
	_, ok := tb.byNode[node]
	return ok
}

// acquire returns node's index, held by session: the slot node holds or
// reserves, else the lowest slot whose reservation has expired (released at
// least ttl before now) or that is empty, else a new slot at the end.
// Expired slots below the chosen one are cleared on the way, as Local does.
func (tb *indexTable) acquire(node, session, replica string, now time.Time, ttl time.Duration) int {
	tb.replicas[session] = replica
	if i, ok := tb.byNode[node]; ok {
		s := &tb.slots[i]
		if !slices.Contains(s.holders, session) {
			s.holders = append(s.holders, session)
		}
		s.releasedAt = time.Time{}
		return i
	}
	for tb.open < len(tb.slots) && tb.slots[tb.open].held() {
		tb.open++
	}
	for i := tb.open; i < len(tb.slots); i++ {
		s := &tb.slots[i]
		if s.node != "" && !s.held() && now.Sub(s.releasedAt) >= ttl {
			delete(tb.byNode, s.node) // reservation expired
			*s = indexSlot{}
		}
		if s.node == "" {
			*s = indexSlot{node: node, holders: []string{session}}
			tb.byNode[node] = i
			return i
		}
	}
	tb.slots = append(tb.slots, indexSlot{node: node, holders: []string{session}})
	tb.byNode[node] = len(tb.slots) - 1
	return len(tb.slots) - 1
}

// release removes the sessions for which own is true from node's holders;
// when none is left the index is reserved for node from now. As in
// Local, releasing a node that nobody holds renews its reservation;
// releasing a node held only by other sessions, or an unknown node, does
// nothing.
func (tb *indexTable) release(node string, own func(session string) bool, now time.Time) {
	if i, ok := tb.byNode[node]; ok && !tb.slots[i].held() {
		tb.slots[i].releasedAt = now
		return
	}
	tb.unhold(node, own, now)
}

// unhold is release without renewing a reservation: it only removes the
// sessions for which own is true from node's holders (reserving the index
// from now when none is left).
func (tb *indexTable) unhold(node string, own func(session string) bool, now time.Time) {
	i, ok := tb.byNode[node]
	if !ok || !tb.slots[i].held() {
		return
	}
	s := &tb.slots[i]
	s.holders = slices.DeleteFunc(s.holders, own)
	if !s.held() {
		s.holders, s.releasedAt = nil, now
		tb.open = min(tb.open, i)
	}
}

// drop removes the sessions for which gone is true from every slot; a slot
// left without holders is reserved for its node from now.
func (tb *indexTable) drop(gone func(session string) bool, now time.Time) {
	for i := range tb.slots {
		s := &tb.slots[i]
		if !s.held() {
			continue
		}
		s.holders = slices.DeleteFunc(s.holders, gone)
		if !s.held() {
			s.holders, s.releasedAt = nil, now
			tb.open = min(tb.open, i)
		}
	}
}

// sessions returns the distinct holder sessions in order of first appearance.
func (tb *indexTable) sessions() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range tb.slots {
		for _, h := range s.holders {
			if !seen[h] {
				seen[h] = true
				out = append(out, h)
			}
		}
	}
	return out
}

// indexTableJSON is the stored form of an indexTable: version 2 holds
// the gzip of its body's JSON, version 1 the body itself. Holder sessions
// are listed once and slots refer to them by position, to keep the value
// small (Consul limits a value to 512 KiB by default, and a transaction,
// which carries it base64-encoded twice over, table and backup, to 512
// KiB too).
type indexTableJSON struct {
	Version int    `json:"version"`
	Gzip    []byte `json:"gzip,omitempty"` // version 2
	indexTableBody
}

// indexTableBody is the table itself.
type indexTableBody struct {
	Holders []indexHolderJSON `json:"holders,omitempty"`
	Slots   []indexSlotJSON   `json:"slots,omitempty"`
}

type indexHolderJSON struct {
	Session string `json:"session"`           // Consul session id
	Replica string `json:"replica,omitempty"` // replica name, for debugging
}

type indexSlotJSON struct {
	Node       string `json:"node,omitempty"`        // "" for a free slot
	HeldBy     []int  `json:"held_by,omitempty"`     // positions in holders
	ReleasedAt string `json:"released_at,omitempty"` // RFC 3339 UTC; set when node is set and held_by is empty
}

// encode renders tb as its stored value (version 2); the same table
// always gives the same bytes.
func (tb *indexTable) encode() ([]byte, error) {
	v := indexTableBody{Slots: make([]indexSlotJSON, len(tb.slots))}
	pos := map[string]int{}
	for _, sess := range tb.sessions() {
		pos[sess] = len(v.Holders)
		v.Holders = append(v.Holders, indexHolderJSON{Session: sess, Replica: tb.replicas[sess]})
	}
	for i, s := range tb.slots {
		js := indexSlotJSON{Node: s.node}
		for _, h := range s.holders {
			js.HeldBy = append(js.HeldBy, pos[h])
		}
		if s.node != "" && !s.held() {
			js.ReleasedAt = s.releasedAt.UTC().Format(time.RFC3339Nano)
		}
		v.Slots[i] = js
	}
	return encodeBody(v)
}

// encodeBody renders body as a stored value (version 2).
func encodeBody(v indexTableBody) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode table: %w", err)
	}
	var gz bytes.Buffer
	w, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed) // a valid level: no error
	_, _ = w.Write(body)                             // writes to a bytes.Buffer do not fail
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("encode table: %w", err)
	}
	data, err := json.Marshal(indexTableJSON{Version: indexTableVersion, Gzip: gz.Bytes()})
	if err != nil {
		return nil, fmt.Errorf("encode table: %w", err)
	}
	return data, nil
}

// tableBody reads a stored value: version 1's body as it is, version 2's
// once decompressed (at most maxTableJSON bytes). A newer version wraps
// errTableNewer; no version, or a body in the wrong place, is an error.
func tableBody(data []byte) (indexTableBody, error) {
	var v indexTableJSON
	if err := json.Unmarshal(data, &v); err != nil {
		var head struct { // a newer version may not fit our fields: its version alone decides
			Version int `json:"version"`
		}
		if json.Unmarshal(data, &head) == nil && head.Version > indexTableVersion {
			v.Version = head.Version
		} else {
			return indexTableBody{}, fmt.Errorf("decode table: %w", err)
		}
	}
	switch {
	case v.Version > indexTableVersion:
		return indexTableBody{}, fmt.Errorf("%w: version %d, want at most %d", errTableNewer, v.Version, indexTableVersion)
	case v.Version == 1 && v.Gzip == nil:
		return v.indexTableBody, nil
	case v.Version == 2 && v.Holders == nil && v.Slots == nil:
		zr, err := gzip.NewReader(bytes.NewReader(v.Gzip))
		if err != nil {
			return indexTableBody{}, fmt.Errorf("decode table: gzip: %w", err)
		}
		raw, err := io.ReadAll(io.LimitReader(zr, maxTableJSON+1))
		if err != nil {
			return indexTableBody{}, fmt.Errorf("decode table: gzip: %w", err)
		}
		if len(raw) > maxTableJSON {
			return indexTableBody{}, fmt.Errorf("decode table: more than %d bytes once decompressed", maxTableJSON)
		}
		var body indexTableBody
		if err := json.Unmarshal(raw, &body); err != nil {
			return indexTableBody{}, fmt.Errorf("decode table: the decompressed table: %w", err)
		}
		return body, nil
	}
	return indexTableBody{}, fmt.Errorf("decode table: version %d (with gzip: %t), want 1 (without) or 2 (with only gzip)", v.Version, v.Gzip != nil)
}

// decodeIndexTable parses a stored value; an empty value is an empty table.
// A value that breaks the table's invariants (duplicate nodes, holders out
// of range, bad times, unknown version) is an error.
func decodeIndexTable(data []byte) (*indexTable, error) {
	tb := newIndexTable()
	if len(data) == 0 {
		return tb, nil
	}
	v, err := tableBody(data)
	if err != nil {
		return nil, err
	}
	for _, h := range v.Holders {
		if h.Session == "" {
			return nil, errors.New("decode table: holder without a session")
		}
		tb.replicas[h.Session] = h.Replica
	}
	tb.slots = make([]indexSlot, len(v.Slots))
	for i, js := range v.Slots {
		s, err := decodeIndexSlot(js, v.Holders)
		if err != nil {
			return nil, fmt.Errorf("decode table: slot %d: %w", i, err)
		}
		if s.node != "" {
			if _, dup := tb.byNode[s.node]; dup {
				return nil, fmt.Errorf("decode table: slot %d: its node also has slot %d", i, tb.byNode[s.node])
			}
			tb.byNode[s.node] = i
		}
		tb.slots[i] = s
	}
	return tb, nil
}

func decodeIndexSlot(js indexSlotJSON, holders []indexHolderJSON) (indexSlot, error) {
	s := indexSlot{node: js.Node}
	if len(js.Node) > maxTableNode {
		return s, fmt.Errorf("node id of %d bytes, more than %d", len(js.Node), maxTableNode)
	}
	if js.Node == "" && (len(js.HeldBy) > 0 || js.ReleasedAt != "") {
		return s, errors.New("free slot with holders or a release time")
	}
	for _, p := range js.HeldBy {
		if p < 0 || p >= len(holders) {
			return s, fmt.Errorf("holder %d out of range [0, %d)", p, len(holders))
		}
		if slices.Contains(s.holders, holders[p].Session) {
			return s, fmt.Errorf("holder %d listed twice", p)
		}
		s.holders = append(s.holders, holders[p].Session)
	}
	if js.ReleasedAt != "" && !s.held() {
		t, err := time.Parse(time.RFC3339Nano, js.ReleasedAt)
		if err != nil {
			return s, errors.New("released_at is not an RFC 3339 time")
		}
		s.releasedAt = t
	}
	return s, nil
}
