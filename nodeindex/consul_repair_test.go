package nodeindex

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRepairIndexTable(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	good := `{"version":1,"holders":[{"session":"s1"}],"slots":[{"node":"a","held_by":[0]},{"node":"b","released_at":"2025-01-02T03:00:00Z"}]}`
	for name, tc := range map[string]struct {
		value   string
		want    map[string]int // node -> slot
		rebuilt bool
		dropped int
	}{
		"duplicate node: the later slot is freed": {
			value: `{"version":1,"slots":[{"node":"x","released_at":"2025-01-02T03:04:05Z"},{"node":"x","released_at":"2025-01-02T03:04:05Z"},{"node":"y","released_at":"2025-01-02T03:04:05Z"}]}`,
			want:  map[string]int{"x": 0, "y": 2}, dropped: 1},
		"not JSON: rebuilt from the last good table": {value: `garbage`, want: map[string]int{"a": 0, "b": 1}, rebuilt: true},
		"no version: rebuilt":                        {value: `{"slots":[{"node":"z"}]}`, want: map[string]int{"a": 0, "b": 1}, rebuilt: true},
		"holder out of range: dropped, reserved now": {
			value: `{"version":1,"holders":[{"session":"s1"}],"slots":[{"node":"x","held_by":[0,7,0]}]}`, want: map[string]int{"x": 0}},
		"bad release time: reserved from now": {
			value: `{"version":1,"slots":[{"node":"x","released_at":"yesterday"}]}`, want: map[string]int{"x": 0}},
		"an oversized node id is freed": {
			value: `{"version":1,"slots":[{"node":"` + strings.Repeat("n", 400<<10) + `","released_at":"2025-01-02T03:04:05Z"},{"node":"y","released_at":"2025-01-02T03:04:05Z"}]}`,
			want:  map[string]int{"y": 1}, dropped: 1},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := decodeIndexTable([]byte(tc.value)); err == nil {
				t.Fatal("decodeIndexTable accepted it")
			} else if len(err.Error()) > 300 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
			tb, rep, err := repairIndexTable([]byte(tc.value), []byte(good), now)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Rebuilt != tc.rebuilt || rep.Dropped != tc.dropped {
				t.Errorf("report %+v, want rebuilt %v, dropped %d", rep, tc.rebuilt, tc.dropped)
			}
			if len(tb.byNode) != len(tc.want) {
				t.Errorf("nodes %v, want %v", tb.byNode, tc.want)
			}
			for node, i := range tc.want {
				if tb.byNode[node] != i || tb.slots[i].node != node {
					t.Errorf("node %s at %d (slots %+v), want %d", node, tb.byNode[node], tb.slots, i)
				}
			}
			data, err := tb.encode()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := decodeIndexTable(data); err != nil {
				t.Fatalf("the repaired table does not decode: %v", err)
			}
		})
	}
	if _, _, err := repairIndexTable([]byte(`{"version":3,"slots":"whatever"}`), nil, now); !errors.Is(err, errTableNewer) {
		t.Errorf("a newer version: %v, want errTableNewer", err)
	}
	for _, v := range []string{`{"version":1,"slots":[{"node":"x","released_at":"yesterday"}]}`,
		`{"version":1,"slots":[{"node":"x","released_at":"2020-01-01T00:00:00Z"},{"node":"x"}]}`} {
		tb, _, _ := repairIndexTable([]byte(v), nil, now)
		if !tb.slots[0].releasedAt.Equal(now) {
			t.Errorf("%s: released at %v, want now (release times of a corrupt table start afresh)", v, tb.slots[0].releasedAt)
		}
	}
}

func TestReassert(t *testing.T) {
	tb := newIndexTable()
	tb.acquire("other", "s2", "r2", time.Time{}, time.Minute) // 0
	lost, changed := tb.reassert(map[string]int{"mine": 2, "taken": 0, "pending": -1}, "s1", "r1")
	if !changed {
		t.Error("reassert put a node back but reports no change")
	}
	if len(lost) != 1 || lost[0] != "taken" {
		t.Errorf("lost %v, want [taken] (its index 0 belongs to other)", lost)
	}
	if tb.byNode["mine"] != 2 || len(tb.slots) != 3 || tb.slots[1].node != "" || tb.slots[2].holders[0] != "s1" {
		t.Errorf("slots %+v, want mine at 2 held by s1, 1 free", tb.slots)
	}
	if tb.has("pending") {
		t.Error("a node without an index yet was placed")
	}
	if tb.acquire("new", "s3", "r3", time.Time{}, time.Minute) != 1 {
		t.Error("the free slot 1 was not given to a new node")
	}
}

// FuzzIndexTable feeds arbitrary stored values to the table decoder and
// the repair: never a panic; a value is either decoded, refused as newer,
// or repaired into a table that encodes, decodes again, and has no node
// in two slots.
func FuzzIndexTable(f *testing.F) {
	for _, seed := range []string{
		`{"version":1,"holders":[{"session":"s1"}],"slots":[{"node":"a","held_by":[0]},{"node":"b","released_at":"2025-01-02T03:00:00Z"}]}`,
		`{"version":1,"slots":[{"node":"x"},{"node":"x"}]}`, `{"version":2}`, `{"version":3}`, `{}`,
		`{"version":2,"gzip":"H4sIAAAAAAAA/6pWKsrPySlWsoqOrQUEAAD//+LxVAEQAAAA"}`, `null`, `[`, `"x"`,
		`{"version":1,"holders":[{"session":""}],"slots":[{"node":"a","held_by":[0,-1,5]},{"held_by":[0]}]}`,
	} {
		f.Add([]byte(seed))
	}
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, val []byte) {
		if _, err := decodeIndexTable(val); err == nil {
			return
		}
		tb, _, err := repairIndexTable(val, nil, now)
		if errors.Is(err, errTableNewer) {
			return
		}
		if err != nil {
			t.Fatalf("repair: %v", err)
		}
		seen := map[string]bool{}
		for _, s := range tb.slots {
			if s.node != "" && seen[s.node] {
				t.Fatalf("node %q in two slots", s.node)
			}
			seen[s.node] = true
		}
		data, err := tb.encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeIndexTable(data); err != nil {
			t.Fatalf("repaired table %s does not decode: %v", data, err)
		}
	})
}

