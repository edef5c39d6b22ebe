package discovery

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// fakeConsul is an in-process stand-in for the two Consul HTTP endpoints the
// source reads, with real blocking-query semantics (index, wait) and one
// global index bumped on every change.
type fakeConsul struct {
	srv *httptest.Server

	mu       sync.Mutex
	index    uint64
	changed  chan struct{} // closed and replaced on every change
	services map[string][]*api.ServiceEntry
	down     bool            // answer 500 to everything
	tokens   map[string]bool // X-Consul-Token values seen
	held     map[string]chan struct{}
	notify   map[string][]chan struct{} // closed after the next answer on a path
}

func newFakeConsul(t *testing.T) *fakeConsul {
	t.Helper()
	f := &fakeConsul{
		index:    10,
		changed:  make(chan struct{}),
		services: map[string][]*api.ServiceEntry{},
		tokens:   map[string]bool{},
		held:     map[string]chan struct{}{},
		notify:   map[string][]chan struct{}{},
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
	return f
}

// addr is the host:port of the fake.
func (f *fakeConsul) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

// update changes the state under the lock and wakes blocked queries. A
// non-zero index sets the next index (to make it go backwards); 0 bumps it.
func (f *fakeConsul) update(index uint64, change func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if change != nil {
		change()
	}
	if index != 0 {
		f.index = index
	} else {
		f.index++
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

// set replaces the instances of a service (nil entries: remove it).
func (f *fakeConsul) set(name string, entries ...*api.ServiceEntry) {
	f.update(0, func() {
		if entries == nil {
			delete(f.services, name)
			return
		}
		f.services[name] = entries
	})
}

// setDown makes every request fail (true) or succeed again (false).
func (f *fakeConsul) setDown(down bool) { f.update(0, func() { f.down = down }) }

// hold makes health queries of service wait until the returned func is called.
func (f *fakeConsul) hold(service string) (release func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	f.held[service] = ch
	f.mu.Unlock()
	return sync.OnceFunc(func() { close(ch) })
}

func (f *fakeConsul) sawToken(tok string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokens[tok]
}

func (f *fakeConsul) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.tokens[r.Header.Get("X-Consul-Token")] = true
	held := f.held[strings.TrimPrefix(r.URL.Path, "/v1/health/service/")]
	f.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-r.Context().Done():
			return
		}
	}
	index, body, ok := f.wait(r)
	if !ok {
		http.Error(w, "fake consul is down", http.StatusInternalServerError)
		return
	}
	w.Header().Set("X-Consul-Index", strconv.FormatUint(index, 10))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
	f.mu.Lock()
	for _, ch := range f.notify[r.URL.Path] {
		close(ch)
	}
	delete(f.notify, r.URL.Path)
	f.mu.Unlock()
}

// answered returns a channel closed after the next answer on path.
func (f *fakeConsul) answered(path string) <-chan struct{} {
	ch := make(chan struct{})
	f.mu.Lock()
	f.notify[path] = append(f.notify[path], ch)
	f.mu.Unlock()
	return ch
}

// wait blocks like Consul: while the index equals the one asked for, until
// the wait time passes. It returns the answer of the current state.
func (f *fakeConsul) wait(r *http.Request) (uint64, any, bool) {
	want, _ := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
	wait, err := time.ParseDuration(r.URL.Query().Get("wait"))
	if err != nil {
		wait = 5 * time.Minute
	}
	timeout := time.After(wait)
	for {
		f.mu.Lock()
		if f.down || want == 0 || f.index != want {
			defer f.mu.Unlock()
			return f.index, f.body(r), !f.down
		}
		changed := f.changed
		f.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			want = 0
		case <-r.Context().Done():
			want = 0
		}
	}
}

// body is the answer to r in the current state; f.mu is held.
func (f *fakeConsul) body(r *http.Request) any {
	if r.URL.Path == "/v1/catalog/services" {
		out := map[string][]string{}
		for name, entries := range f.services {
			tags := []string{}
			for _, e := range entries {
				for _, t := range e.Service.Tags {
					if !slices.Contains(tags, t) {
						tags = append(tags, t)
					}
				}
			}
			out[name] = tags
		}
		return out
	}
	name := strings.TrimPrefix(r.URL.Path, "/v1/health/service/")
	out := []*api.ServiceEntry{}
	for _, e := range f.services[name] {
		if hasAllTags(e.Service.Tags, r.URL.Query()["tag"]) {
			out = append(out, e)
		}
	}
	return out
}

// entry builds one service instance on node with the given check statuses
// (check ids "c0", "c1", ...).
func entry(node, id, addr string, port int, statuses ...string) *api.ServiceEntry {
	e := &api.ServiceEntry{
		Node:    &api.Node{Node: node, Address: "10.0.0." + strings.TrimPrefix(node, "n"), Datacenter: "dc1"},
		Service: &api.AgentService{ID: id, Address: addr, Port: port, Weights: api.AgentWeights{Passing: 1, Warning: 1}},
	}
	for i, s := range statuses {
		e.Checks = append(e.Checks, &api.HealthCheck{Node: node, CheckID: "c" + strconv.Itoa(i), Status: s, ServiceID: id})
	}
	return e
}
