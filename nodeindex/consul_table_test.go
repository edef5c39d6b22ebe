package nodeindex

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// consulTableStep is one step of a table scenario: an operation on the
// table, then (for acquire) the index it must return.
type consulTableStep struct {
	do      string // acquire, release, drop (session), advance
	node    string
	session string        // acquire, release, drop; "" means "s1"
	advance time.Duration // advance
	want    int           // acquire
}

func TestConsulIndexTableOps(t *testing.T) {
	const ttl = 10 * time.Minute
	acq := func(node string, want int) consulTableStep {
		return consulTableStep{do: "acquire", node: node, want: want}
	}
	acqBy := func(session, node string, want int) consulTableStep {
		return consulTableStep{do: "acquire", node: node, session: session, want: want}
	}
	rel := func(node string) consulTableStep { return consulTableStep{do: "release", node: node} }
	relBy := func(session, node string) consulTableStep {
		return consulTableStep{do: "release", node: node, session: session}
	}
	adv := func(d time.Duration) consulTableStep { return consulTableStep{do: "advance", advance: d} }
	for name, steps := range map[string][]consulTableStep{
		"new nodes take the lowest free index": {acq("a", 0), acq("b", 1), acq("c", 2), acq("b", 1)},
		"a released index is kept for its node within the ttl": {
			acq("a", 0), acq("b", 1), rel("a"), adv(ttl - time.Nanosecond), acq("c", 2), acq("a", 0),
		},
		"an expired reservation goes to a new node": {
			acq("a", 0), acq("b", 1), rel("a"), adv(ttl), acq("c", 0), acq("a", 2),
		},
		"an expired reservation still comes back to its node while unused": {
			acq("a", 0), rel("a"), adv(2 * ttl), acq("a", 0),
		},
		"releasing an unknown node does nothing": {acq("a", 0), rel("zz"), acq("b", 1)},
		"releasing a released node renews its reservation": {
			acq("a", 0), rel("a"), adv(ttl / 2), rel("a"), adv(ttl / 2), acq("b", 1),
			adv(ttl / 2), acq("c", 0),
		},
		"a node held through two replicas stays held until both release": {
			acqBy("s1", "a", 0), acqBy("s2", "a", 0), relBy("s1", "a"), adv(ttl), acqBy("s1", "b", 1),
			relBy("s2", "a"), adv(ttl - 1), acqBy("s2", "c", 2), adv(1), acqBy("s2", "d", 0),
		},
		"a replica releasing a node it does not hold does nothing": {
			acqBy("s1", "a", 0), relBy("s2", "a"), adv(ttl), acqBy("s2", "b", 1),
		},
		"a dead session's holds are reserved from when it is found gone": {
			acqBy("s1", "a", 0), acqBy("s2", "b", 1), acqBy("s1", "c", 2),
			adv(time.Hour), {do: "drop", session: "s1"}, acqBy("s2", "d", 3),
			adv(ttl - 1), acqBy("s2", "c", 2), adv(1), acqBy("s2", "e", 0),
		},
		"a dead session does not free a node another session holds": {
			acqBy("s1", "a", 0), acqBy("s2", "a", 0), {do: "drop", session: "s1"}, adv(ttl), acqBy("s2", "b", 1),
		},
	} {
		t.Run(name, func(t *testing.T) {
			runConsulTableSteps(t, ttl, steps)
		})
	}
}

// runConsulTableSteps plays steps on a table that is encoded and decoded
// after every step, as it would be stored in Consul between calls.
func runConsulTableSteps(t *testing.T, ttl time.Duration, steps []consulTableStep) {
	t.Helper()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tb := newIndexTable()
	for n, st := range steps {
		sess := st.session
		if sess == "" {
			sess = "s1"
		}
		switch st.do {
		case "acquire":
			if got := tb.acquire(st.node, sess, "replica-"+sess, now, ttl); got != st.want {
				t.Fatalf("step %d: acquire %q by %s = %d, want %d", n, st.node, sess, got, st.want)
			}
		case "release":
			tb.release(st.node, func(s string) bool { return s == sess }, now)
		case "drop":
			tb.drop(func(s string) bool { return s == sess }, now)
		case "advance":
			now = now.Add(st.advance)
		}
		tb = consulRoundTrip(t, tb)
	}
}

