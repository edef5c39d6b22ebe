package nodeindex

// Consul keeps the client index tables in Consul KV, so that every
// xds-server replica gives a node the same dense, sticky index and therefore
// the same subsets.
//
// KV layout: one key per group, <prefix>/index/group=<url.PathEscape(group)>
// (the empty group is ".../group="), whose value is the whole table,
// {"version": 2, "gzip": "<base64>"}, gzip holding the table's JSON:
//
//	{"holders": [{"session": "<session id>", "replica": "xds-1"}, ...],
//	 "slots": [{"node": "a", "held_by": [0, 1]},
//	           {"node": "b", "released_at": "2025-01-02T03:04:05.5Z"}]}
//
// (version 1, written before, is that JSON with "version": 1 and no gzip:
// still read, written back as version 2).
//
// Slot i is client index i. A slot is held while held_by (positions in
// holders) is not empty: the replicas the node is connected through, each
// named by its Consul session. Otherwise the slot is reserved for its node
// until released_at (RFC 3339, UTC) + TTL, then free; expired slots are
// cleared lazily, with exactly Local's rules (see indexTable).
//
// Updates are read-modify-write with check-and-set on the key's ModifyIndex,
// retried on conflicts (at most casAttempts times, jittered backoff). Within
// a replica, calls for one group are batched: one round (a read, at most one
// session list, one CAS write) applies every pending Acquire and Release in
// call order, so a reconnect storm costs a few round trips, not one per node.
//
// Sessions: each replica creates one Consul session (TTL SessionTTL, renewed
// every SessionTTL/3; it also dies with its agent's serfHealth check). No key
// is locked with it: Consul invalidating it changes nothing in KV. Instead,
// before a replica gives a new node a slot, it lists the live sessions
// (a consistent read, after reading the table, so a holder missing from the
// list is truly gone) and drops dead holders; a slot left without holders is
// reserved from that moment, for the TTL, then free. So a crashed replica's
// holds become released when found gone (Consul invalidates a session about
// 2 x SessionTTL after its last renewal) and no index is lost.
//
// If this replica's own session is lost while it runs (a partition longer
// than the session TTL), the renewal loop creates a new session and moves
// this replica's holds to it; a node whose index was given away meanwhile
// gets a new one, which is logged.
//
// Every write also sets <prefix>/index-backup/group=<group> to the same
// value, in the same transaction. A stored value that does not decode
// (anyone who can write the KV can write one) is replaced by the next round
// that reads it, written back with check-and-set on the corrupt value's
// ModifyIndex (so under the table's lock): restored from the backup when
// that decodes; else repaired (a slot whose node repeats an earlier one or
// is too long is freed, bad holders dropped) or, when it does not parse at
// all, rebuilt from the last good table this replica read; the release
// times of a repaired or rebuilt table are untrusted and start afresh.
// Every round, and a check of the groups this replica holds nodes in
// after each session renewal (every SessionTTL/3; at most 16 groups each
// time, taking turns), also puts back this
// replica's own holds that a repair by another replica lost, at their
// index when it is free (counted in xds_subset_index_holds_lost_total
// when it is not). A table of a newer version is never overwritten.
//
// Size: Consul limits a value (kv_max_value_size) and a transaction
// (txn_max_req_len) to 512 KiB by default, and a write's transaction
// carries the value twice (table and backup), base64-encoded, and the
// gzip in it base64-encoded too: about 3.6 times the gzip. A slot's gzip
// is about 3 bytes for node ids of one form with a counter, about 9 for
// ids with 13 random characters (Kubernetes pods'), so one group holds
// about 15,000 such nodes (the tests place 12,000), or some 50,000 of the
// first kind, unless those limits are raised. Past them a write fails:
// the node gets this replica's local index (xds logs it).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/consulstate"
)

const (
	defaultIndexPrefix     = "xds-server/subsetting"
	defaultSessionTTL      = 15 * time.Second // Consul accepts 10s to 24h
	minSessionTTL          = 10 * time.Second
	maxSessionTTL          = 24 * time.Hour
	indexRoundTimeout      = 10 * time.Second // bounds one batch round against Consul
	indexCloseTimeout      = 10 * time.Second // bounds Close's releases and session destroy
	indexRenewRetry        = time.Second      // wait after a failed session renewal
	indexSessionNamePrefix = "xds-server subsetting index: "
)

