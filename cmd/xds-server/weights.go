package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/config"
	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/weights"
	"github.com/xds-server/xds-server/xds"
)

// weightShell wires EDS weights from utilization reports: the tracker and
// its runner (which hands tables to the xDS server), the ORCA client
// (streams to the backends of services with the orca source), the LRS
// server (on the xDS listener) and the HTTP push API (on the admin
// listener). Discovery snapshots tell it which endpoints exist.
type weightShell struct {
	cfg     config.Config
	log     *slog.Logger
	tracker *weights.Tracker
	runner  *weights.Runner
	orca    *weights.ORCA
	lrs     *weights.LRS
	push    http.Handler
	perNode *weights.PerNode
	srv     *xds.Server
	onORCA  func(weights.Report) // sees every ORCA report (the lame-duck drain source); nil = none

	mu      sync.Mutex
	perSvc  map[string]bool              // services in per_node mode
	hadNode bool                         // per-node weights were handed to the server
	known   map[string]bool              // services the tracker holds
	addrs   map[string]map[string]string // service -> host:port -> endpoint id (for LRS)
	sources map[string]map[string]bool   // service -> enabled sources
}

func newWeightShell(cfg config.Config, log *slog.Logger, reg prometheus.Registerer, srv *xds.Server) (*weightShell, error) {
	log = log.With("component", "weights")
	tr, err := weights.NewTracker(cfg.Weights.Tracker())
	if err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	w := &weightShell{cfg: cfg, log: log, tracker: tr, srv: srv, known: map[string]bool{},
		addrs: map[string]map[string]string{}, sources: map[string]map[string]bool{}, perSvc: map[string]bool{}}
	if w.perNode, err = weights.NewPerNode(cfg.Weights.Solver(), cfg.Weights.MinChange); err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	if w.runner, err = weights.NewRunner(weights.RunnerConfig{Tracker: tr, Registerer: reg,
		Publish:      func(t weights.Table) { srv.SetWeights(t.Map()) },
		PublishNodes: w.publishNodes,
		Adjust:       w.balance,
		NodeDebug: func(service, node string) (any, bool) {
			return w.perNode.Debug(service, node)
		},
		UpdatePeriod: cfg.Weights.UpdatePeriod, MinChange: cfg.Weights.MinChange, MinPushInterval: cfg.Weights.MinPushInterval,
	}); err != nil {
		return nil, err
	}
	if w.orca, err = weights.NewORCA(weights.ORCAConfig{Sink: w.sink("orca"), Interval: cfg.Weights.ORCAInterval,
		Logger: log, Registerer: reg}); err != nil {
		return nil, err
	}
	if w.lrs, err = weights.NewLRS(weights.LRSConfig{Sink: w.sink("lrs"), Resolve: w.resolve,
		Interval: cfg.Weights.LRSInterval, Logger: log, Registerer: reg}); err != nil {
		return nil, err
	}
	if w.push, err = weights.NewHTTPHandler(weights.HTTPConfig{Sink: w.sink("http"), Logger: log, Registerer: reg}); err != nil {
		return nil, err
	}
	w.lrs.Register(srv.GRPC())
	return w, nil
}

// run recomputes weights until ctx is done, then stops the ORCA streams.
func (w *weightShell) run(ctx context.Context) {
	w.runner.Run(ctx)
	w.orca.Close()
}

// observe takes a discovery snapshot: the tracker learns each weighted
// service's endpoints (with their discovery weights as the fallback), the
// ORCA client its targets, the LRS server its address map.
func (w *weightShell) observe(s discovery.Snapshot) {
	var targets []weights.ORCATarget
	seen := map[string]bool{}
	addrs := map[string]map[string]string{}
	sources := map[string]map[string]bool{}
	perSvc := map[string]bool{}
	for _, svc := range s.Services {
		set, on := w.cfg.WeightsOf(svc.Name)
		if !on {
			continue
		}
		seen[svc.Name] = true
		perSvc[svc.Name] = set.Mode == "per_node"
		eps := make([]weights.Endpoint, 0, len(svc.Endpoints))
		addrs[svc.Name] = map[string]string{}
		sources[svc.Name] = map[string]bool{}
		for _, src := range set.Sources {
			sources[svc.Name][src] = true
		}
		for _, ep := range svc.Endpoints {
			eps = append(eps, weights.Endpoint{ID: ep.ID, Static: ep.Weight})
			addrs[svc.Name][net.JoinHostPort(ep.Address, strconv.Itoa(ep.Port))] = ep.ID
			if sources[svc.Name]["orca"] {
				targets = append(targets, weights.ORCATarget{Service: svc.Name, Endpoint: ep.ID,
					Address: net.JoinHostPort(ep.Address, orcaPort(ep, set.ORCAPortMeta))})
			}
		}
		if err := w.tracker.SetEndpoints(svc.Name, eps); err != nil {
			w.log.Error("weights: endpoints rejected", "service", svc.Name, "error", err)
		}
	}
	w.mu.Lock()
	for name := range w.known {
		if !seen[name] {
			_ = w.tracker.SetEndpoints(name, nil) // the service left, or its weights were turned off
		}
	}
	w.known, w.addrs, w.sources, w.perSvc = seen, addrs, sources, perSvc
	w.mu.Unlock()
	w.orca.SetTargets(targets)
}

