package ratelimit

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of RedisConfig.
const (
	// DefaultRedisTimeout bounds one script run: connecting, waiting for
	// a pooled connection, writing and reading.
	DefaultRedisTimeout = 250 * time.Millisecond
)

// RedisMode is how the Redis store's servers are deployed.
type RedisMode string

// The modes of RedisConfig.Mode.
const (
	// RedisSingle is one Redis node at Address (the default: "" too).
	RedisSingle RedisMode = "single"
	// RedisCluster is a Redis Cluster found through its seed nodes,
	// Addresses, by go-redis's ClusterClient: each batch runs one script
	// per hash slot, one pipeline per node.
	RedisCluster RedisMode = "cluster"
	// RedisSentinel is the master that the sentinels at Addresses know as
	// MasterName, by go-redis's FailoverClient: otherwise as RedisSingle.
	RedisSentinel RedisMode = "sentinel"
)

// RedisConfig configures NewRedis.
type RedisConfig struct {
	// Mode is RedisSingle (or ""), RedisCluster or RedisSentinel.
	Mode RedisMode
	// Address is the host:port of a single Redis node; required in single
	// mode, empty in the others.
	Address string
	// Addresses are the host:port of a cluster's seed nodes or of the
	// sentinels; required in cluster and sentinel modes, empty in single.
	Addresses []string
	// MasterName is the name the sentinels know the master by; required
	// in sentinel mode, empty in the others.
	MasterName string
	// SentinelPassword authenticates with the sentinels (sentinel mode);
	// "" means no authentication. Username and Password are the nodes'.
	SentinelPassword string
	// Username and Password authenticate with every Redis node (AUTH,
	// or an ACL user when Username is set); empty means no authentication.
	Username, Password string
	// DB is the database number, >= 0; 0 in cluster mode.
	DB int
	// TLS connects with TLS (1.2 or later), verifying the server's
	// certificate against TLSCAFile (a PEM file; "" means the system
	// roots) for TLSServerName ("" means the host of the address dialled:
	// Address, each node's, each sentinel's), unless
	// TLSInsecureSkipVerify. The TLS fields need TLS; they apply to every
	// node and sentinel.
	TLS                   bool
	TLSCAFile             string
	TLSServerName         string
	TLSInsecureSkipVerify bool
	// PoolSize is the most connections kept open; 0 means go-redis's
	// default (10 per CPU).
	PoolSize int
	// Timeout bounds each Decide call, from its start: the wait for the
	// script run in flight, its own run and each connection attempt; 0
	// means DefaultRedisTimeout. A call that times out is an error: the
	// service answers per its failure mode.
	Timeout time.Duration
	// BreakerFailures is how many script runs in a row must fail (time
	// out, lose or not get a connection) for the circuit breaker to open:
	// then every call fails at once (ErrBreakerOpen, the failure mode
	// answers) until, after BreakerBackoff, one call probes Redis; its
	// success closes the breaker, its failure opens it for twice as long
	// (up to MaxRedisBreakerBackoff). 0 means
	// DefaultRedisBreakerFailures; negative turns the breaker off.
	BreakerFailures int
	// BreakerBackoff is the first wait of an open breaker before a probe;
	// 0 means DefaultRedisBreakerBackoff.
	BreakerBackoff time.Duration
	// KeyPrefix is put before every key; "" means none (the keys of
	// fixed windows are then envoyproxy/ratelimit's own).
	KeyPrefix string
	// Pipelines is how many script runs may be in flight at once (in
	// cluster mode, per master); calls that arrive meanwhile are decided
	// together in the next run (one round trip for all). 0 means
	// DefaultRedisPipelines.
	Pipelines int
}

// Validate reports every invalid field (zero fields are defaults).
func (c RedisConfig) Validate() error {
	errs := c.validateMode()
	if c.DB < 0 {
		errs = append(errs, fmt.Errorf("db %d is negative", c.DB))
	}
	if c.PoolSize < 0 {
		errs = append(errs, fmt.Errorf("pool size %d is negative", c.PoolSize))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %v is negative", c.Timeout))
	}
	if c.BreakerBackoff < 0 {
		errs = append(errs, fmt.Errorf("breaker backoff %v is negative", c.BreakerBackoff))
	}
	if c.Pipelines < 0 {
		errs = append(errs, fmt.Errorf("pipelines %d is negative", c.Pipelines))
	}
	if !c.TLS && (c.TLSCAFile != "" || c.TLSServerName != "" || c.TLSInsecureSkipVerify) {
		errs = append(errs, errors.New("tls ca file, server name and skip verify need tls"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("ratelimit: invalid redis store config: %w", errors.Join(errs...))
	}
	return nil
}

// TLSConfig is the client's TLS configuration (with the CA file read);
// nil without TLS.
func (c RedisConfig) TLSConfig() (*tls.Config, error) {
	if !c.TLS {
		return nil, nil
	}
	host, _, _ := net.SplitHostPort(c.Address) // "" in cluster and sentinel modes: each dialled host
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cmp.Or(c.TLSServerName, host),
		InsecureSkipVerify: c.TLSInsecureSkipVerify} //nolint:gosec // only when configured so
	if c.TLSCAFile != "" {
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("ratelimit: redis tls ca file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ratelimit: redis tls ca file %s: no PEM certificate", c.TLSCAFile)
		}
	}
	return tc, nil
}

