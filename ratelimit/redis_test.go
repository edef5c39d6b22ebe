package ratelimit

import (
	"context"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/xds-server/xds-server/e2e/harness"
)

var redisPrefixes atomic.Int64

// newRedisStore returns a store on srv (nil: cfg's addresses), under a key prefix of its own
// unless cfg names one, closed when the test ends.
func newRedisStore(t testing.TB, srv *harness.RedisServer, cfg RedisConfig) *Redis {
	t.Helper()
	if cfg.Address == "" && srv != nil {
		cfg.Address = srv.Addr()
	}
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = "test" + strconv.FormatInt(redisPrefixes.Add(1), 10) + ":"
	}
	st, err := NewRedis(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// redisClient is a plain client of srv, for looking at the keys.
func redisClient(t testing.TB, srv *harness.RedisServer) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestRedisStore(t *testing.T) {
	srv := harness.Redis(t, harness.RedisOptions{})
	runStoreSuite(t, func(t *testing.T) Store { return newRedisStore(t, srv, RedisConfig{}) })
}

// Every key written has a TTL within its algorithm's span (plus the
// grace), and is gone once that has passed.
func TestRedisKeysExpire(t *testing.T) {
	srv := harness.Redis(t, harness.RedisOptions{})
	st := newRedisStore(t, srv, RedisConfig{KeyPrefix: "ttl:"})
	ctx := context.Background()
	now := time.Now()
	var checks []Check
	for _, a := range []Algorithm{FixedWindow, SlidingWindow, SlidingLog, TokenBucket, LeakyBucket} {
		l := Limit{Algorithm: a, Requests: 4, Unit: Second, Burst: 4}
		checks = append(checks, Check{Key: "e_" + a.String() + "_", Limit: l, Cap: 4, Hits: 2})
	}
	if _, err := st.Decide(ctx, now, checks); err != nil {
		t.Fatal(err)
	}
	c := redisClient(t, srv)
	keys, err := c.Keys(ctx, "ttl:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(checks) {
		t.Fatalf("keys %v, want one per algorithm", keys)
	}
	// The longest span: a sliding window's two units.
	longest := 2*time.Second + redisTTLGrace
	for _, k := range keys {
		if ttl := c.PTTL(ctx, k).Val(); ttl <= 0 || ttl > longest {
			t.Errorf("key %s: TTL %v, want in (0, %v]", k, ttl, longest)
		}
	}
	deadline := time.Now().Add(longest + 5*time.Second)
	for {
		n := len(c.Keys(ctx, "ttl:*").Val())
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keys left after their TTLs", n)
		}
		time.Sleep(50 * time.Millisecond) // polling Redis's expiry: no event to await
	}
}

// After SCRIPT FLUSH (or a restart), the script is sent again.
func TestRedisScriptReloaded(t *testing.T) {
	srv := harness.Redis(t, harness.RedisOptions{})
	st := newRedisStore(t, srv, RedisConfig{})
	c := Check{Key: "s_", Limit: Limit{FixedWindow, 2, Minute, 0}, Cap: 2, Hits: 1}
	for i := range 2 {
		if err := redisClient(t, srv).ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		res, err := st.Decide(context.Background(), t0, []Check{c})
		if err != nil || !res[0].Allowed || res[0].Remaining != uint32(1-i) {
			t.Fatalf("decision %d after a flush: %+v, %v", i, res, err)
		}
	}
}

func TestRedisConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  RedisConfig
		want string
	}{
		"minimal":          {RedisConfig{Address: "127.0.0.1:6379"}, ""},
		"full":             {RedisConfig{Address: "redis:6380", Username: "u", Password: "p", DB: 3, TLS: true, TLSInsecureSkipVerify: true, PoolSize: 20, Timeout: time.Second}, ""},
		"no address":       {RedisConfig{}, "address is required"},
		"no port":          {RedisConfig{Address: "redis"}, `address "redis" is not host:port`},
		"negative db":      {RedisConfig{Address: "r:1", DB: -1}, "db -1 is negative"},
		"negative pool":    {RedisConfig{Address: "r:1", PoolSize: -2}, "pool size -2 is negative"},
		"negative timeout": {RedisConfig{Address: "r:1", Timeout: -time.Second}, "timeout -1s is negative"},
		"ca without tls":   {RedisConfig{Address: "r:1", TLSCAFile: "ca.pem"}, "need tls"},
		"skip without tls": {RedisConfig{Address: "r:1", TLSInsecureSkipVerify: true}, "need tls"},

		// Modes.
		"cluster":                 {RedisConfig{Mode: RedisCluster, Addresses: []string{"n1:7000", "n2:7000"}}, ""},
		"sentinel":                {RedisConfig{Mode: RedisSentinel, Addresses: []string{"s:26379"}, MasterName: "rl", SentinelPassword: "x", DB: 2}, ""},
		"single by name":          {RedisConfig{Mode: RedisSingle, Address: "r:1"}, ""},
		"unknown mode":            {RedisConfig{Mode: "ring", Address: "r:1"}, `mode "ring" is not one of single, cluster, sentinel`},
		"cluster without nodes":   {RedisConfig{Mode: RedisCluster}, "cluster mode needs addresses"},
		"sentinel without nodes":  {RedisConfig{Mode: RedisSentinel, MasterName: "rl"}, "sentinel mode needs addresses"},
		"sentinel without master": {RedisConfig{Mode: RedisSentinel, Addresses: []string{"s:26379"}}, "needs a master name"},
		"cluster with db":         {RedisConfig{Mode: RedisCluster, Addresses: []string{"n:7000"}, DB: 1}, "only db 0"},
		"cluster with address":    {RedisConfig{Mode: RedisCluster, Address: "r:1", Addresses: []string{"n:7000"}}, "address is for single mode"},
		"bad node":                {RedisConfig{Mode: RedisCluster, Addresses: []string{"n"}}, `address "n" is not host:port`},
		"single with addresses":   {RedisConfig{Address: "r:1", Addresses: []string{"n:7000"}}, "addresses are for cluster and sentinel modes"},
		"master name, cluster":    {RedisConfig{Mode: RedisCluster, Addresses: []string{"n:7000"}, MasterName: "rl"}, "need sentinel mode"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Errorf("Validate() = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
			if _, err := NewRedis(tc.cfg); err == nil {
				t.Error("NewRedis accepted the config")
			}
		})
	}
	if _, err := NewRedis(RedisConfig{Address: "r:1", TLS: true, TLSCAFile: "/nonexistent/ca.pem"}); err == nil {
		t.Error("NewRedis accepted a missing CA file")
	}
}

// silentListener accepts connections and answers nothing, until the
// test ends.
func silentListener(t *testing.T) net.Listener {
	t.Helper()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			defer conn.Close() // hold it open without answering
		}
	}()
	return silent
}

