package discovery

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

const consulTestTimeout = 10 * time.Second

// consulHarness runs a Consul source against an address and collects what it
// emits, with the time of each emit.
type consulHarness struct {
	snaps   chan Snapshot
	metrics *Metrics
	mu      sync.Mutex
	times   []time.Time
}

// runConsul starts a source with fast test timings (overridable in cfg) and
// stops it, checking that Run returns nil, when the test ends.
func runConsul(t *testing.T, addr string, cfg ConsulConfig) *consulHarness {
	t.Helper()
	cfg.Address = addr
	cfg.Wait = cmpOr(cfg.Wait, 2*time.Second)
	cfg.MinInterval = cmpOr(cfg.MinInterval, 5*time.Millisecond)
	cfg.BackoffBase = cmpOr(cfg.BackoffBase, 5*time.Millisecond)
	cfg.BackoffMax = cmpOr(cfg.BackoffMax, 20*time.Millisecond)
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	src, err := NewConsul(cfg)
	if err != nil {
		t.Fatalf("NewConsul: %v", err)
	}
	h := &consulHarness{snaps: make(chan Snapshot, 1000), metrics: cfg.Metrics}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- src.Run(ctx, func(s Snapshot) {
			h.mu.Lock()
			h.times = append(h.times, time.Now())
			h.mu.Unlock()
			h.snaps <- s
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v, want nil", err)
			}
		case <-time.After(consulTestTimeout):
			t.Errorf("Run did not return after cancel")
		}
	})
	return h
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// next returns the next snapshot emitted.
func (h *consulHarness) next(t *testing.T) Snapshot {
	t.Helper()
	select {
	case s := <-h.snaps:
		return s
	case <-time.After(consulTestTimeout):
		t.Fatalf("no snapshot within %v", consulTestTimeout)
		return Snapshot{}
	}
}

// await returns the first snapshot for which ok holds, failing the test if a
// snapshot in between fails check (nil: no check).
func (h *consulHarness) await(t *testing.T, what string, ok, check func(Snapshot) bool) Snapshot {
	t.Helper()
	deadline := time.After(consulTestTimeout)
	for {
		select {
		case s := <-h.snaps:
			if ok(s) {
				return s
			}
			if check != nil && !check(s) {
				t.Fatalf("while waiting for %s: unexpected snapshot %+v", what, s)
			}
		case <-deadline:
			t.Fatalf("no snapshot with %s within %v", what, consulTestTimeout)
		}
	}
}

// pending reports a snapshot already emitted and not yet read, if any.
func (h *consulHarness) pending() (Snapshot, bool) {
	select {
	case s := <-h.snaps:
		return s, true
	default:
		return Snapshot{}, false
	}
}

// eventually polls cond (a metric, not observable otherwise) until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(consulTestTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v", what, consulTestTimeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func metricValue(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

// health returns the health of each endpoint of service, by endpoint id.
func health(s Snapshot, service string) map[string]Health {
	svc, ok := s.Service(service)
	if !ok {
		return nil
	}
	out := map[string]Health{}
	for _, ep := range svc.Endpoints {
		out[ep.ID] = ep.Health
	}
	return out
}

// syncWriter serializes writes of several goroutines to w.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
