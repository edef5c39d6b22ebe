package ha

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/xds-server/xds-server/drain"
	"github.com/xds-server/xds-server/weights"
)

// FuzzDecodeDrain feeds arbitrary KV values (anyone with KV write access
// to the prefix can write them) to the drain decoder: it never panics, and
// what it accepts is a valid target that encodes and decodes to itself
// under a key of the drains folder.
func FuzzDecodeDrain(f *testing.F) {
	for _, seed := range []string{
		`{"service":"api","endpoint":"a","since":"2026-01-02T03:04:05Z","until":"2026-01-02T04:04:05Z"}`,
		`{"node":"n1","since":"2026-01-02T03:04:05Z"}`, `{"service":"a/b"}`, `{}`, `null`, `[`, `{"node":"n","endpoint":"e"}`,
	} {
		f.Add([]byte(seed))
	}
	l := Layout{Prefix: "xds-server/"}
	f.Fuzz(func(t *testing.T, val []byte) {
		a, err := decodeDrain(val)
		if err != nil {
			return
		}
		if (a.Node == "") == (a.Service == "") || (a.Node != "" && a.Endpoint != "") {
			t.Fatalf("accepted an invalid target %+v", a.Target)
		}
		if len(val) > maxDrainValue || len(a.Service) > MaxKVNameBytes || len(a.Endpoint) > MaxKVNameBytes || len(a.Node) > MaxKVNameBytes {
			t.Fatalf("accepted %d bytes with names of %d, %d, %d bytes", len(val), len(a.Service), len(a.Endpoint), len(a.Node))
		}
		if !a.Until.IsZero() && a.Until.Sub(a.Since) > drain.MaxTTL {
			t.Fatalf("accepted a drain from %v until %v", a.Since, a.Until)
		}
		key := l.Drain(a.Target)
		rest, ok := strings.CutPrefix(key, l.Drains())
		if !ok || strings.Count(rest, "/") > 2 {
			t.Fatalf("key %q of %+v leaves the drains folder or splits a name", key, a.Target)
		}
		for _, seg := range strings.Split(rest, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("key %q of %+v has the segment %q", key, a.Target, seg)
			}
		}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeDrain(b)
		if err != nil || again.Target != a.Target {
			t.Fatalf("round trip of %+v: %+v, %v", a.Target, again.Target, err)
		}
	})
}

// FuzzDecodeDeparted feeds arbitrary KV values to the departure decoder:
// it never panics, and what it accepts names a service and an endpoint
// under a key of the departed folder, with a removal time, and round
// trips.
func FuzzDecodeDeparted(f *testing.F) {
	for _, seed := range []string{
		`{"service":"api","endpoint":{"ID":"a","Address":"10.0.0.1","Port":80},"until":"2026-01-02T04:04:05Z"}`,
		`{"service":"api","endpoint":{"ID":"a"}}`, `{"service":"","endpoint":{"ID":"a"},"until":"2026-01-02T04:04:05Z"}`, `{}`, `null`, `[`,
		`{"service":"web","endpoint":{"ID":"w","Address":"6.6.6.6","Port":6666,"Drain":"evil,admin"},"until":"2099-01-01T00:00:00Z"}`,
		`{"service":"web","endpoint":{"ID":"w","Address":"a..b","Port":1},"until":"2026-01-02T04:04:05Z"}`,
	} {
		f.Add([]byte(seed))
	}
	l := Layout{Prefix: "xds-server/"}
	f.Fuzz(func(t *testing.T, val []byte) {
		d, err := decodeDeparted(val)
		if err != nil {
			return
		}
		if d.Service == "" || d.Endpoint.ID == "" || d.Until.IsZero() {
			t.Fatalf("accepted %+v", d)
		}
		ep := d.Endpoint
		if len(val) > maxDepartedValue || len(d.Service) > MaxKVNameBytes || len(ep.ID) > MaxKVNameBytes || len(ep.Node) > MaxKVNameBytes {
			t.Fatalf("accepted %d bytes with names of %d, %d, %d bytes", len(val), len(d.Service), len(ep.ID), len(ep.Node))
		}
		if ep.Port < 1 || ep.Port > 65535 || !validAddress(ep.Address) {
			t.Fatalf("accepted the endpoint %q port %d", ep.Address, ep.Port)
		}
		for _, why := range strings.Split(ep.Drain, ",") {
			if why != "" && !slices.Contains(drain.Sources, why) {
				t.Fatalf("kept the drain reason %q", why)
			}
		}
		rest, ok := strings.CutPrefix(l.DepartedKey(d.Service, d.Endpoint.ID), l.Departed())
		if !ok || strings.Count(rest, "/") != 1 {
			t.Fatalf("key of %+v leaves the departed folder or splits a name: %q", d, rest)
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeDeparted(b)
		if err != nil || again.Service != d.Service || again.Endpoint.ID != d.Endpoint.ID || !again.Until.Equal(d.Until) {
			t.Fatalf("round trip of %+v: %+v, %v", d, again, err)
		}
	})
}

// FuzzDecodeWeights feeds arbitrary KV values (a load summary or the
// weights table: gzip'd JSON) to their decoder: it never panics (a gzip
// bomb is cut at 16 x MaxWeightsValueBytes decompressed), and what it
// accepts encodes again.
func FuzzDecodeWeights(f *testing.F) {
	for _, v := range []any{weights.Summary{Replica: "r1"}, weights.SharedTable{}} {
		b, err := encodeGzipJSON(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("not gzip"))
	f.Fuzz(func(t *testing.T, val []byte) {
		var s weights.Summary
		if decodeGzipJSON(val, &s) == nil {
			if _, err := encodeGzipJSON(s); err != nil {
				t.Fatalf("accepted a summary that does not encode: %v", err)
			}
		}
		var tb weights.SharedTable
		if decodeGzipJSON(val, &tb) == nil {
			if _, err := encodeGzipJSON(tb); err != nil {
				t.Fatalf("accepted a table that does not encode: %v", err)
			}
		}
	})
}
