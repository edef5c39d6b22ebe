package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/consulstate"
	"github.com/xds-server/xds-server/internal/pause"
)

// Blocking query kinds: the label of Metrics.BlockingReqs and of the logs.
const (
	consulKindCatalog = "catalog"
	consulKindHealth  = "health"
)

// consulLoop names one blocking loop: its kind, its service ("" for the
// catalog loop), its datacenter (index in the run's list, and name: ""
// is the agent's) and the logger of that datacenter.
type consulLoop struct {
	kind, service string
	dc            int
	datacenter    string
	log           *slog.Logger
}

// watchCatalog runs the blocking loop on the catalog's service list of
// l's datacenter and reports the (filtered, sorted) names to watch until
// ctx is done.
func (c *Consul) watchCatalog(ctx context.Context, l consulLoop, out chan<- consulEvent) {
	fetch := func(q *api.QueryOptions) (map[string][]string, *api.QueryMeta, error) {
		svcs, meta, err := c.client.Catalog().Services(q)
		if err != nil {
			return nil, nil, fmt.Errorf("discovery: consul: list services: %w", err)
		}
		return svcs, meta, nil
	}
	deliver := func(svcs map[string][]string, read Read, err error) bool {
		ev := consulEvent{dc: l.dc, err: err, read: read}
		if err == nil {
			ev.names = consulServiceNames(svcs, c.cfg.Services, c.cfg.Tags)
		}
		return consulSend(ctx, out, ev)
	}
	poll(ctx, c, l, fetch, deliver)
}

// watchService runs the blocking loop on the health of one service (all
// instances, whatever their checks) of l's datacenter and reports its
// endpoints until ctx is done. gen identifies this loop to the coordinator.
func (c *Consul) watchService(ctx context.Context, l consulLoop, gen uint64, out chan<- consulEvent) {
	name := l.service
	fetch := func(q *api.QueryOptions) ([]*api.ServiceEntry, *api.QueryMeta, error) {
		entries, meta, err := c.client.Health().ServiceMultipleTags(name, c.cfg.Tags, false, q)
		if err != nil {
			return nil, nil, fmt.Errorf("discovery: consul: health of service %q: %w", name, err)
		}
		return entries, meta, nil
	}
	deliver := func(entries []*api.ServiceEntry, read Read, err error) bool {
		ev := consulEvent{dc: l.dc, service: name, gen: gen, err: err, read: read}
		if err == nil {
			ev.endpoints = consulEndpoints(entries, c.cfg.Tags, c.warningAs, l.datacenter)
		}
		return consulSend(ctx, out, ev)
	}
	poll(ctx, c, l, fetch, deliver)
}

// poll runs one blocking query loop until ctx is done: it passes the last
// index back (see nextIndex), starts queries at most once per MinInterval,
// hands every changed result (with when its query returned and the index
// before and after) and every error to deliver, and backs off
// after errors (see backoff; reset on success). After an error the index
// is reset to 0, so the first answer after an outage (maybe from a
// restarted Consul whose indexes went backwards) arrives at once. deliver
// returns false when ctx is done. Errors are logged here: a warning on the
// first failure and then at most one per 30s of the loop's clock (see
// outage; the others at debug), info on recovery with the outage's length.
func poll[T any](ctx context.Context, c *Consul, l consulLoop,
	fetch func(*api.QueryOptions) (T, *api.QueryMeta, error), deliver func(T, Read, error) bool) {
	var (
		index     uint64
		lastStart time.Time
		down      outage
	)
	for {
		if !pause.For(ctx, c.cfg.MinInterval-time.Since(lastStart)) {
			return
		}
		lastStart = time.Now()
		if m := c.cfg.Metrics; m != nil {
			m.BlockingReqs.WithLabelValues(l.kind).Inc()
		}
		qctx, cancel := context.WithTimeout(ctx, c.queryTimeout())
		q := (&api.QueryOptions{Datacenter: l.datacenter, WaitIndex: index, WaitTime: c.cfg.Wait}).WithContext(qctx)
		res, meta, err := fetch(q)
		returned := time.Now()
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			index = 0
			delay := consulstate.Backoff(down.failures+1, c.cfg.BackoffBase, c.cfg.BackoffMax, c.rnd)
			c.logFailure(&down, l, delay, err)
			if !deliver(res, Read{}, err) || !pause.For(ctx, delay) {
				return
			}
			continue
		}
		if was, lasted, failures := down.recover(c.cfg.Now()); was {
			l.log.Info("consul query recovered", "kind", l.kind, "service", l.service, "failures", failures,
				"down_for", lasted.Round(time.Millisecond))
		}
		from, changed := index, false
		if index, changed = consulstate.NextIndex(index, meta.LastIndex); changed &&
			!deliver(res, Read{At: returned, IndexFrom: from, IndexTo: index}, nil) {
			return
		}
	}
}

// logFailure records a failed query of one loop and logs it: WARN for
// the first failure and then once per outageLogEvery (with the number of
// failures held back), DEBUG for the others.
func (c *Consul) logFailure(o *outage, l consulLoop, retryIn time.Duration, err error) {
	now := c.cfg.Now()
	ok, held := o.fail(now)
	level := l.log.Debug
	if ok {
		level = l.log.Warn
	}
	level("consul unreachable; retrying", "kind", l.kind, "service", l.service, "attempt", o.failures,
		"retry_in", retryIn.Round(time.Millisecond), "down_for", now.Sub(o.since).Round(time.Millisecond), "suppressed", held, "error", err)
}

// queryTimeout bounds one blocking query: Consul answers within Wait plus
// up to Wait/16 of jitter; the rest is slack for the network.
func (c *Consul) queryTimeout() time.Duration {
	return c.cfg.Wait + c.cfg.Wait/16 + 10*time.Second
}

// consulSend hands ev to the coordinator; false when ctx is done first.
func consulSend(ctx context.Context, out chan<- consulEvent, ev consulEvent) bool {
	select {
	case out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}