// Redis is the Store shared by replicas: usage lives in one Redis node
// (or a Redis Cluster, or the master behind Sentinel: see RedisMode),
// and each Decide call is decided by one atomic Lua script run (one round
// trip: EVALSHA, or EVAL once after a script flush or a restart) that
// decides every check of the call in order, with the caller's clock.
// Calls that arrive while Pipelines runs are in flight share the next
// run (see batcher). It gives the same
// answers as Memory; see redis.lua for the keys' layout. Every key has a
// TTL: it expires (plus a second of grace for clock skew) once it holds
// no usage. Connections are re-established on demand, so the store
// recovers by itself when Redis comes back.
//
// Keys, after KeyPrefix: fixed_window FixedWindowKey (an integer, as
// envoyproxy/ratelimit keeps it); sliding_window key+":sw"; sliding_log
// key+":sl" (a list of at most the limit ns timestamps); token_bucket
// key+":tb" and leaky_bucket key+":lb" (GCRA's theoretical arrival
// time). Each algorithm has its own keys, so changing a rule's algorithm
// starts it afresh.
type Redis struct {
	client  *redis.Client        // single and sentinel modes
	cluster *redis.ClusterClient // cluster mode (client is nil)
	batch   *batcher
	br      *breaker
	timeout time.Duration
	prefix  string
}

// NewRedis returns a store over the Redis node of cfg. It does not
// connect: see Ping.
func NewRedis(cfg RedisConfig) (*Redis, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tc, err := cfg.TLSConfig()
	if err != nil {
		return nil, err
	}
	timeout := cmp.Or(cfg.Timeout, DefaultRedisTimeout)
	client, cluster := newRedisClient(cfg, tc, timeout)
	failures := cmp.Or(cfg.BreakerFailures, DefaultRedisBreakerFailures)
	backoff := cmp.Or(cfg.BreakerBackoff, DefaultRedisBreakerBackoff)
	br := newBreaker(failures, backoff, timeout)
	if cluster != nil { // a breaker per master instead (nodeBreakers)
		br = newBreaker(-1, backoff, timeout)
	}
	b := newBatcher(client, br, timeout, cmp.Or(cfg.Pipelines, DefaultRedisPipelines), cluster)
	b.nodes.make = func() *breaker { return newBreaker(failures, backoff, timeout) }
	return &Redis{client: client, cluster: cluster, timeout: timeout, prefix: cfg.KeyPrefix, br: br, batch: b}, nil
}

// Ping checks that Redis answers (and accepts the credentials) within
// the timeout.
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if r.cluster != nil {
		return r.pingCluster(ctx)
	}
	if err := r.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ratelimit: redis: %w", err)
	}
	return nil
}

// Close stops the batching and closes the connections.
func (r *Redis) Close() error {
	r.batch.close()
	if r.cluster != nil {
		return r.cluster.Close()
	}
	return r.client.Close()
}

// Decide implements Store in one round trip (none when no check needs
// Redis: a bucket of zero requests or burst refuses without state). An
// error (unreachable, timeout, authentication) means no decision.
func (r *Redis) Decide(ctx context.Context, now time.Time, checks []Check) ([]Result, error) {
	call := &redisCall{}
	n := len(checks)
	res, keys, sent := room(call.res[:], n), room(call.keyBuf[:], n)[:0], room(call.sentBuf[:], n)[:0] // sent: indexes of the checks in keys
	args := room(call.argBuf[:], n*redisArgsPerCheck)[:0]
	replies := 0
	for i, c := range checks {
		c = normalize(c)
		var key string
		if key, args = r.encode(args, now, c); key == "" {
			var st State
			res[i] = Decide(&st, now, c)
			continue
		}
		keys, sent = append(keys, key), append(sent, i)
		replies += replyLen(c.Limit.Algorithm)
	}
	if len(keys) == 0 {
		return res, nil
	}
	// No timer per call: the run that takes the call ends by the call's
	// deadline (or fails it unrun if that has passed), and the run in
	// flight before it ends by the deadline of its own calls, earlier.
	start := monoNow()
	if !r.br.allow(start) {
		return nil, fmt.Errorf("ratelimit: redis: %w", ErrBreakerOpen)
	}
	call.keys, call.args, call.replies, call.deadline = keys, args, replies, start+int64(r.timeout)
	reply, err := r.batch.do(ctx, call)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: redis: %w", err)
	}
	off := 0
	for _, i := range sent {
		c := normalize(checks[i])
		v := reply[off : off+replyLen(c.Limit.Algorithm)]
		off += len(v)
		if res[i], err = decodeResult(now, c, v); err != nil {
			return nil, fmt.Errorf("ratelimit: redis: check %d: %w", i, err)
		}
	}
	return res, nil
}

// normalize applies Decide's defaults: an invalid unit is a second, and
// the cap is at most the capacity.
func normalize(c Check) Check {
	if !c.Limit.Unit.Valid() {
		c.Limit.Unit = Second
	}
	c.Cap = min(c.Cap, c.Limit.Capacity())
	return c
}
