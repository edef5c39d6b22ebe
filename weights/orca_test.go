package weights

import (
	"errors"
	"log/slog"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/orca"
)

// waitFor bounds every wait on an observable event.
const waitFor = 5 * time.Second

// orcaBackend is a real grpc-go server with grpc-go's ORCA service.
type orcaBackend struct {
	addr   string
	fast   bool                       // report every 50ms instead of 30s
	rec    orca.ServerMetricsRecorder // what the backend reports
	opened chan struct{}              // one value per stream opened
	ended  chan struct{}              // one value per stream ended
	mu     sync.Mutex
	srv    *grpc.Server
}

// newORCABackend serves on a free loopback port until the test ends.
func newORCABackend(t *testing.T, fast bool, cpu, app, qps float64) *orcaBackend {
	t.Helper()
	b := &orcaBackend{
		fast:   fast,
		rec:    orca.NewServerMetricsRecorder(),
		opened: make(chan struct{}, 100),
		ended:  make(chan struct{}, 100),
	}
	b.rec.SetCPUUtilization(cpu)
	if app > 0 {
		b.rec.SetApplicationUtilization(app)
	}
	b.rec.SetQPS(qps)
	b.serve(t, "127.0.0.1:0")
	t.Cleanup(b.stop)
	return b
}

// serve starts a server on addr (again, after stop).
func (b *orcaBackend) serve(t *testing.T, addr string) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	track := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		b.opened <- struct{}{}
		defer func() { b.ended <- struct{}{} }()
		return h(srv, ss)
	}
	srv := grpc.NewServer(grpc.StreamInterceptor(track))
	opts := orca.ServiceOptions{ServerMetricsProvider: b.rec, MinReportingInterval: 50 * time.Millisecond}
	if b.fast {
		allowFastReporting(t, &opts)
	}
	if err := orca.Register(srv, opts); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	b.addr, b.srv = lis.Addr().String(), srv
	b.mu.Unlock()
	go srv.Serve(lis)
}

// stop stops the server, closing its streams and connections.
func (b *orcaBackend) stop() {
	b.mu.Lock()
	srv := b.srv
	b.mu.Unlock()
	srv.Stop()
}

