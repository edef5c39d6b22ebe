package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/status"
)

func TestLoadSample(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for name, tc := range map[string]struct {
		calls  []struct{ begin, end int } // ms; end < 0: still in flight
		failed int                        // of the completed calls, the first ones failed
		until  int                        // ms: the sample time
		want   sample
	}{
		"idle": {until: 1000, want: sample{}},
		"one call for half the period": {calls: []struct{ begin, end int }{{0, 500}}, until: 1000,
			want: sample{Concurrency: 0.5, QPS: 1}},
		"overlapping calls, one failed": {calls: []struct{ begin, end int }{{0, 1000}, {0, 1000}, {500, 1000}},
			failed: 1, until: 1000, want: sample{Concurrency: 2.5, QPS: 3, EPS: 1}},
		"a call still in flight counts its time, not as done": {calls: []struct{ begin, end int }{{250, -1}},
			until: 1000, want: sample{Concurrency: 0.75}},
	} {
		t.Run(name, func(t *testing.T) {
			l := newLoad(at(0))
			for _, c := range tc.calls {
				l.begin(at(c.begin))
			}
			failed := tc.failed
			for _, c := range tc.calls {
				if c.end >= 0 {
					l.end(at(c.end), failed > 0)
					failed--
				}
			}
			if got := l.sample(at(tc.until)); got != tc.want {
				t.Errorf("sample = %+v, want %+v", got, tc.want)
			}
			if got := l.sample(at(tc.until + 1000)); got.QPS != 0 || got.EPS != 0 {
				t.Errorf("next sample = %+v, want no completed calls", got)
			}
		})
	}
}

func TestLoadReport(t *testing.T) {
	m := &serverMetrics{ServerMetricsRecorder: orca.NewServerMetricsRecorder(), lameDuckMetric: "drain"}
	setLoad(m, sample{Concurrency: 5, QPS: 100, EPS: 2}, -1, 10)
	r := loadReport(m.ServerMetrics())
	if r.GetCpuUtilization() != 0.5 || r.GetRpsFractional() != 100 || r.GetEps() != 2 ||
		r.GetMemUtilization() != 0 || len(r.GetNamedMetrics()) != 0 {
		t.Errorf("report = %v, want cpu 0.5, rps 100, eps 2 and nothing else", r)
	}
	m.lameDuck.Store(true)
	setLoad(m, sample{Concurrency: 5}, 0.75, 10)
	r = loadReport(m.ServerMetrics())
	if r.GetCpuUtilization() != 0.75 || r.GetNamedMetrics()["drain"] != 1 {
		t.Errorf("report in lame duck = %v, want cpu 0.75 (fixed) and drain 1", r)
	}
}

func TestCallDelay(t *testing.T) {
	for value, want := range map[string]codes.Code{"": codes.InvalidArgument, "250": codes.OK,
		"-1": codes.InvalidArgument, "1.5": codes.InvalidArgument, "600001": codes.InvalidArgument} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(delayKey, value))
		d, err := callDelay(ctx)
		if status.Code(err) != want || (want == codes.OK && d != 250*time.Millisecond) {
			t.Errorf("x-delay-ms %q: %v, %v; want %v", value, d, err, want)
		}
	}
	if d, err := callDelay(context.Background()); d != 0 || err != nil {
		t.Errorf("no x-delay-ms: %v, %v; want 0, nil", d, err)
	}
}
