package ha

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/drain"
)

// TestDecodeBounds: what the drains folder holds is refused beyond its
// bounds, and the error never quotes a name in full.
func TestDecodeBounds(t *testing.T) {
	big := strings.Repeat("x", 400<<10)
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	js := func(v any) []byte { b, _ := json.Marshal(v); return b }
	for name, val := range map[string][]byte{
		"a 400 KB service name":  js(drain.Admin{Target: drain.Target{Service: big}, Since: since}),
		"a 2 KB endpoint name":   js(drain.Admin{Target: drain.Target{Service: "web", Endpoint: big[:2048]}, Since: since}),
		"a TTL beyond the cap":   js(drain.Admin{Target: drain.Target{Service: "web"}, Since: since, Until: since.Add(drain.MaxTTL + time.Second)}),
		"an expiry in 2099":      js(drain.Admin{Target: drain.Target{Service: "web"}, Until: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}),
		"a value of 5 KB":        []byte(`{"service":"web","pad":"` + big[:5<<10] + `"}`),
		"a name not UTF-8":       []byte(`{"service":"\xff"}`),
		"an expiry before since": js(drain.Admin{Target: drain.Target{Service: "web"}, Since: since, Until: since.Add(-time.Second)}),
	} {
		t.Run("drain: "+name, func(t *testing.T) {
			_, err := decodeDrain(val)
			if err == nil {
				t.Fatal("accepted")
			}
			if len(err.Error()) > 200 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
		})
	}
	until := since.Add(time.Minute)
	for name, d := range map[string]drain.Departed{
		"no address":          {Service: "web", Endpoint: kvEp("w", "", 80), Until: until},
		"a bad address":       {Service: "web", Endpoint: kvEp("w", "a b", 80), Until: until},
		"port 0":              {Service: "web", Endpoint: kvEp("w", "10.0.0.1", 0), Until: until},
		"a 400 KB service":    {Service: big, Endpoint: kvEp("w", "10.0.0.1", 80), Until: until},
		"no removal time":     {Service: "web", Endpoint: kvEp("w", "10.0.0.1", 80)},
		"a value over 64 KiB": {Service: "web", Endpoint: withMeta(kvEp("w", "10.0.0.1", 80), big[:64<<10]), Until: until},
	} {
		t.Run("departure: "+name, func(t *testing.T) {
			if _, err := decodeDeparted(js(d)); err == nil || len(err.Error()) > 200 {
				t.Fatalf("error %v", err)
			}
		})
	}
	d, err := decodeDeparted(js(drain.Departed{Service: "web", Endpoint: withDrain(kvEp("w", "6.6.6.6", 6666), "evil,admin"), Until: until}))
	if err != nil || d.Endpoint.Drain != "admin" {
		t.Fatalf("decoded %+v, %v: want the drain reasons cut to known sources", d.Endpoint, err)
	}
}

func kvEp(id, addr string, port int) discovery.Endpoint {
	return discovery.Endpoint{ID: id, Address: addr, Port: port}
}

func withMeta(e discovery.Endpoint, v string) discovery.Endpoint {
	e.Meta = map[string]string{"pad": v}
	return e
}

func withDrain(e discovery.Endpoint, why string) discovery.Endpoint {
	e.Drain = why
	return e
}

// TestBadEntriesLogBounded: a folder with 20 bad entries, one with a
// 400 KB key, read 10 times (each read a change), counts each entry once
// and logs at most badLogLines lines per badLogEvery, names clipped.
func TestBadEntriesLogBounded(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "e"}, []string{"op"})
	b := badEntries{log: slog.New(slog.NewTextHandler(&buf, nil)), errors: errs, now: func() time.Time { return now }}
	pairs := []*api.KVPair{{Key: "xds-server/drains/service/" + strings.Repeat("n", 400<<10), ModifyIndex: 7}}
	for i := range 19 {
		pairs = append(pairs, &api.KVPair{Key: fmt.Sprintf("xds-server/drains/service/bad-%d", i), ModifyIndex: uint64(i + 10)})
	}
	for range 10 {
		b.begin()
		for _, p := range pairs {
			b.skip("decode_drain", p, fmt.Errorf("a long error %s", strings.Repeat("e", 10<<10)))
		}
		now = now.Add(time.Second)
	}
	lines := strings.Count(buf.String(), "\n")
	if got := testutil.ToFloat64(errs.WithLabelValues("decode_drain")); got != 20 {
		t.Errorf("counted %v, want 20 (each entry once)", got)
	}
	if lines != badLogLines || buf.Len() > badLogLines*1500 {
		t.Errorf("%d lines, %d bytes; want %d lines of at most 1500 bytes", lines, buf.Len(), badLogLines)
	}
	// a changed entry is counted and logged again, once a period passed
	now = now.Add(badLogEvery)
	pairs[0].ModifyIndex++
	b.begin()
	for _, p := range pairs {
		b.skip("decode_drain", p, fmt.Errorf("bad"))
	}
	if got := testutil.ToFloat64(errs.WithLabelValues("decode_drain")); got != 21 || !strings.Contains(buf.String(), "suppressed=15") {
		t.Errorf("counted %v, want 21; log:\n%s", got, buf.String())
	}
	t.Logf("10 reads of 20 bad entries (one key of 400 KB): %d log bytes", buf.Len())
}