// publishNodes plans the per-node weights of the services in per_node
// mode from table t (the runner calls it at most once per
// min_push_interval) and hands them to the xDS server when some node's
// changed; it reports whether it did.
func (w *weightShell) publishNodes(t weights.Table) bool {
	w.mu.Lock()
	var names []string
	for name, on := range w.perSvc {
		if on {
			names = append(names, name)
		}
	}
	had := w.hadNode
	w.mu.Unlock()
	all, changed := xds.NodeWeights{}, false
	keep := map[string]bool{}
	for _, name := range names {
		st, ok := t.Service(name)
		if !ok {
			continue
		}
		keep[name] = true
		m, ch, err := w.perNode.Plan(st, w.srv.NodeSubsets(name), w.tracker.NodeRates(name, t.At))
		if err != nil {
			w.log.Error("per-node weights failed; nodes keep their last weights", "service", name, "error", err)
			continue
		}
		changed = changed || ch
		if len(m) > 0 {
			all[name] = m
		}
	}
	w.perNode.Forget(keep)
	if !changed && (len(all) > 0 || !had) {
		return false
	}
	w.mu.Lock()
	w.hadNode = len(all) > 0
	w.mu.Unlock()
	w.srv.SetNodeWeights(all)
	return true
}

// balance rewrites, with weights.balance on, the table of every weighted
// service in global mode by weights.BalanceService over its nodes'
// subsets and LRS rates (services no node reports on keep the formula's
// weights).
func (w *weightShell) balance(t weights.Table) weights.Table {
	if !w.cfg.Weights.Balance {
		return t
	}
	w.mu.Lock()
	global := map[string]bool{}
	for name, perNode := range w.perSvc {
		global[name] = !perNode
	}
	w.mu.Unlock()
	out := t
	out.Services = slices.Clone(t.Services)
	for k, st := range out.Services {
		if !global[st.Name] {
			continue
		}
		b, ok, err := weights.BalanceService(st, w.srv.NodeSubsets(st.Name), w.tracker.NodeRates(st.Name, t.At), w.cfg.Weights.Balancer())
		if err != nil {
			w.log.Error("weights: balancing failed; the formula's weights stay", "service", st.Name, "error", err)
			continue
		}
		if ok {
			out.Services[k] = b
		}
	}
	return out
}

// orcaPort is the endpoint's ORCA port: its meta value at key, else the
// service port.
func orcaPort(ep discovery.Endpoint, key string) string {
	if p, err := strconv.Atoi(ep.Meta[key]); err == nil && p > 0 && p < 65536 {
		return strconv.Itoa(p)
	}
	return strconv.Itoa(ep.Port)
}

// resolve maps an LRS upstream address in a cluster to an endpoint id.
func (w *weightShell) resolve(cluster, address string, port uint32) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id, ok := w.addrs[cluster][net.JoinHostPort(address, strconv.FormatUint(uint64(port), 10))]
	return id, ok
}

// handlers adds POST /v1/load and GET /debug/weights to the admin mux.
func (w *weightShell) handlers(mux *http.ServeMux) {
	mux.Handle("/v1/load", w.push) // the handler answers other methods with a JSON 405
	mux.Handle("GET /debug/weights", w.runner.DebugHandler())
}

// sink passes reports of one source to the tracker, for the services that
// take that source (services.<name>.weights.sources).
func (w *weightShell) sink(source string) weights.ReportSink { return sourceFilter{w, source} }

type sourceFilter struct {
	w      *weightShell
	source string
}

func (f sourceFilter) Observe(r weights.Report, now time.Time) error {
	if f.source == "orca" && f.w.onORCA != nil {
		f.w.onORCA(r)
	}
	if !f.takes(r.Service) {
		return fmt.Errorf("%w: service %s does not take %s reports (services.%s.weights.sources)",
			weights.ErrUnknownEndpoint, r.Service, f.source, r.Service)
	}
	return f.w.tracker.Observe(r, now)
}

// Known lets the HTTP push API check a whole batch before observing any of
// it: the endpoint is tracked and its service takes this source.
func (f sourceFilter) Known(service, endpoint string) bool {
	return f.takes(service) && f.w.tracker.Known(service, endpoint)
}

// takes reports whether a weighted service takes this source; services the
// shell does not know are left to the tracker (which rejects them).
func (f sourceFilter) takes(service string) bool {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	return !f.w.known[service] || f.w.sources[service][f.source]
}
