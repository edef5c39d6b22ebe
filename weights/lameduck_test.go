package weights

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Only transitions reach the subscribers, in service then endpoint
// order, the latest state of each; repeated reports say nothing new.
func TestLameDuckTransitions(t *testing.T) {
	l := newLameDucks()
	var got []string
	l.subs = append(l.subs, func(service, endpoint string, on bool) {
		got = append(got, fmt.Sprint(service, "/", endpoint, "=", on))
	})
	for _, r := range []Report{
		{Service: "b", Endpoint: "1", LameDuck: true},
		{Service: "a", Endpoint: "2", LameDuck: true},
		{Service: "a", Endpoint: "2", LameDuck: true},
		{Service: "a", Endpoint: "3"}, // never lame duck: no transition
		{Service: "a", Endpoint: "1", LameDuck: true},
		{Service: "a", Endpoint: "1"}, // back before delivery: the latest state
	} {
		l.observe(r)
	}
	if len(l.kick) != 1 {
		t.Error("no kick for the pipeline's goroutine")
	}
	if n := l.publish(); n != 3 {
		t.Errorf("%d transitions delivered, want 3", n)
	}
	if want := []string{"a/1=false", "a/2=true", "b/1=true"}; !slices.Equal(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
	got = nil
	l.observe(Report{Service: "a", Endpoint: "2", LameDuck: true})
	l.observe(Report{Service: "a", Endpoint: "2"})
	if l.publish(); !slices.Equal(got, []string{"a/2=false"}) {
		t.Errorf("after the flag cleared: %v, want a/2=false", got)
	}
}

// The ORCA client marks a report LameDuck when its lame-duck metric is 1
// or more, from a real backend's named metric.
func TestORCALameDuckMetric(t *testing.T) {
	a := newORCABackend(t, true, 0.2, 0, 100)
	a.rec.(interface{ SetNamedMetric(string, float64) }).SetNamedMetric("lame_duck", 1)
	sink := newChanSink()
	o := newTestORCA(t, sink, time.Now)
	o.cfg.LameDuckMetric = "lame_duck"
	o.SetTargets([]ORCATarget{{Service: "s", Endpoint: "a", Address: a.addr}})
	if r := sink.next(t, endpointIs("a")); !r.LameDuck {
		t.Errorf("report %+v: want LameDuck with lame_duck at 1", r)
	}
	a.rec.(interface{ SetNamedMetric(string, float64) }).SetNamedMetric("lame_duck", 0.5)
	sink.next(t, func(r Report) bool { return !r.LameDuck })
}