// ConsulConfig configures Consul.
type ConsulConfig struct {
	Client  *api.Client   // required
	Prefix  string        // KV prefix, without leading or trailing "/"; "" means "xds-server/subsetting"
	TTL     time.Duration // how long a released index stays reserved for its node (subsetting.index_ttl); >= 0
	Replica string        // this replica's name, for session naming and debugging; "" means the hostname
	Logger  *slog.Logger  // nil discards
	Now     func() time.Time
	// Registerer takes the repair metrics; nil: not registered.
	Registerer prometheus.Registerer
	// SessionTTL is the TTL of this replica's Consul session, in [10s, 24h];
	// 0 means 15s. A crashed replica's holds lapse about 2 x SessionTTL after
	// its last renewal.
	SessionTTL time.Duration
}

// Validate reports every configuration error.
func (c ConsulConfig) Validate() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("nodeindex: consul: client is required"))
	}
	if c.TTL < 0 {
		errs = append(errs, fmt.Errorf("nodeindex: consul: ttl %v is negative", c.TTL))
	}
	if strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/") {
		errs = append(errs, fmt.Errorf("nodeindex: consul: prefix %q must not begin or end with /", c.Prefix))
	}
	if c.SessionTTL != 0 && (c.SessionTTL < minSessionTTL || c.SessionTTL > maxSessionTTL) {
		errs = append(errs, fmt.Errorf("nodeindex: consul: session ttl %v is not in [%v, %v]", c.SessionTTL, minSessionTTL, maxSessionTTL))
	}
	return errors.Join(errs...)
}

// Consul is the Table shared by xds-server replicas through Consul
// KV (subsetting.index_source: consul). It is safe for concurrent use.
type Consul struct {
	client     *api.Client
	prefix     string
	ttl        time.Duration
	replica    string
	sessionTTL time.Duration
	log        *slog.Logger
	now        func() time.Time
	metrics    consulMetrics

	ctx       context.Context // canceled by Close, after its own releases
	cancel    context.CancelFunc
	rounds    sync.WaitGroup     // running group drains
	stopRenew context.CancelFunc // called by Close to stop the renewal loop
	renew     sync.WaitGroup     // the renewal loop

	mu      sync.Mutex
	session string          // current session id
	own     map[string]bool // every session this replica has had, current included
	groups  map[string]*groupQueue
	closed  bool
	// checkNext is where checkHolds starts in the sorted groups next time.
	checkNext int
}

// NewConsul creates this replica's Consul session (ctx bounds that
// call) and starts renewing it in the background until Close.
func NewConsul(ctx context.Context, cfg ConsulConfig) (*Consul, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &Consul{
		client:     cfg.Client,
		prefix:     cmp.Or(cfg.Prefix, defaultIndexPrefix),
		ttl:        cfg.TTL,
		replica:    cfg.Replica,
		sessionTTL: cmp.Or(cfg.SessionTTL, defaultSessionTTL),
		log:        cfg.Logger,
		now:        cfg.Now,
		own:        map[string]bool{},
		groups:     map[string]*groupQueue{},
	}
	if t.replica == "" {
		t.replica, _ = os.Hostname()
	}
	m, err := newConsulMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	t.metrics = m
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if t.now == nil {
		t.now = time.Now
	}
	id, err := t.createSession(ctx)
	if err != nil {
		return nil, err
	}
	t.session, t.own[id] = id, true
	t.ctx, t.cancel = context.WithCancel(context.Background())
	kctx, stop := context.WithCancel(context.Background())
	t.stopRenew = stop
	t.renew.Add(1)
	go func() { defer t.renew.Done(); _ = consulstate.KeepAlive(kctx, t.keepAlive()) }()
	t.log.Info("consul index session created", "session", id, "replica", t.replica, "prefix", t.prefix)
	return t, nil
}

// Acquire implements Table. If it fails (including when ctx ends
// first), whatever it may have taken is released again in the background.
func (t *Consul) Acquire(ctx context.Context, group, node string) (int, error) {
	if node == "" {
		return 0, errors.New("nodeindex: consul: empty node id")
	}
	op := newIndexOp(opAcquire, node)
	if err := t.submit(group, op); err != nil {
		return 0, err
	}
	return t.wait(ctx, group, op)
}

