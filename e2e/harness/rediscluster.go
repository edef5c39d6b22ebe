package harness

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// redisClusterReadyTimeout bounds the wait for a Redis Cluster or a
// Sentinel set to be ready.
const redisClusterReadyTimeout = 60 * time.Second

// RedisClusterServers is a Redis Cluster on loopback: Masters masters
// with Replicas replicas each, stopped when the test ends.
type RedisClusterServers struct {
	// Nodes are the servers in the order given to redis-cli --cluster
	// create: the masters first, then the replicas.
	Nodes []*RedisServer

	cli      string // redis-cli
	password string // every node's ("": none)
}

// Addrs are the host:port of every node (seed nodes for a client).
func (c *RedisClusterServers) Addrs() []string {
	a := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		a[i] = n.Addr()
	}
	return a
}

// RedisClusterOptions configures RedisCluster.
type RedisClusterOptions struct {
	// Masters and Replicas (of each master): 3 and 1 when zero (Replicas
	// negative: none).
	Masters, Replicas int
	// Password is every node's (--requirepass, and --masterauth for the
	// replicas); "" means no authentication.
	Password string
	// NodeTimeout is --cluster-node-timeout: how long a master may not
	// answer before its replica is promoted; 5s when zero.
	NodeTimeout time.Duration
	// Args are more command-line arguments of every node (like
	// "--cluster-require-full-coverage", "no").
	Args []string
}