// consulRoundTrip encodes and decodes tb and checks the encoding is stable.
func consulRoundTrip(t *testing.T, tb *indexTable) *indexTable {
	t.Helper()
	data, err := tb.encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeIndexTable(data)
	if err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	again, err := back.encode()
	if err != nil || string(again) != string(data) {
		t.Fatalf("encoding is not stable:\n%s\n%s (%v)", data, again, err)
	}
	return back
}

// TestConsulIndexTableMatchesLocal plays random acquires, releases and clock
// steps on Local and on the table (one session, stored between steps):
// they must hand out the same indices.
func TestConsulIndexTableMatchesLocal(t *testing.T) {
	const ttl = time.Minute
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	local := NewLocal(ttl, func() time.Time { return now })
	tb := newIndexTable()
	mine := func(s string) bool { return s == "s" }
	ctx := context.Background()
	for step := range 3000 {
		node := fmt.Sprintf("n%d", rng.IntN(40))
		switch rng.IntN(5) {
		case 0, 1:
			want, _ := local.Acquire(ctx, "g", node)
			if got := tb.acquire(node, "s", "r", now, ttl); got != want {
				t.Fatalf("step %d: acquire %s = %d, Local gives %d", step, node, got, want)
			}
		case 2, 3:
			_ = local.Release(ctx, "g", node)
			tb.release(node, mine, now)
		case 4:
			now = now.Add(time.Duration(rng.IntN(30)) * time.Second)
		}
		if step%7 == 0 {
			tb = consulRoundTrip(t, tb)
		}
	}
}

func TestConsulIndexTableEncoding(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 500_000_000, time.FixedZone("X", 3600))
	tb := newIndexTable()
	tb.acquire("a", "sess-1", "xds-1", now, time.Minute)
	tb.acquire("a", "sess-2", "xds-2", now, time.Minute)
	tb.acquire("b", "sess-2", "xds-2", now, time.Minute)
	tb.release("b", func(s string) bool { return s == "sess-2" }, now)
	data, err := tb.encode()
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Version int    `json:"version"`
		Gzip    []byte `json:"gzip"`
	}
	if err := json.Unmarshal(data, &stored); err != nil || stored.Version != 2 {
		t.Fatalf("encode: %s: want version 2 (%v)", data, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(stored.Gzip))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	const table = `"holders":[{"session":"sess-1","replica":"xds-1"},{"session":"sess-2","replica":"xds-2"}],` +
		`"slots":[{"node":"a","held_by":[0,1]},{"node":"b","released_at":"2025-01-02T02:04:05.5Z"}]`
	if want := "{" + table + "}"; string(body) != want {
		t.Fatalf("encode, decompressed:\n got %s\nwant %s", body, want)
	}
	// A table written before version 2 keeps its indices: read as it
	// is, written again as version 2.
	v1, err := decodeIndexTable([]byte(`{"version":1,` + table + `}`))
	if err != nil {
		t.Fatalf("version 1: %v", err)
	}
	if again, err := v1.encode(); err != nil || string(again) != string(data) {
		t.Fatalf("version 1 written again:\n got %s (%v)\nwant %s", again, err, data)
	}
	if tb, err := decodeIndexTable(nil); err != nil || len(tb.slots) != 0 {
		t.Fatalf("empty value: %v, %v", tb, err)
	}
}

