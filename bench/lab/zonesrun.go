package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/xds-server/xds-server/bench"
)

// zoneRun is one zone policy's run: its figures and what explains them.
type zoneRun struct {
	fig  zoneFigures
	diag zoneDiag
}

// zoneDiag is the zone lab's diagnostics file of one run
// (zones-<policy>-run<N>.json in the lab's directory).
type zoneDiag struct {
	Policy   string               `json:"policy"`
	Run      int                  `json:"run"`
	Util     [][]float64          `json:"util"`         // by backend and second
	Zones    []string             `json:"zones"`        // by backend
	InZone   []float64            `json:"in_zone"`      // by second: share of the requests sent in it served in their client's zone
	ZoneUtil map[string][]float64 `json:"zone_util"`    // by zone and second: its backends' mean utilization
	Weights  json.RawMessage      `json:"weights"`      // xds-server's /debug/weights?service=lab at the end (spill: zones and keep)
	Unknown  int64                `json:"unknown_peer"` // successful requests whose peer is no lab backend
}

// runZones runs the zone lab (--zones): a Consul agent, backends in zones
// a and b, every zone policy o.runs times on a fresh xds-server with fresh
// clients; it writes the table and the lab-zones section of o.markdown.
func runZones(ctx context.Context, o options, args []string, stdout io.Writer, log *slog.Logger) error {
	start := time.Now()
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	e := &env{o: o, log: log}
	if e.dir, err = os.MkdirTemp("", "xds-lab-zones-"); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if e.bins, err = build(ctx, root, e.dir); err != nil {
		return err
	}
	f := newZoneFleet(o)
	consul, addr, err := startConsul(ctx, e.dir)
	if err != nil {
		return err
	}
	defer consul.stop(5 * time.Second)
	e.consul = addr
	stopFleet, err := e.startFleet(ctx, f.caps, f.backendZones)
	if err != nil {
		return err
	}
	defer stopFleet()
	log.Info("zone fleet up", "consul", addr, "backends", f.backendZones, "clients", f.clientZones,
		"zone_a_demand_over_capacity", round3(f.demandOverCapacity(zoneA)), "logs", e.dir)
	ps := selectedZones(o)
	runs := make([][]zoneFigures, len(ps))
	for run := range o.runs {
		for k, p := range ps {
			r, err := e.runZonePolicy(ctx, p, run, f)
			if err != nil {
				return err
			}
			runs[k] = append(runs[k], r.fig)
			log.Info("zone policy done", "run", run+1, "runs", o.runs, "policy", p.name, "in_zone", round3(r.fig.InZone),
				"max_mean", round3(r.fig.MaxMean), "zone_util", r.fig.ZoneUtil, "errors", r.fig.Errors)
			e.writeZoneDiag(r.diag, p.slug(), run)
		}
	}
	return e.writeZones(ps, runs, f, args, time.Since(start), stdout)
}

// selectedZones are the zone policies --only keeps (as selected).
func selectedZones(o options) []zonePolicy {
	var out []zonePolicy
	for _, p := range zonePolicies(o) {
		if o.only == "" || slices.ContainsFunc(strings.Split(o.only, "|"), func(part string) bool { return strings.Contains(p.name, part) }) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return zonePolicies(o)
	}
	return out
}

// runZonePolicy runs p once on a fresh xds-server with fresh clients for
// o.duration and measures it.
func (e *env) runZonePolicy(ctx context.Context, p zonePolicy, run int, f zoneFleet) (zoneRun, error) {
	o := e.o
	srv, err := startServerWith(ctx, e.bins["xds-server"], e.dir, p.slug(), p.serverConfig(e.consul, o), o)
	if err != nil {
		return zoneRun{}, err
	}
	defer srv.stop()
	e.log.Info("zone policy start", "run", run+1, "policy", p.name, "console", srv.ui())
	cs, err := dialClients(ctx, srv.xds, f.rates, f.clientZones)
	if err != nil {
		return zoneRun{}, err
	}
	defer closeClients(cs)
	t0 := time.Now()
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, c := range cs {
		c.t0 = t0
		wg.Go(func() { c.run(rctx, newArrivals(o.seed, run, c.index, c.rate), o.timeout) })
	}
	select {
	case <-ctx.Done():
	case <-time.After(o.duration):
	}
	weights := debugWeights(srv.admin)
	stop()
	wg.Wait()
	if ctx.Err() != nil {
		return zoneRun{}, ctx.Err()
	}
	r := e.measureZones(cs, f, t0)
	r.diag.Policy, r.diag.Run, r.diag.Weights = p.name, run+1, weights
	return r, nil
}

// measureZones computes a zone run's figures from the backends' ORCA
// reports and the clients' counts of requests by serving backend.
func (e *env) measureZones(cs []*client, f zoneFleet, t0 time.Time) zoneRun {
	o := e.o
	secs, fin := int(o.duration/time.Second), int(o.final/time.Second)
	util := grid(e.sampler.window(t0, t0.Add(o.duration)), secs)
	final := means(util, secs-fin, secs)
	var r zoneRun
	r.fig.MaxMean, _ = spread(final)
	r.fig.MeanUtil = mean(final)
	r.fig.ZoneUtil = zoneUtil(final, f.backendZones)
	zoneAt := map[string]string{}
	for j, b := range e.backends {
		zoneAt[b.grpc] = f.backendZones[j]
	}
	window := map[[2]string]int64{}
	bySec := make([]map[[2]string]int64, secs)
	var lat []float64
	for _, c := range cs {
		c.mu.Lock()
		for at, n := range c.served {
			z, ok := zoneAt[at.addr]
			if !ok {
				r.diag.Unknown += n
			}
			k := [2]string{f.clientZones[c.index], z}
			if at.sec >= secs-fin && at.sec < secs {
				window[k] += n
			}
			if at.sec >= 0 && at.sec < secs {
				if bySec[at.sec] == nil {
					bySec[at.sec] = map[[2]string]int64{}
				}
				bySec[at.sec][k] += n
			}
		}
		lat = append(lat, c.latencies...)
		c.mu.Unlock()
		r.fig.Requests += c.sent.Load()
		r.fig.Errors += c.errors.Load()
	}
	r.fig.InZone = inZoneShare(window)
	slices.Sort(lat)
	if len(lat) > 0 {
		r.fig.P99 = bench.Percentile(lat, 99)
	}
	r.diag.Util, r.diag.Zones, r.diag.ZoneUtil = util, f.backendZones, map[string][]float64{}
	for s := range secs {
		r.diag.InZone = append(r.diag.InZone, round3(inZoneShare(bySec[s])))
		for z, u := range zoneUtil(means(util, s, s+1), f.backendZones) {
			r.diag.ZoneUtil[z] = append(r.diag.ZoneUtil[z], round3(u))
		}
	}
	return r
}

// debugWeights is xds-server's /debug/weights?service=lab (JSON), null
// when it does not answer.
func debugWeights(admin string) json.RawMessage {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + admin + "/debug/weights?service=" + service)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !json.Valid(b) {
		return nil
	}
	return b
}

// writeZoneDiag writes d to zones-<slug>-run<N>.json in the lab's
// directory; a failure is logged only.
func (e *env) writeZoneDiag(d zoneDiag, slug string, run int) {
	b, err := json.Marshal(d)
	if err == nil {
		err = os.WriteFile(filepath.Join(e.dir, fmt.Sprintf("diag-%s-run%d.json", slug, run+1)), b, 0o644)
	}
	if err != nil {
		e.log.Warn("zone diagnostics not written", "error", err)
	}
}