// Release implements Table: it lets go of this replica's hold on node;
// the index stays held while another replica holds it. A Release whose ctx
// ends first still completes in the background.
func (t *Consul) Release(ctx context.Context, group, node string) error {
	op := newIndexOp(opRelease, node)
	if err := t.submit(group, op); err != nil {
		return err
	}
	_, err := t.wait(ctx, group, op)
	return err
}

// Close releases everything this replica holds (reserved for the TTL from
// now), destroys its session and stops its goroutines. Later calls fail;
// closing twice does nothing.
func (t *Consul) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	queues := make([]*groupQueue, 0, len(t.groups))
	for _, q := range t.groups {
		queues = append(queues, q)
	}
	session := t.session
	t.mu.Unlock()

	t.stopRenew()
	t.renew.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), indexCloseTimeout)
	defer cancel()
	var errs []error
	ops := make([]*indexOp, len(queues))
	for i, q := range queues {
		ops[i] = newIndexOp(opDropOwn, "")
		t.enqueue(q, ops[i])
	}
	for i, op := range ops {
		if _, err := t.wait(ctx, queues[i].group, op); err != nil {
			errs = append(errs, err)
		}
	}
	if err := consulstate.DestroySession(ctx, t.client, session); err != nil {
		errs = append(errs, fmt.Errorf("nodeindex: consul: %w", err))
	}
	t.cancel()
	t.rounds.Wait()
	return errors.Join(errs...)
}

// key is the KV key of group's table.
func (t *Consul) key(group string) string {
	return t.prefix + "/index/group=" + url.PathEscape(group)
}

// backupKey is the key of the copy of group's table, written in the same
// transaction as the table: what a corrupt table is restored from.
func (t *Consul) backupKey(group string) string {
	return t.prefix + "/index-backup/group=" + url.PathEscape(group)
}

// sessionState returns the current session and a predicate for every
// session this replica has had.
func (t *Consul) sessionState() (current string, own func(string) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	owned := make(map[string]bool, len(t.own))
	for s := range t.own {
		owned[s] = true
	}
	return t.session, func(s string) bool { return owned[s] }
}

func (t *Consul) createSession(ctx context.Context) (string, error) {
	id, err := consulstate.CreateSession(ctx, t.client, consulstate.SessionConfig{Name: indexSessionNamePrefix + t.replica, TTL: t.sessionTTL})
	if err != nil {
		return "", fmt.Errorf("nodeindex: consul: %w", err)
	}
	return id, nil
}

// keepAlive renews the session every sessionTTL/3 until Close (each
// renewal bounded by sessionTTL/3, a failed one retried after
// indexRenewRetry), moves this replica's holds to a new session when
// Consul lost it (sessionLost), and after each renewal checks the tables
// where this replica holds nodes (checkHolds).
func (t *Consul) keepAlive() consulstate.KeepAliveConfig {
	return consulstate.KeepAliveConfig{
		Client: t.client, Every: t.sessionTTL / 3, Timeout: t.sessionTTL / 3, Retry: indexRenewRetry,
		Session: func() string { t.mu.Lock(); defer t.mu.Unlock(); return t.session },
		Lost:    t.sessionLost, Renewed: t.checkHolds,
		Failed: func(err error) {
			t.log.Warn("consul index session renewal failed; retrying", "error", err, "retry_in", indexRenewRetry)
		},
	}
}

// sessionLost creates a new session, when Consul no longer knows the
// current one, and moves every hold of this replica to it before
// returning.
func (t *Consul) sessionLost(ctx context.Context) error {
	t.mu.Lock()
	old := t.session
	t.mu.Unlock()
	id, err := t.createSession(ctx)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.session, t.own[id] = id, true
	queues := make([]*groupQueue, 0, len(t.groups))
	for _, q := range t.groups {
		queues = append(queues, q)
	}
	t.mu.Unlock()
	t.log.Warn("consul index session was lost; moving this replica's holds to a new session",
		"old_session", old, "session", id, "groups", len(queues))
	ops := make([]*indexOp, len(queues))
	for i, q := range queues {
		ops[i] = newIndexOp(opRehold, "")
		t.enqueue(q, ops[i])
	}
	var errs []error
	for i, op := range ops {
		if _, err := t.wait(ctx, queues[i].group, op); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