// RedisCluster starts Masters x (1 + Replicas) redis-servers with
// --cluster-enabled, joins them with redis-cli --cluster create
// (--cluster-replicas) and waits until every node reports
// cluster_state:ok, knows every node and sees all 16384 slots assigned.
// A node is failed over after NodeTimeout (5s) without answering
// (--cluster-node-timeout). Skipped like Redis without redis-server (or
// redis-cli).
func RedisCluster(t testing.TB, opts RedisClusterOptions) *RedisClusterServers {
	t.Helper()
	cli := redisCLI(t)
	masters, replicas := cmp.Or(opts.Masters, 3), max(cmp.Or(opts.Replicas, 1), 0)
	c := &RedisClusterServers{cli: cli, password: opts.Password}
	n := masters * (1 + replicas)
	node := RedisOptions{Password: opts.Password, Cluster: true, Args: []string{"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(cmp.Or(opts.NodeTimeout, 5*time.Second).Milliseconds(), 10)}}
	if opts.Password != "" {
		node.Args = append(node.Args, "--masterauth", opts.Password)
	}
	node.Args = append(node.Args, opts.Args...)
	for range n {
		c.Nodes = append(c.Nodes, Redis(t, node))
	}
	auth := cliAuth(opts.Password)
	args := append(cliAuth(opts.Password), "--cluster", "create")
	args = append(append(args, c.Addrs()...), "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("harness: redis-cli --cluster create: %v\n%s", err, out)
	}
	want := []string{"cluster_state:ok", "cluster_slots_assigned:16384", "cluster_known_nodes:" + strconv.Itoa(n)}
	for _, node := range c.Nodes {
		waitRedisCLI(t, cli, node.Port(), append(auth, "cluster", "info"), func(out string) bool {
			for _, w := range want {
				if !strings.Contains(out, w) {
					return false
				}
			}
			return true
		})
	}
	return c
}

// RedisSentinelServers is a master, its replicas and the sentinels that
// watch it, on loopback, stopped when the test ends.
type RedisSentinelServers struct {
	Master    *RedisServer
	Replicas  []*RedisServer
	Sentinels []*RedisServer
	// MasterName is the name the sentinels know the master by.
	MasterName string
}

// SentinelAddrs are the sentinels' host:port.
func (s *RedisSentinelServers) SentinelAddrs() []string {
	a := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		a[i] = n.Addr()
	}
	return a
}

// RedisSentinelOptions configures RedisSentinel.
type RedisSentinelOptions struct {
	// MasterName is the name the sentinels know the master by; "mymaster"
	// when empty.
	MasterName string
	// Replicas of the master and Sentinels: 1 and 3 when zero (Replicas
	// negative: none). The quorum is Sentinels/2+1.
	Replicas, Sentinels int
	// Password is the master's and the replicas' (--requirepass,
	// --masterauth, and the sentinels' auth-pass); "" means none.
	Password string
	// SentinelPassword is the sentinels' own (requirepass and
	// sentinel-pass in their config); "" means none.
	SentinelPassword string
	// DownAfter (sentinel down-after-milliseconds: a master that does not
	// answer for that long is down) and FailoverTimeout (sentinel
	// failover-timeout): 1s and 5s when zero.
	DownAfter, FailoverTimeout time.Duration
}

// RedisSentinel starts a master, its replicas and the sentinels
// (redis-server --sentinel) monitoring it (down after DownAfter, 1s;
// failover timeout FailoverTimeout, 5s), and waits until every sentinel names the master and
// SENTINEL CKQUORUM passes (the sentinels found each other), and every
// replica is in sync. Skipped like Redis without redis-server (or
// redis-cli).
func RedisSentinel(t testing.TB, opts RedisSentinelOptions) *RedisSentinelServers {
	t.Helper()
	cli := redisCLI(t)
	name := cmp.Or(opts.MasterName, "mymaster")
	replicas, sentinels := max(cmp.Or(opts.Replicas, 1), 0), cmp.Or(opts.Sentinels, 3)
	s := &RedisSentinelServers{MasterName: name, Master: Redis(t, RedisOptions{Password: opts.Password})}
	port := strconv.Itoa(s.Master.Port())
	replica := RedisOptions{Password: opts.Password, Args: []string{"--replicaof", "127.0.0.1", port}}
	if opts.Password != "" {
		replica.Args = append(replica.Args, "--masterauth", opts.Password)
	}
	for range replicas {
		s.Replicas = append(s.Replicas, Redis(t, replica))
	}
	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]s %[3]d\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\nsentinel failover-timeout %[1]s %[5]d\n",
		name, port, sentinels/2+1, cmp.Or(opts.DownAfter, time.Second).Milliseconds(),
		cmp.Or(opts.FailoverTimeout, 5*time.Second).Milliseconds())
	if opts.Password != "" {
		conf += fmt.Sprintf("sentinel auth-pass %s %s\n", name, opts.Password)
	}
	if opts.SentinelPassword != "" {
		conf += fmt.Sprintf("requirepass %[1]s\nsentinel sentinel-pass %[1]s\n", opts.SentinelPassword)
	}
	for range sentinels {
		s.Sentinels = append(s.Sentinels, Redis(t, RedisOptions{Config: conf, Args: []string{"--sentinel"}}))
	}
	sauth := cliAuth(opts.SentinelPassword)
	for _, sn := range s.Sentinels {
		waitRedisCLI(t, cli, sn.Port(), append(sauth, "sentinel", "get-master-addr-by-name", name),
			func(out string) bool { return strings.Contains(out, port) })
		waitRedisCLI(t, cli, sn.Port(), append(sauth, "sentinel", "ckquorum", name),
			func(out string) bool {
				return strings.HasPrefix(out, "OK "+strconv.Itoa(sentinels)+" usable")
			})
	}
	for _, r := range s.Replicas {
		waitRedisCLI(t, cli, r.Port(), append(cliAuth(opts.Password), "info", "replication"),
			func(out string) bool { return strings.Contains(out, "master_link_status:up") })
	}
	return s
}

// cliAuth are redis-cli's arguments that authenticate with password (none
// for "").
func cliAuth(password string) []string {
	if password == "" {
		return nil
	}
	return []string{"-a", password, "--no-auth-warning"}
}

// redisCLI finds redis-cli next to redis-server or on PATH; skipped (or
// failed, as Redis) without it.
func redisCLI(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("redis-cli")
	if err != nil {
		err = errors.New("harness: no redis-cli on PATH (apt-get install redis-server)")
		if os.Getenv(RequireIntegrationEnv) == "1" {
			t.Fatalf("%v; required because %s=1", err, RequireIntegrationEnv)
		}
		t.Skipf("%v; skipping (set %s=1 to fail instead)", err, RequireIntegrationEnv)
	}
	return p
}

