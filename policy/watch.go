package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/consulstate"
)

// WatcherConfig configures a Watcher.
type WatcherConfig struct {
	Client      *api.Client   // required (consulstate.NewClient)
	Datacenter  string        // "": the agent's
	Wait        time.Duration // blocking wait; 0: consulstate.DefaultWait
	MinInterval time.Duration // least time between two queries of one kind; 0: consulstate's default
	BackoffBase time.Duration // first retry delay; 0: consulstate's default
	BackoffMax  time.Duration // longest retry delay; 0: consulstate's default
	Metrics     *Metrics      // nil: none
	Logger      *slog.Logger  // nil: slog.Default()
	// OnChange, if set, is called after each applied list that changed a
	// service's policy or rejected an entry, from the watching goroutine
	// of that kind. Calls never overlap, and each comes after its list is
	// applied: a callback that reads All and hands the result on leaves
	// the newest policies with the last call.
	OnChange func(kind string, up Update)
}

// Watcher reads the four kinds of config entries from Consul with
// blocking queries (GET /v1/config/<kind>, one loop per kind) into a Set.
// While Consul cannot be read it keeps the last entries it read.
type Watcher struct {
	cfg WatcherConfig

	notify sync.Mutex // serializes OnChange
	mu     sync.Mutex
	set    *Set
	read   map[string]bool // kinds read at least once
	synced chan struct{}   // closed once every kind is read
}

// NewWatcher checks cfg and returns a Watcher; Run starts it.
func NewWatcher(cfg WatcherConfig) (*Watcher, error) {
	if cfg.Client == nil {
		return nil, errors.New("policy: watcher: no Consul client")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Watcher{cfg: cfg, set: NewSet(), read: map[string]bool{}, synced: make(chan struct{})}, nil
}

// Run watches every kind until ctx is done; it returns nil then.
func (w *Watcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, kind := range Kinds {
		wg.Go(func() { w.watch(ctx, kind) })
	}
	wg.Wait()
	return nil
}

// watch runs the blocking loop of one kind.
func (w *Watcher) watch(ctx context.Context, kind string) {
	wc := consulstate.WatchConfig{Op: "policy " + kind, Wait: w.cfg.Wait, MinInterval: w.cfg.MinInterval,
		BackoffBase: w.cfg.BackoffBase, BackoffMax: w.cfg.BackoffMax, Logger: w.cfg.Logger,
		Failed: func() { w.cfg.Metrics.failed(kind) }}
	fetch := func(q *api.QueryOptions) ([]api.ConfigEntry, *api.QueryMeta, error) {
		q.Datacenter = w.cfg.Datacenter
		entries, meta, err := w.cfg.Client.ConfigEntries().List(kind, q)
		if err != nil {
			return nil, nil, fmt.Errorf("policy: consul: list %s: %w", kind, err)
		}
		return entries, meta, nil
	}
	consulstate.Watch(ctx, wc, fetch, func(entries []api.ConfigEntry, _ uint64) { w.apply(kind, entries) })
}

// apply applies one list of kind, logs and counts its rejections, and
// calls OnChange.
func (w *Watcher) apply(kind string, entries []api.ConfigEntry) {
	w.mu.Lock()
	up := w.set.Apply(kind, entries)
	if !w.read[kind] {
		if w.read[kind] = true; len(w.read) == len(Kinds) {
			close(w.synced)
		}
	}
	w.cfg.Metrics.applied(kind, w.set, up)
	w.mu.Unlock()
	for _, r := range up.Rejected {
		w.cfg.Logger.Warn("consul config entry rejected; keeping its last good version", "kind", r.Kind, "name", r.Name,
			"field", r.Field, "reason", r.Reason, "detail", r.Detail, "modify_index", r.ModifyIndex)
	}
	if len(up.Changed) > 0 {
		w.cfg.Logger.Info("consul config entries applied", "kind", kind, "services", up.Changed)
	}
	if w.cfg.OnChange != nil && (len(up.Changed) > 0 || len(up.Rejected) > 0) {
		// Unserialized, a callback that read All before another kind's
		// list landed could hand its older view on after that kind's
		// callback handed on the newer one.
		w.notify.Lock()
		defer w.notify.Unlock()
		w.cfg.OnChange(kind, up)
	}
}

// Policy returns service's effective policy now.
func (w *Watcher) Policy(service string) Policy {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.set.Policy(service)
}

// Policies returns the effective policies of services (those in view),
// by name.
func (w *Watcher) Policies(services []string) map[string]Policy {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]Policy, len(services))
	for _, s := range services {
		out[s] = w.set.Policy(s)
	}
	return out
}

// All returns the effective policy of every service with an entry in
// use, by name.
func (w *Watcher) All() map[string]Policy {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := w.set.Services()
	out := make(map[string]Policy, len(names))
	for _, s := range names {
		out[s] = w.set.Policy(s)
	}
	return out
}

// Rejections lists the entries whose current version is rejected.
func (w *Watcher) Rejections() []Rejection {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.set.Rejections()
}

// Synced is closed once every kind has been read at least once.
func (w *Watcher) Synced() <-chan struct{} { return w.synced }

// ReadOnce reads the four kinds once (no blocking) into a new Set: for a
// validate-like caller that lists what a live Consul holds and what of it
// would be rejected (Set.Rejections).
func ReadOnce(ctx context.Context, client *api.Client, datacenter string) (*Set, error) {
	s := NewSet()
	for _, kind := range Kinds {
		q := (&api.QueryOptions{Datacenter: datacenter}).WithContext(ctx)
		entries, _, err := client.ConfigEntries().List(kind, q)
		if err != nil {
			return nil, fmt.Errorf("policy: consul: list %s: %w", kind, err)
		}
		s.Apply(kind, entries)
	}
	return s, nil
}
