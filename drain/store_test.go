package drain

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/discovery"
)

// memStore is a Store in memory with an index, and a switch that makes
// every write fail (a Consul outage).
type memStore struct {
	mu     sync.Mutex
	drains map[Target]Admin
	down   bool
}

func (m *memStore) Put(_ context.Context, a Admin) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return errors.New("connection refused")
	}
	m.drains[a.Target] = a
	return nil
}

func (m *memStore) Delete(_ context.Context, t Target) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return errors.New("connection refused")
	}
	delete(m.drains, t)
	return nil
}

func (m *memStore) Watch(context.Context, func([]Admin)) {}

func (m *memStore) content() []Admin {
	m.mu.Lock()
	defer m.mu.Unlock()
	var d []Admin
	for _, a := range m.drains {
		d = append(d, a)
	}
	return d
}

func newStoreDrains(t *testing.T, st Store) (*Manager, *[]discovery.Snapshot) {
	t.Helper()
	var got []discovery.Snapshot
	s, err := New(Config{Emit: func(s discovery.Snapshot) { got = append(got, s) }, Store: st,
		Now: func() time.Time { return drainT0 }, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, &got
}

func TestStoreNothingServedBeforeLoaded(t *testing.T) {
	st := &memStore{drains: map[Target]Admin{{Service: "api", Endpoint: "a"}: {Target: Target{Service: "api", Endpoint: "a"}, Since: drainT0}}}
	s, got := newStoreDrains(t, st)
	s.Observe(drainWorld(ep("a"), ep("b")))
	if len(*got) != 0 {
		t.Fatalf("emitted %d snapshots before the store's drains arrived", len(*got))
	}
	s.replace(st.content())
	if len(*got) != 1 {
		t.Fatalf("emitted %d snapshots after load, want 1", len(*got))
	}
	if h, why, _ := drainOf((*got)[0], "a"); h != discovery.HealthDraining || why != SourceAdmin {
		t.Errorf("a = %v %q, want the stored drain applied", h, why)
	}
}

func TestStoreWritesFirst(t *testing.T) {
	st := &memStore{drains: map[Target]Admin{}}
	s, got := newStoreDrains(t, st)
	s.Observe(drainWorld(ep("a"), ep("b")))
	s.replace(st.content())
	tgt := Target{Service: "api", Endpoint: "a"}
	if _, err := s.Set(tgt, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.drains[tgt]; !ok {
		t.Fatal("drain not written to the store")
	}
	if h, _, _ := drainOf((*got)[len(*got)-1], "a"); h != discovery.HealthHealthy {
		t.Error("drain applied before the store's content brought it")
	}
	s.replace(st.content()) // the store's watch
	if h, _, _ := drainOf((*got)[len(*got)-1], "a"); h != discovery.HealthDraining {
		t.Error("drain in the store's content not applied")
	}

	st.down = true
	n := len(*got)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/drain", strings.NewReader(`{"service":"api","endpoint":"b"}`)))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("POST with the store down = %d %s, want 503", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodDelete, "/v1/drain?service=api&endpoint=a", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("DELETE with the store down = %d %s, want 503", rec.Code, rec.Body)
	}
	if len(*got) != n {
		t.Error("a failed write changed what is served")
	}
	if st := s.State(); len(st.Admin) != 1 || st.Admin[0].Target != tgt {
		t.Errorf("drains after failed writes = %+v, want the known one only", st.Admin)
	}

	// Another replica undrains: the watch brings the store's content.
	st.down = false
	if err := st.Delete(context.Background(), tgt); err != nil {
		t.Fatal(err)
	}
	s.replace(st.content())
	if h, _, _ := drainOf((*got)[len(*got)-1], "a"); h != discovery.HealthHealthy {
		t.Error("undrain through the store not applied")
	}
}

func TestReplaceAdmin(t *testing.T) {
	d := NewOverlay(Policy{})
	a := Admin{Target: Target{Service: "api"}, Since: drainT0}
	for _, step := range []struct {
		list []Admin
		want bool
	}{{nil, false}, {[]Admin{a}, true}, {[]Admin{a}, false},
		{[]Admin{{Target: a.Target, Since: drainT0, Until: drainT0.Add(time.Hour)}}, true}, {nil, true}} {
		if got := d.ReplaceAdmin(step.list); got != step.want {
			t.Errorf("ReplaceAdmin(%v) = %v, want %v", step.list, got, step.want)
		}
	}
}