// waitRedisCLI runs redis-cli -p port args until ok accepts its output,
// polling every 50ms, for at most redisClusterReadyTimeout.
func waitRedisCLI(t testing.TB, cli string, port int, args []string, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(redisClusterReadyTimeout)
	a := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(port)}, args...)
	for {
		out, err := exec.Command(cli, a...).CombinedOutput()
		if err == nil && ok(string(out)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("harness: redis-cli %s: not ready within %v: %v\n%s", strings.Join(a, " "), redisClusterReadyTimeout, err, out)
		}
		time.Sleep(50 * time.Millisecond) // polling a state redis-cli reports: no event to await
	}
}

// ReshardOptions configures RedisClusterServers.Reshard.
type ReshardOptions struct {
	// From and To are the host:port of the source and destination masters.
	From, To string
	// Slots is how many slots move: the lowest-numbered Slots slots that
	// From serves (redis-cli takes a source's slots in ascending order).
	Slots int
	// Pipeline is how many keys each MIGRATE moves (--cluster-pipeline);
	// redis-cli's 10 when zero. A slot with more keys than that is, for
	// a while, split between both masters (clients get TRYAGAIN for
	// commands over keys on both sides).
	Pipeline int
}

// Reshard moves slots with their keys from one master to another as an
// operator does, with redis-cli --cluster reshard --cluster-yes: for each
// slot, CLUSTER SETSLOT IMPORTING on the destination and MIGRATING on
// the source, MIGRATE of its keys in batches, then CLUSTER SETSLOT NODE.
// It waits (up to a minute) for every node to agree on the slots before
// (redis-cli refuses to reshard otherwise) and after, so that when it
// returns every node names the destination. It reports an error rather
// than failing the test: it may run beside the test's own goroutines.
func (c *RedisClusterServers) Reshard(opts ReshardOptions) error {
	from, err := c.nodeID(opts.From)
	if err != nil {
		return err
	}
	to, err := c.nodeID(opts.To)
	if err != nil {
		return err
	}
	if err := c.waitAgreed(); err != nil {
		return err
	}
	args := append(cliAuth(c.password), "--cluster", "reshard", opts.From, "--cluster-from", from,
		"--cluster-to", to, "--cluster-slots", strconv.Itoa(opts.Slots), "--cluster-yes")
	if opts.Pipeline > 0 {
		args = append(args, "--cluster-pipeline", strconv.Itoa(opts.Pipeline))
	}
	if out, err := exec.Command(c.cli, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("harness: redis-cli --cluster reshard: %w\n%s", err, out)
	}
	return c.waitAgreed()
}

// nodeID is the cluster node id of the node at addr (CLUSTER MYID).
func (c *RedisClusterServers) nodeID(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("harness: node %q: %w", addr, err)
	}
	args := append(cliAuth(c.password), "-h", host, "-p", port, "cluster", "myid")
	out, err := exec.Command(c.cli, args...).CombinedOutput()
	id := strings.TrimSpace(string(out))
	if err != nil || len(id) != 40 {
		return "", fmt.Errorf("harness: cluster myid of %s: %v: %q", addr, err, out)
	}
	return id, nil
}

// waitAgreed polls redis-cli --cluster check until every node agrees on
// the slots, all are covered and none is open (importing or migrating),
// for at most redisClusterReadyTimeout.
func (c *RedisClusterServers) waitAgreed() error {
	deadline := time.Now().Add(redisClusterReadyTimeout)
	args := append(cliAuth(c.password), "--cluster", "check", c.Nodes[0].Addr())
	for {
		out, err := exec.Command(c.cli, args...).CombinedOutput()
		s := string(out)
		if err == nil && strings.Contains(s, "[OK] All nodes agree about slots configuration.") &&
			strings.Contains(s, "[OK] All 16384 slots covered.") && !strings.Contains(s, "[WARNING]") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("harness: redis-cli --cluster check: the nodes did not agree within %v: %v\n%s", redisClusterReadyTimeout, err, out)
		}
		time.Sleep(50 * time.Millisecond) // polling a state redis-cli reports: no event to await
	}
}