func TestConsulIndexTableDecodeRejects(t *testing.T) {
	const holders = `"holders":[{"session":"s1"}]`
	for name, value := range map[string]string{
		"not json":            `{`,
		"newer version":       `{"version":3,"slots":[]}`,
		"no version":          `{"slots":[]}`,
		"version 2 in plain":  `{"version":2,"slots":[]}`,
		"version 1 gzipped":   `{"version":1,"gzip":"H4sIAAAAAAAA/6pWKsrPySlWsoqOrQUEAAD//+LxVAEQAAAA"}`,
		"version 2 not gzip":  `{"version":2,"gzip":"bm90IGd6aXA="}`,
		"gzip bomb":           bomb(t),
		"duplicate node":      `{"version":1,"slots":[{"node":"a","released_at":"2025-01-02T03:04:05Z"},{"node":"a","released_at":"2025-01-02T03:04:05Z"}]}`,
		"holder out of range": `{"version":1,` + holders + `,"slots":[{"node":"a","held_by":[1]}]}`,
		"holder twice":        `{"version":1,` + holders + `,"slots":[{"node":"a","held_by":[0,0]}]}`,
		"holder no session":   `{"version":1,"holders":[{"replica":"x"}],"slots":[]}`,
		"bad time":            `{"version":1,"slots":[{"node":"a","released_at":"yesterday"}]}`,
		"free slot with time": `{"version":1,"slots":[{"released_at":"2025-01-02T03:04:05Z"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := decodeIndexTable([]byte(value)); err == nil || !strings.HasPrefix(err.Error(), "decode table") {
				t.Fatalf("decode %s: err = %v, want a decode table error", value, err)
			}
		})
	}
}

// bomb is a version 2 value whose table inflates past maxTableJSON.
func bomb(t *testing.T) string {
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	if _, err := w.Write(make([]byte, maxTableJSON+1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	v, err := json.Marshal(map[string]any{"version": 2, "gzip": gz.Bytes()})
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

func TestConsulIndexNeedsLiveness(t *testing.T) {
	tb := newIndexTable()
	tb.acquire("a", "mine", "r1", time.Time{}, 0)
	acquire := func(node string) []*indexOp { return []*indexOp{newIndexOp(opAcquire, node)} }
	if needsLiveness(tb, acquire("b"), "mine") {
		t.Error("only this replica's session holds slots: no need to list sessions")
	}
	tb.acquire("b", "other", "r2", time.Time{}, 0)
	if needsLiveness(tb, acquire("a"), "mine") {
		t.Error("a node with a slot needs no new slot: no need to list sessions")
	}
	if !needsLiveness(tb, acquire("c"), "mine") {
		t.Error("a new node while another session holds slots: sessions must be listed")
	}
	if !needsLiveness(tb, []*indexOp{newIndexOp(opRehold, "")}, "mine") {
		t.Error("a rehold may need new slots: sessions must be listed")
	}
	release := func(node string) []*indexOp { return []*indexOp{newIndexOp(opRelease, node)} }
	if needsLiveness(tb, release("a"), "mine") {
		t.Error("releasing a node only this replica holds: no need to list sessions")
	}
	tb.acquire("a", "other", "r2", time.Time{}, 0)
	if !needsLiveness(tb, release("a"), "mine") {
		t.Error("releasing a node another session also holds: sessions must be listed")
	}
}

func TestConsulIndexConfigValidate(t *testing.T) {
	client, err := api.NewClient(api.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		cfg  ConsulConfig
		want []string // substrings of the error; none means valid
	}{
		"minimal":  {cfg: ConsulConfig{Client: client}},
		"complete": {cfg: ConsulConfig{Client: client, Prefix: "a/b", TTL: time.Minute, Replica: "r", SessionTTL: time.Minute}},
		"everything wrong": {
			cfg:  ConsulConfig{Prefix: "/a/", TTL: -1, SessionTTL: time.Second},
			want: []string{"client is required", "ttl -1ns is negative", `prefix "/a/"`, "session ttl 1s"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to mention %q", err, w)
				}
			}
		})
	}
}
