package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// xdsServer is one run's xds-server process.
type xdsServer struct {
	p     *proc
	xds   string // host:port of xDS (and LRS)
	admin string // host:port of the admin listener
}

// startServer writes the run's config and starts xds-server on free
// loopback ports; it returns once /readyz answers.
func startServer(ctx context.Context, bin, dir, consul string, p policy, o options) (*xdsServer, error) {
	return startServerWith(ctx, bin, dir, p.slug(), p.serverConfig(consul, o), o)
}

// startServerWith is startServer with the config yaml, written to
// <slug>.yaml in dir.
func startServerWith(ctx context.Context, bin, dir, slug, yaml string, o options) (*xdsServer, error) {
	cfg := filepath.Join(dir, slug+".yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	xdsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"--config", cfg, "--xds.address", xdsAddr, "--admin.address", admin,
		"--ratelimit.address", "127.0.0.1:0", "--xds.shutdown_grace", "0s"}
	args = append(args, o.serverArgs...)
	proc, err := startProc(dir, "xds-server-"+slug, bin, args, nil)
	if err != nil {
		return nil, err
	}
	s := &xdsServer{p: proc, xds: xdsAddr, admin: admin}
	if err := awaitHTTP(ctx, proc, "http://"+admin+"/readyz", 30*time.Second); err != nil {
		proc.stop(5 * time.Second)
		return nil, err
	}
	return s, nil
}

// ui is the URL of the web console of the server.
func (s *xdsServer) ui() string { return "http://" + s.admin + "/ui/" }

// stop ends the server (SIGTERM).
func (s *xdsServer) stop() { s.p.stop(10 * time.Second) }

// serverArgs parses --server-arg values: each is one extra flag of
// xds-server ("--weights.smoothing=0.7").
type serverArgs []string

func (a *serverArgs) String() string { return strings.Join(*a, " ") }
func (a *serverArgs) Set(s string) error {
	*a = append(*a, s)
	return nil
}
