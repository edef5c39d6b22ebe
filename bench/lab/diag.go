package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
)

// timeline counts events by the second of the run they belong to (the
// second a failed request was sent in), for the diagnostics file.
type timeline struct {
	mu sync.Mutex
	by map[int]int64
}

// add counts one event at t, t0 being the run's start.
func (tl *timeline) add(t0, t time.Time) {
	s := int(t.Sub(t0) / time.Second)
	tl.mu.Lock()
	if tl.by == nil {
		tl.by = map[int]int64{}
	}
	tl.by[s]++
	tl.mu.Unlock()
}

// snapshot is a copy of the counts by second.
func (tl *timeline) snapshot() map[int]int64 {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return maps.Clone(tl.by)
}

// envoyHostSample is one host of one Envoy's lab cluster at one second:
// its weight and its request counters (Envoy's /clusters host stats).
type envoyHostSample struct {
	Backend   int   `json:"backend"` // index of the backend; -1: not a lab backend
	Weight    int   `json:"weight"`
	RqActive  int64 `json:"rq_active"`
	RqTotal   int64 `json:"rq_total"`
	RqError   int64 `json:"rq_error"`
	RqTimeout int64 `json:"rq_timeout"`
	CxActive  int64 `json:"cx_active"`
}

// envoySample is every Envoy's view of the lab cluster at second At of
// the run.
type envoySample struct {
	At     int                       `json:"at"`
	Envoys map[int][]envoyHostSample `json:"envoys"` // by client index
}

// watchEnvoys reads every Envoy's /clusters once a second until ctx ends
// (another process: polling is the only way to follow it).
func watchEnvoys(ctx context.Context, f *envoyFleet, bs []*backend, t0 time.Time) []envoySample {
	index := map[string]int{}
	for j, b := range bs {
		index[b.grpc] = j
	}
	return everySecond(ctx, t0, func(at int) envoySample {
		s := envoySample{At: at, Envoys: map[int][]envoyHostSample{}}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, e := range f.envoys {
			wg.Go(func() {
				hs, err := envoyHostStats(e.admin, service, index)
				if err == nil {
					mu.Lock()
					s.Envoys[e.index] = hs
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return s
	})
}

// everySecond takes a sample once a second until ctx ends and returns
// them in order; sample gets the whole seconds since t0.
func everySecond[S any](ctx context.Context, t0 time.Time, sample func(at int) S) []S {
	var out []S
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
		out = append(out, sample(int(time.Since(t0)/time.Second)))
	}
}

// envoyHostStats reads cluster's hosts with their stats from the Envoy at
// admin; index maps a host:port to its backend.
func envoyHostStats(admin, cluster string, index map[string]int) ([]envoyHostSample, error) {
	b, err := envoyAdminGet(admin, "/clusters?format=json")
	if err != nil {
		return nil, err
	}
	return parseHostStats(b, cluster, index)
}

// parseHostStats reads cluster's hosts and their stats from the JSON of
// Envoy's /clusters?format=json.
func parseHostStats(b []byte, cluster string, index map[string]int) ([]envoyHostSample, error) {
	hosts, err := clusterHosts(b, cluster)
	if err != nil {
		return nil, err
	}
	var out []envoyHostSample
	for _, h := range hosts {
		j, ok := index[h.Address.hostPort()]
		if !ok {
			j = -1
		}
		hs := envoyHostSample{Backend: j, Weight: h.Weight}
		for _, st := range h.Stats {
			v, _ := strconv.ParseInt(st.Value, 10, 64)
			switch st.Name {
			case "rq_active":
				hs.RqActive = v
			case "rq_total":
				hs.RqTotal = v
			case "rq_error":
				hs.RqError = v
			case "rq_timeout":
				hs.RqTimeout = v
			case "cx_active":
				hs.CxActive = v
			}
		}
		out = append(out, hs)
	}
	return out, nil
}

// serverSample is xds-server's view at second At of the run: its weight
// table's rows (capacity, qps, utilization, weight) and, per node, the
// rate it measured and the weights it last planned (/debug/weights).
type serverSample struct {
	At    int                      `json:"at"`
	Table []map[string]any         `json:"table"`
	Nodes map[int]serverNodeSample `json:"nodes"`
}

// serverNodeSample is one node's entry of /debug/weights?node=.
type serverNodeSample struct {
	Rate      float64          `json:"rate"`
	Global    bool             `json:"global_fallback"`
	Endpoints []map[string]any `json:"endpoints"`
}

// watchServer reads xds-server's /debug/weights (the table and every
// client node's plan) once a second until ctx ends.
func watchServer(ctx context.Context, admin string, clients int, t0 time.Time) []serverSample {
	return everySecond(ctx, t0, func(at int) serverSample {
		s := serverSample{At: at, Nodes: map[int]serverNodeSample{}}
		var tab struct {
			Endpoints []map[string]any `json:"endpoints"`
		}
		if b, err := envoyAdminGet(admin, "/debug/weights?service="+service); err == nil && json.Unmarshal(b, &tab) == nil {
			s.Table = tab.Endpoints
		}
		for i := range clients {
			var n serverNodeSample
			b, err := envoyAdminGet(admin, fmt.Sprintf("/debug/weights?service=%s&node=lab-client-%d", service, i))
			if err == nil && json.Unmarshal(b, &n) == nil {
				s.Nodes[i] = n
			}
		}
		return s
	})
}

// diagnostics is what the lab writes per policy run to
// <dir>/diag-<slug>-run<N>.json: failed requests by client and by the
// second they were sent in, slow ones (over a second) likewise, each
// backend's utilization by second, and (with Envoys) every Envoy's hosts,
// weights and request counters every second.
type diagnostics struct {
	Policy   string                 `json:"policy"`
	Run      int                    `json:"run"` // 1-based
	Errors   map[int]map[int]int64  `json:"errors_by_client_second"`
	Slow     map[int]map[int]int64  `json:"slow_by_client_second"`
	Util     [][]float64            `json:"util_by_backend_second"`
	Subsets  map[int][]int          `json:"subsets"` // by client
	Envoys   []envoySample          `json:"envoys,omitempty"`
	Server   []serverSample         `json:"server,omitempty"`
	Codes    map[int]map[string]int `json:"codes_by_client,omitempty"`
	Requests map[int]int64          `json:"requests_by_client"`
}

// writeDiagnostics writes d into dir and logs where, with the seconds and
// clients the errors fell in.
func (e *env) writeDiagnostics(d diagnostics, slug string) {
	path := filepath.Join(e.dir, fmt.Sprintf("diag-%s-run%d.json", slug, d.Run))
	b, err := json.Marshal(d)
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		e.log.Warn("diagnostics not written", "error", err)
		return
	}
	bySec := map[int]int64{}
	byClient := map[int]int64{}
	for c, m := range d.Errors {
		for s, n := range m {
			bySec[s] += n
			byClient[c] += n
		}
	}
	secs := slices.Sorted(maps.Keys(bySec))
	first, last := -1, -1
	if len(secs) > 0 {
		first, last = secs[0], secs[len(secs)-1]
	}
	e.log.Info("diagnostics", "path", path, "clients_with_errors", len(byClient), "first_error_s", first, "last_error_s", last)
}
