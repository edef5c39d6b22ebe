package main

// The servers under test: Redis, envoyproxy/ratelimit and xds-server.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func (c *compareRun) startRedis(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	dir := filepath.Join(c.dir, "redis")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("rlsbench: %w", err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	node, err := c.ps.start("redis-server", c.dir, c.o.redisBin, []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--dir", dir, "--save", "", "--appendonly", "no", "--protected-mode", "yes", "--loglevel", "warning"}, nil)
	if err != nil {
		return err
	}
	c.redisAddrs, c.redis = []string{addr}, []*proc{node}
	return waitFor(ctx, node, 15*time.Second, func(ctx context.Context) error {
		_, err := redisDo(ctx, addr, "PING")
		return err
	})
}

// xdsServer returns the xds-server binary: xdsBin, or built into dir
// when xdsBin is empty and a leg needs it.
func xdsServer(ctx context.Context, xdsBin, dir string, legNames []string, log *slog.Logger) (string, error) {
	if xdsBin != "" || !slices.ContainsFunc(legNames, func(n string) bool { return strings.HasPrefix(n, "xds-") }) {
		return xdsBin, nil
	}
	bin := filepath.Join(dir, "xds-server")
	log.Info("building xds-server", "output", bin)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/xds-server")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("rlsbench: go build ./cmd/xds-server (run from the repository root): %w", err)
	}
	return bin, nil
}

// envoyRedisType is envoyproxy/ratelimit's REDIS_TYPE per topology (its
// settings.go: SINGLE, the default, cluster or sentinel, case-insensitive;
// REDIS_URL is then the comma-separated nodes).
var envoyRedisType = map[string]string{topoSingle: "SINGLE", topoCluster: "cluster"}

// startEnvoy starts envoyproxy/ratelimit, configured by env as its
// settings.go reads it, on 127.0.0.1 only.
func (c *compareRun) startEnvoy(ctx context.Context, l *leg) error {
	if c.o.envoyBin == "" {
		l.unavailable = "no -envoy-bin given"
		return nil
	}
	ports := make([]int, 3)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	l.addr = "127.0.0.1:" + strconv.Itoa(ports[0])
	env := []string{
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(ports[1]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(ports[2]),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(ports[0]),
		"REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=" + envoyRedisType[c.o.topology], "REDIS_URL=" + strings.Join(c.redisAddrs, ","),
		"USE_STATSD=false", "USE_PROMETHEUS=false", "LOG_LEVEL=warn", "LOG_FORMAT=text",
		"RUNTIME_ROOT=" + filepath.Join(c.dir, "runtime"), "RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_APPDIRECTORY=config", "RUNTIME_WATCH_ROOT=false", "RUNTIME_IGNOREDOTFILES=true",
		"LOCAL_CACHE_SIZE_IN_BYTES=" + strconv.Itoa(c.o.envoyLocalCache),
		"TRACING_ENABLED=false",
	}
	if c.o.envoyPipelineWindow > 0 {
		env = append(env, "REDIS_PIPELINE_WINDOW="+c.o.envoyPipelineWindow.String())
	}
	// Run it through a link in the work dir so that its command line
	// names the work dir (scripts/rlsbench.sh's cleanup finds it there).
	bin := filepath.Join(c.dir, "envoyproxy-ratelimit")
	_ = os.Remove(bin)
	abs, err := filepath.Abs(c.o.envoyBin)
	if err != nil {
		return fmt.Errorf("rlsbench: %w", err)
	}
	if err := os.Symlink(abs, bin); err != nil {
		return fmt.Errorf("rlsbench: %w", err)
	}
	l.redis = c.redis
	if l.server, err = c.ps.start(legEnvoy, c.dir, bin, nil, env); err != nil {
		return err
	}
	return c.waitServing(ctx, l)
}

// startXDS starts xds-server with the given store; a store the binary
// rejects (validate fails) leaves the leg unavailable, with the reason.
func (c *compareRun) startXDS(ctx context.Context, l *leg, bin, store string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	l.addr = "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"--ratelimit.address", l.addr, "--ratelimit.config", c.cfgPath, "--ratelimit.store", store,
		"--admin.address", "127.0.0.1:0", "--xds.address", "127.0.0.1:0", "--log.level", "warn"}
	if store == "redis" {
		if c.o.topology == topoCluster {
			args = append(args, "--ratelimit.redis.mode", "cluster", "--ratelimit.redis.addresses", strings.Join(c.redisAddrs, ","))
		} else {
			args = append(args, "--ratelimit.redis.address", c.redisAddrs[0])
		}
		l.redis = c.redis
	}
	out, err := exec.CommandContext(ctx, bin, append([]string{"validate"}, args...)...).CombinedOutput()
	if err != nil {
		msg := strings.Join(strings.Fields(string(out)), " ")
		if msg == "" {
			msg = err.Error()
		}
		l.unavailable = fmt.Sprintf("`xds-server validate --ratelimit.store %s ...` refuses it: %s", store, msg)
		c.log.Warn("leg unavailable", "leg", l.name, "reason", l.unavailable)
		return nil
	}
	if l.server, err = c.ps.start(l.name, c.dir, bin, append([]string{"serve"}, args...), nil); err != nil {
		return err
	}
	return c.waitServing(ctx, l)
}

// waitServing waits until l answers a probe with a limit (its config is
// loaded).
func (c *compareRun) waitServing(ctx context.Context, l *leg) error {
	w := c.o.load.Workload
	w.Key = "user"
	return waitFor(ctx, l.server, 60*time.Second, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		d, err := Probe(ctx, l.addr, w, "probe")
		if err != nil {
			return err
		}
		if d.ok+d.over == 0 {
			return fmt.Errorf("rlsbench: %s answers without a limit (config not loaded yet)", l.name)
		}
		return nil
	})
}