// allowFastReporting lets MinReportingInterval go below grpc-go's floor of
// 30s. grpc-go keeps its switch for that in an internal package; this sets
// the same unexported field, on a real grpc-go ORCA service. Tests that
// need several reports on one stream skip when the field is gone.
func allowFastReporting(t *testing.T, opts *orca.ServiceOptions) {
	t.Helper()
	f := reflect.ValueOf(opts).Elem().FieldByName("allowAnyMinReportingInterval")
	if !f.IsValid() || f.Kind() != reflect.Bool {
		t.Skip("grpc-go's orca.ServiceOptions has no allowAnyMinReportingInterval field")
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetBool(true)
}

// chanSink hands reports to the test. It is not the system under test.
type chanSink struct {
	reports chan Report
	err     error // returned by Observe
}

func newChanSink() *chanSink { return &chanSink{reports: make(chan Report, 1000)} }

func (s *chanSink) Observe(r Report, _ time.Time) error {
	select {
	case s.reports <- r:
	default: // a test that lets 1000 reports pile up does not read them
	}
	return s.err
}

// next waits for the next report that matches ok, dropping others.
func (s *chanSink) next(t *testing.T, ok func(Report) bool) Report {
	t.Helper()
	timeout := time.After(waitFor)
	for {
		select {
		case r := <-s.reports:
			if ok(r) {
				return r
			}
		case <-timeout:
			t.Fatal("no matching report")
		}
	}
}

func endpointIs(id string) func(Report) bool {
	return func(r Report) bool { return r.Endpoint == id }
}

// wait waits for one value on ch.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitFor):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// newTestORCA returns a client on sink with test backoffs, metrics on a
// fresh registry and logs in the test output; it is closed at the end.
func newTestORCA(t *testing.T, sink ReportSink, now func() time.Time) *ORCA {
	t.Helper()
	o, err := NewORCA(ORCAConfig{
		Sink:        sink,
		Interval:    50 * time.Millisecond,
		BackoffBase: 10 * time.Millisecond,
		BackoffMax:  40 * time.Millisecond,
		Logger:      slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registerer:  prometheus.NewRegistry(),
		Now:         now,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	return o
}

func TestORCAReportsFromTwoBackends(t *testing.T) {
	a := newORCABackend(t, false, 0.2, 0.3, 100)
	a.rec.SetEPS(2)
	a.rec.(interface{ SetNamedMetric(string, float64) }).SetNamedMetric("queue", 7)
	b := newORCABackend(t, false, 0.8, 0, 50)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sink := newChanSink()
	o := newTestORCA(t, sink, func() time.Time { return t0 })
	o.SetTargets([]ORCATarget{
		{Service: "s", Endpoint: "a", Address: a.addr},
		{Service: "s", Endpoint: "b", Address: b.addr},
		{Service: "s", Endpoint: "a", Address: a.addr}, // duplicates count once
	})

	want := map[string]Report{
		"a": {Service: "s", Endpoint: "a", At: t0, QPS: 100, EPS: 2, CPU: 0.2, App: 0.3, Named: map[string]float64{"queue": 7}},
		"b": {Service: "s", Endpoint: "b", At: t0, QPS: 50, CPU: 0.8},
	}
	got := map[string]Report{}
	for len(got) < 2 {
		r := sink.next(t, func(Report) bool { return true })
		got[r.Endpoint] = r
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reports:\n got %+v\nwant %+v", got, want)
	}
	if n := len(a.opened); n != 1 {
		t.Errorf("backend a saw %d streams, want 1 (duplicate target)", n)
	}
	if n := testutil.ToFloat64(o.metrics.streams); n != 2 {
		t.Errorf("xds_weights_orca_streams = %v, want 2", n)
	}
	if n := testutil.ToFloat64(o.metrics.reports); n < 2 {
		t.Errorf("xds_weights_orca_reports_total = %v, want >= 2", n)
	}
}

func TestORCAFollowsChangesOnOneStream(t *testing.T) {
	a := newORCABackend(t, true, 0.2, 0, 100)
	sink := newChanSink()
	o := newTestORCA(t, sink, nil)
	o.SetTargets([]ORCATarget{{Service: "s", Endpoint: "a", Address: a.addr}})
	sink.next(t, func(r Report) bool { return r.CPU == 0.2 })
	a.rec.SetCPUUtilization(0.7)
	r := sink.next(t, func(r Report) bool { return r.CPU == 0.7 })
	if r.QPS != 100 || r.At.IsZero() {
		t.Errorf("report after the change = %+v, want qps 100 and a time", r)
	}
	if n := len(a.opened); n != 1 {
		t.Errorf("backend saw %d streams, want 1", n)
	}
}

func TestORCARemovedTargetStops(t *testing.T) {
	a := newORCABackend(t, true, 0.2, 0, 100)
	b := newORCABackend(t, true, 0.4, 0, 100)
	sink := newChanSink()
	o := newTestORCA(t, sink, nil)
	ta := ORCATarget{Service: "s", Endpoint: "a", Address: a.addr}
	tb := ORCATarget{Service: "s", Endpoint: "b", Address: b.addr}
	o.SetTargets([]ORCATarget{ta, tb})
	sink.next(t, endpointIs("a"))
	sink.next(t, endpointIs("b"))
	wait(t, a.opened, "stream to a")
	wait(t, b.opened, "stream to b")

	o.SetTargets([]ORCATarget{ta}) // returns once b's stream has ended
	o.SetTargets([]ORCATarget{ta}) // the same list again: a untouched
	wait(t, b.ended, "b to see its stream end")
	for range len(sink.reports) { // reports sent before the stop
		<-sink.reports
	}
	for range 3 { // a keeps reporting every 50ms, b stays silent
		if r := sink.next(t, func(Report) bool { return true }); r.Endpoint != "a" {
			t.Fatalf("report from removed target %+v", r)
		}
	}
	if len(a.opened) != 0 || len(a.ended) != 0 {
		t.Errorf("a's stream restarted: %d more opened, %d ended", len(a.opened), len(a.ended))
	}
	if n := testutil.ToFloat64(o.metrics.streams); n != 1 {
		t.Errorf("xds_weights_orca_streams = %v, want 1", n)
	}
	if n := testutil.ToFloat64(o.metrics.errors.WithLabelValues(errStream)); n != 0 {
		t.Errorf("a clean stop counted %v stream errors", n)
	}
}

func TestORCAReconnectsAfterBackendRestart(t *testing.T) {
	a := newORCABackend(t, false, 0.3, 0, 100)
	sink := newChanSink()
	o := newTestORCA(t, sink, nil)
	o.SetTargets([]ORCATarget{{Service: "s", Endpoint: "a", Address: a.addr}})
	sink.next(t, func(r Report) bool { return r.CPU == 0.3 })

	a.stop()
	wait(t, a.ended, "the stream to end with the backend")
	// While down, the port accepts and drops connections: each is an attempt.
	down, err := net.Listen("tcp", a.addr)
	if err != nil {
		t.Fatal(err)
	}
	attempts := make(chan struct{}, 100)
	go func() {
		for {
			c, err := down.Accept()
			if err != nil {
				return
			}
			c.Close()
			select {
			case attempts <- struct{}{}:
			default:
			}
		}
	}()
	for range 3 {
		wait(t, attempts, "a reconnection attempt")
	}
	down.Close()
	a.rec.SetCPUUtilization(0.6)
	a.serve(t, a.addr) // same port
	sink.next(t, func(r Report) bool { return r.CPU == 0.6 })
	if n := testutil.ToFloat64(o.metrics.errors.WithLabelValues(errStream)); n < 3 {
		t.Errorf("xds_weights_orca_errors_total{kind=stream} = %v, want >= 3", n)
	}
}

func TestORCACloseReturnsPromptly(t *testing.T) {
	a := newORCABackend(t, false, 0.3, 0, 100)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := lis.Addr().String()
	lis.Close()
	sink := newChanSink()
	o, err := NewORCA(ORCAConfig{ // default backoff: 250ms to 30s
		Sink:       sink,
		Logger:     slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registerer: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	o.SetTargets([]ORCATarget{
		{Service: "s", Endpoint: "a", Address: a.addr},        // streaming
		{Service: "s", Endpoint: "r", Address: refused},       // in backoff
		{Service: "s", Endpoint: "x", Address: "192.0.2.1:9"}, // connecting (TEST-NET-1)
		{Service: "s", Endpoint: "i", Address: "no-port"},     // invalid
	})
	sink.next(t, endpointIs("a"))
	wait(t, a.opened, "stream to a")

	start := time.Now()
	o.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	wait(t, a.ended, "the backend to see its stream end")
	if n := testutil.ToFloat64(o.metrics.streams); n != 0 {
		t.Errorf("xds_weights_orca_streams = %v after Close, want 0", n)
	}
	if n := testutil.ToFloat64(o.metrics.errors.WithLabelValues(errDial)); n != 1 {
		t.Errorf("xds_weights_orca_errors_total{kind=dial} = %v, want 1 (the invalid target)", n)
	}
	o.SetTargets([]ORCATarget{{Service: "s", Endpoint: "a", Address: a.addr}}) // no-op after Close
	o.Close()
	if len(a.opened) != 0 {
		t.Errorf("SetTargets after Close opened a stream")
	}
}

// trackerSink feeds a real Tracker and tells the test each outcome.
type trackerSink struct {
	*Tracker
	errs chan error
}

func (s trackerSink) Observe(r Report, now time.Time) error {
	err := s.Tracker.Observe(r, now)
	s.errs <- err
	return err
}

func TestORCAFeedsTracker(t *testing.T) {
	a := newORCABackend(t, false, 0.5, 0, 100)
	z := newORCABackend(t, false, 0.5, 0, 100)
	sink := trackerSink{newTestTracker(t, noBlackout, "a"), make(chan error, 10)}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	o := newTestORCA(t, sink, func() time.Time { return t0 })
	o.SetTargets([]ORCATarget{
		{Service: "s", Endpoint: "a", Address: a.addr},
		{Service: "s", Endpoint: "z", Address: z.addr}, // unknown to the tracker
	})
	var unknown int
	for range 2 {
		select {
		case err := <-sink.errs:
			if errors.Is(err, ErrUnknownEndpoint) {
				unknown++
			} else if err != nil {
				t.Errorf("Observe: %v", err)
			}
		case <-time.After(waitFor):
			t.Fatal("timed out waiting for reports")
		}
	}
	if unknown != 1 {
		t.Errorf("%d reports of unknown endpoints, want 1", unknown)
	}
	o.Close() // waits for the streams, which count an error after the sink returns it
	if n := testutil.ToFloat64(o.metrics.errors.WithLabelValues(errObserve)); n != 1 {
		t.Errorf("xds_weights_orca_errors_total{kind=observe} = %v, want 1", n)
	}
	row, ok := sink.Update(t0).Service("s")
	if !ok {
		t.Fatal("no table for service s")
	}
	if r, _ := row.Row("a"); r.Reason != ReasonReported || r.QPS != 100 || r.Utilization != 0.5 {
		t.Errorf("row a = %+v, want reported at 100 qps, utilization 0.5", r)
	}
}