// A Redis that does not answer, or is not there, fails Decide within
// about the timeout.
func TestRedisTimeout(t *testing.T) {
	silent := silentListener(t)
	closed := harness.FreePort(t)
	c := Check{Key: "t_", Limit: Limit{FixedWindow, 2, Minute, 0}, Cap: 2, Hits: 1}
	for name, addr := range map[string]string{"silent": silent.Addr().String(), "closed": "127.0.0.1:" + strconv.Itoa(closed)} {
		t.Run(name, func(t *testing.T) {
			st, err := NewRedis(RedisConfig{Address: addr, Timeout: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			start := time.Now()
			if _, err := st.Decide(context.Background(), t0, []Check{c}); err == nil {
				t.Fatal("Decide succeeded")
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Decide failed after %v, want about the 100ms timeout", d)
			}
		})
	}
}

// TLS, the default user's password and an ACL user; wrong credentials
// or an unverified server are errors.
func TestRedisTLSAuth(t *testing.T) {
	srv := harness.Redis(t, harness.RedisOptions{TLS: true, Password: "pw", User: "rl", UserPassword: "secret"})
	c := Check{Key: "a_", Limit: Limit{TokenBucket, 10, Second, 10}, Cap: 10, Hits: 1}
	for name, tc := range map[string]struct {
		cfg RedisConfig
		ok  bool
	}{
		"acl user":       {RedisConfig{TLS: true, TLSCAFile: srv.CAFile(), Username: "rl", Password: "secret"}, true},
		"default user":   {RedisConfig{TLS: true, TLSCAFile: srv.CAFile(), Password: "pw"}, true},
		"skip verify":    {RedisConfig{TLS: true, TLSInsecureSkipVerify: true, Password: "pw"}, true},
		"by name":        {RedisConfig{TLS: true, TLSCAFile: srv.CAFile(), TLSServerName: "localhost", Password: "pw"}, true},
		"wrong password": {RedisConfig{TLS: true, TLSCAFile: srv.CAFile(), Username: "rl", Password: "nope"}, false},
		"no password":    {RedisConfig{TLS: true, TLSCAFile: srv.CAFile()}, false},
		"unknown CA":     {RedisConfig{TLS: true, Password: "pw"}, false},
		"wrong name":     {RedisConfig{TLS: true, TLSCAFile: srv.CAFile(), TLSServerName: "redis.example", Password: "pw"}, false},
		"plaintext":      {RedisConfig{Password: "pw"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			st := newRedisStore(t, srv, tc.cfg)
			res, err := st.Decide(context.Background(), t0, []Check{c})
			if tc.ok && (err != nil || !res[0].Allowed) {
				t.Errorf("Decide = %+v, %v; want admitted", res, err)
			}
			if !tc.ok && err == nil {
				t.Error("Decide succeeded")
			}
			if perr := st.Ping(context.Background()); (perr == nil) != tc.ok {
				t.Errorf("Ping = %v", perr)
			}
		})
	}
}

// Random calls of random checks give the memory store's answers exactly:
// every algorithm, every unit, nanosecond times, class caps and looks.
func TestRedisMatchesMemory(t *testing.T) {
	srv := harness.Redis(t, harness.RedisOptions{})
	st := newRedisStore(t, srv, RedisConfig{})
	mem, err := NewMemory(MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	limits := make([]Limit, 12)
	for i := range limits {
		limits[i] = Limit{Algorithm: Algorithm(i % 5), Requests: uint32(rng.IntN(12)), Unit: Second + Unit(rng.IntN(7)),
			Burst: uint32(rng.IntN(12))}
		if i < 5 {
			limits[i].Unit = Second // busy keys
		}
	}
	now := t0.Add(time.Duration(rng.Int64N(int64(time.Second))))
	var admitted, refused, exhausted int
	for call := range 3000 {
		checks := make([]Check, 1+rng.IntN(3))
		for j := range checks {
			k := rng.IntN(len(limits))
			l := limits[k]
			checks[j] = Check{Key: "m_" + strconv.Itoa(k) + "_", Limit: l, Hits: uint32(rng.IntN(4)),
				Cap: uint32(rng.IntN(int(l.Capacity()) + 2))}
		}
		want, _ := mem.Decide(context.Background(), now, checks)
		got, err := st.Decide(context.Background(), now, checks)
		if err != nil {
			t.Fatal(err)
		}
		for j := range checks {
			if got[j] != want[j] {
				t.Fatalf("call %d at %v, check %+v:\nredis  %+v\nmemory %+v", call, now.Sub(t0), checks[j], got[j], want[j])
			}
			switch {
			case got[j].Allowed:
				admitted++
			case got[j].Exhausted > 0:
				exhausted++
			default:
				refused++
			}
		}
		switch rng.IntN(20) {
		case 0:
			now = now.Add(time.Duration(rng.Int64N(int64(48 * time.Hour))))
		default:
			now = now.Add(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
		}
	}
	if min(admitted, refused, exhausted) < 300 {
		t.Errorf("too few cases of a kind: %d admitted, %d refused by a cap, %d exhausted", admitted, refused, exhausted)
	}
	t.Logf("%d admitted, %d refused by a cap, %d exhausted", admitted, refused, exhausted)
}

// A sliding log takes thousands of hits in one check (pushed in batches).
func TestRedisLargeLog(t *testing.T) {
	srv := harness.Redis(t, harness.RedisOptions{})
	st := newRedisStore(t, srv, RedisConfig{})
	mem, _ := NewMemory(MemoryConfig{})
	l := Limit{Algorithm: SlidingLog, Requests: 5000, Unit: Minute}
	for i, hits := range []uint32{2500, 2499, 2, 1, 0} {
		c := Check{Key: "big_", Limit: l, Cap: 5000, Hits: hits}
		now := t0.Add(time.Duration(i) * time.Second)
		want, _ := mem.Decide(context.Background(), now, []Check{c})
		got, err := st.Decide(context.Background(), now, []Check{c})
		if err != nil || got[0] != want[0] {
			t.Errorf("%d hits: redis %+v, %v; memory %+v", hits, got, err, want[0])
		}
	}
	if n := redisClient(t, srv).LLen(context.Background(), st.prefix+"big_:sl").Val(); n != 5000 {
		t.Errorf("log length %d, want 5000", n)
	}
}