// consulCorruptTable: a corrupt table (duplicate slots, then garbage,
// then a duplicate with the backup garbage too) is restored from its
// backup, or repaired, under check-and-set by the first replica that
// writes the group; two replicas never hand out one index to two nodes,
// and the nodes placed before keep theirs.
func consulCorruptTable(t *testing.T, e *consulIndexEnv) {
	a, b := e.replica(t, "a"), e.replica(t, "b")
	consulAcquire(t, a, "g", "na", 0)
	consulAcquire(t, b, "g", "nb", 1)
	key, backup := a.key("g"), a.backupKey("g")
	put := func(k, v string) {
		if _, err := e.client.KV().Put(&api.KVPair{Key: k, Value: []byte(v)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int]string{0: "na", 1: "nb"}
	for round, corrupt := range []func(){
		func() {
			put(key, `{"version":1,"slots":[{"node":"x","released_at":"2025-01-02T03:04:05Z"},{"node":"x"}]}`)
		},
		func() { put(key, `not a table`) },
		func() { // the current table with its first slot repeated, and no backup to restore
			pair, _, err := e.client.KV().Get(key, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, err := tableBody(pair.Value)
			if err != nil {
				t.Fatal(err)
			}
			body.Slots = append(body.Slots, body.Slots[0])
			v, err := encodeBody(body)
			if err != nil {
				t.Fatal(err)
			}
			put(key, string(v))
			put(backup, "garbage")
		},
	} {
		corrupt()
		for i, r := range []*Consul{b, a, b, a} {
			node := fmt.Sprintf("new-%d-%d", round, i)
			idx, err := r.Acquire(context.Background(), "g", node)
			if err != nil {
				t.Fatalf("round %d: %s: acquire %s on a corrupt table: %v", round, r.replica, node, err)
			}
			if prev, dup := got[idx]; dup {
				t.Fatalf("round %d: %s gave %s index %d, already %s's", round, r.replica, node, idx, prev)
			}
			got[idx] = node
		}
		tb := e.table(t, a, "g")
		if tb.byNode["na"] != 0 || tb.byNode["nb"] != 1 {
			t.Fatalf("round %d: after the repair na at %d, nb at %d; want 0 and 1 (slots %+v)", round, tb.byNode["na"], tb.byNode["nb"], tb.slots)
		}
	}
	lost := testutil.ToFloat64(a.metrics.lost) + testutil.ToFloat64(b.metrics.lost)
	restored := testutil.ToFloat64(a.metrics.repairs.WithLabelValues("restored")) + testutil.ToFloat64(b.metrics.repairs.WithLabelValues("restored"))
	repaired := testutil.ToFloat64(a.metrics.repairs.WithLabelValues("repaired")) + testutil.ToFloat64(b.metrics.repairs.WithLabelValues("repaired"))
	if lost != 0 || restored != 2 || repaired != 1 {
		t.Errorf("lost %v, restored %v, repaired %v; want 0, 2, 1", lost, restored, repaired)
	}
}

// consulCheckPutsBack: a table and its backup overwritten with garbage are
// rebuilt by replica b from the last table b read, which misses a node a
// placed since; a's periodic check puts that node back at its index
// before b places a new node, so the new node does not take it.
func consulCheckPutsBack(t *testing.T, e *consulIndexEnv) {
	a, b := e.replica(t, "a"), e.replica(t, "b")
	consulAcquire(t, a, "g", "na", 0)
	consulAcquire(t, b, "g", "nb", 1)
	consulAcquire(t, a, "g", "nc", 2) // b has not read the table since
	for _, k := range []string{a.key("g"), a.backupKey("g")} {
		if _, err := e.client.KV().Put(&api.KVPair{Key: k, Value: []byte("garbage")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	consulRelease(t, b, "g", "nb") // b rebuilds the table from what it read: na, nb
	if tb := e.table(t, a, "g"); tb.has("nc") {
		t.Fatalf("the rebuilt table has nc already: %+v", tb.slots)
	}
	a.checkHolds() // what a does after its next session renewal
	op := newIndexOp(opCheck, "")
	if err := a.submit("g", op); err != nil {
		t.Fatal(err)
	}
	if _, err := a.wait(context.Background(), "g", op); err != nil {
		t.Fatal(err)
	}
	if tb := e.table(t, a, "g"); tb.byNode["nc"] != 2 {
		t.Fatalf("after a's check nc at %d, want 2 (slots %+v)", tb.byNode["nc"], tb.slots)
	}
	consulAcquire(t, b, "g", "nd", 3)
	if lost := testutil.ToFloat64(a.metrics.lost); lost != 0 {
		t.Errorf("lost %v, want 0", lost)
	}
}
