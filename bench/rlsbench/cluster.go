package main

// The Redis topologies: one node, or a 3-master 3-replica Redis Cluster.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Redis topologies (-redis).
const (
	topoSingle  = "single"
	topoCluster = "cluster"
)

// The Redis Cluster compare mode starts: clusterMasters masters with one
// replica each; a master that does not answer for clusterNodeTimeout is
// failed over (--cluster-node-timeout).
const (
	clusterMasters     = 3
	clusterReplicas    = 1
	clusterNodes       = clusterMasters * (1 + clusterReplicas)
	clusterNodeTimeout = 5 * time.Second
)

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr string   // addr: host:port (without the cluster bus port)
	master   bool     // flags hold "master" and not "fail"
	slots    []string // the slot ranges it serves, as listed ("0-5460")
}

// parseClusterNodes reads the reply of CLUSTER NODES: per line
// "<id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent> <pong-recv>
// <config-epoch> <link-state> <slot> ...".
func parseClusterNodes(reply string) ([]clusterNode, error) {
	var nodes []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(reply), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("rlsbench: CLUSTER NODES line %q: fewer than 8 fields", line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		flags := strings.Split(f[2], ",")
		n := clusterNode{id: f[0], addr: addr,
			master: slices.Contains(flags, "master") && !slices.Contains(flags, "fail")}
		for _, s := range f[8:] {
			if !strings.HasPrefix(s, "[") { // "[slot->-id]": a slot migrating or importing
				n.slots = append(n.slots, s)
			}
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// mastersOf returns the addresses of the masters that serve slots.
func mastersOf(nodes []clusterNode) []string {
	var out []string
	for _, n := range nodes {
		if n.master && len(n.slots) > 0 {
			out = append(out, n.addr)
		}
	}
	return out
}

// slotMap is the view of the slots that a CLUSTER NODES reply gives:
// "addr:ranges" per master serving slots, sorted; equal on every node once
// they agree.
func slotMap(nodes []clusterNode) string {
	var out []string
	for _, n := range nodes {
		if n.master && len(n.slots) > 0 {
			out = append(out, n.addr+":"+strings.Join(n.slots, ","))
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// clusterReady reports nil once the node at addr says cluster_state:ok,
// sees all 16384 slots assigned and every node known, and its slot map
// is want ("" : any; the map is returned for the next nodes to match).
func clusterReady(ctx context.Context, addr, want string) (string, error) {
	info, err := redisDo(ctx, addr, "CLUSTER", "INFO")
	if err != nil {
		return "", err
	}
	for _, w := range []string{"cluster_state:ok", "cluster_slots_assigned:16384", "cluster_known_nodes:" + strconv.Itoa(clusterNodes)} {
		if !strings.Contains(info, w) {
			return "", fmt.Errorf("rlsbench: %s: CLUSTER INFO lacks %s", addr, w)
		}
	}
	reply, err := redisDo(ctx, addr, "CLUSTER", "NODES")
	if err != nil {
		return "", err
	}
	nodes, err := parseClusterNodes(reply)
	if err != nil {
		return "", err
	}
	if n := len(mastersOf(nodes)); n != clusterMasters {
		return "", fmt.Errorf("rlsbench: %s sees %d masters with slots, want %d", addr, n, clusterMasters)
	}
	got := slotMap(nodes)
	if want != "" && got != want {
		return "", fmt.Errorf("rlsbench: %s sees slots %q, another node %q", addr, got, want)
	}
	return got, nil
}

// startRedisCluster starts clusterNodes redis-servers with
// --cluster-enabled, joins them with redis-cli --cluster create
// --cluster-replicas 1 and waits until every node reports cluster_state:ok
// and all agree on which master serves which slots.
func (c *compareRun) startRedisCluster(ctx context.Context) error {
	dir := filepath.Join(c.dir, "redis-cluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("rlsbench: %w", err)
	}
	c.redisAddrs, c.redis = nil, nil
	for i := range clusterNodes {
		port, err := freePort()
		if err != nil {
			return err
		}
		bus, err := freePort() // the cluster bus: Redis's default, port+10000, may be taken or past 65535
		if err != nil {
			return err
		}
		p := strconv.Itoa(port)
		node, err := c.ps.start("redis-cluster-"+p, c.dir, c.o.redisBin, []string{"--bind", "127.0.0.1", "--port", p,
			"--dir", dir, "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus), "--cluster-config-file", filepath.Join(dir, "nodes-"+p+".conf"),
			"--cluster-node-timeout", strconv.FormatInt(clusterNodeTimeout.Milliseconds(), 10),
			"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--loglevel", "warning"}, nil)
		if err != nil {
			return err
		}
		addr := "127.0.0.1:" + p
		c.redisAddrs, c.redis = append(c.redisAddrs, addr), append(c.redis, node)
		if err := waitFor(ctx, node, 15*time.Second, func(ctx context.Context) error {
			_, err := redisDo(ctx, addr, "PING")
			return err
		}); err != nil {
			return fmt.Errorf("rlsbench: cluster node %d: %w", i, err)
		}
	}
	args := append(append([]string{"--cluster", "create"}, c.redisAddrs...),
		"--cluster-replicas", strconv.Itoa(clusterReplicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, c.o.redisCLI, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("rlsbench: %s %s: %w\n%s", c.o.redisCLI, strings.Join(args, " "), err, out)
	}
	want := ""
	for i, addr := range c.redisAddrs {
		if err := waitFor(ctx, c.redis[i], 60*time.Second, func(ctx context.Context) error {
			got, err := clusterReady(ctx, addr, want)
			if err == nil {
				want = got // the map every later node must see
			}
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// flushRedis empties the Redis of the topology: FLUSHALL on the node, or
// on every master of the cluster (found with CLUSTER NODES; the replicas
// follow their masters).
func (c *compareRun) flushRedis(ctx context.Context) error {
	if c.o.topology != topoCluster {
		_, err := redisDo(ctx, c.redisAddrs[0], "FLUSHALL")
		return err
	}
	var errs []error
	for _, addr := range c.redisAddrs {
		reply, err := redisDo(ctx, addr, "CLUSTER", "NODES")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		nodes, err := parseClusterNodes(reply)
		if err != nil {
			return err
		}
		masters := mastersOf(nodes)
		if len(masters) == 0 {
			return fmt.Errorf("rlsbench: %s knows no master serving slots", addr)
		}
		for _, m := range masters {
			if _, err := redisDo(ctx, m, "FLUSHALL"); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("rlsbench: no cluster node answers CLUSTER NODES: %w", errors.Join(errs...))
}

// redisCLIFor returns the redis-cli next to redisBin (found on PATH when
// it is a bare name), else "redis-cli".
func redisCLIFor(redisBin string) string {
	if p, err := exec.LookPath(redisBin); err == nil {
		cli := filepath.Join(filepath.Dir(p), "redis-cli")
		if _, err := os.Stat(cli); err == nil {
			return cli
		}
	}
	return "redis-cli"
}

// logSpread logs how many keys each master holds after a run of leg (the
// counters spread over every master, or a hot slot).
func (c *compareRun) logSpread(ctx context.Context, leg string) {
	reply, err := redisDo(ctx, c.redisAddrs[0], "CLUSTER", "NODES")
	if err != nil {
		c.log.Warn("keys per master unknown", "leg", leg, "error", err)
		return
	}
	nodes, err := parseClusterNodes(reply)
	if err != nil {
		c.log.Warn("keys per master unknown", "leg", leg, "error", err)
		return
	}
	var counts []string
	for _, m := range mastersOf(nodes) {
		n, err := redisDo(ctx, m, "DBSIZE")
		if err != nil {
			n = "?"
		}
		counts = append(counts, m+"="+strings.TrimPrefix(n, ":"))
	}
	c.log.Info("keys per master", "leg", leg, "keys", strings.Join(counts, " "))
}
