package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/internal/toolbin"
)

// Kinds of clients (--clients): grpc-go xDS clients in this process, or
// real Envoys (one per client node) that the load generators send through.
const (
	grpcClients  = "grpc"
	envoyClients = "envoy"
)

// envoyVersion is the Envoy release the lab runs (scripts/install-envoy.sh).
const envoyVersion = toolbin.EnvoyVersion

// envoyListener is the name of the listener every lab Envoy gets: gRPC
// (HTTP/2) in, routed to the lab service's cluster.
const envoyListener = "lab-ingress"

// envoyServiceConfig is the lab service's setting of the Envoy runs,
// under services.lab: Envoy speaks HTTP/2 (gRPC) to the backends' gRPC
// port.
const envoyServiceConfig = "    protocol: grpc\n"

// envoyListenerConfig is xds-server's listener of the Envoy runs: on a
// port each Envoy picks (127.0.0.1:0), gRPC in (HTTP/2, detected), every
// request routed to the lab service's cluster; only the lab's nodes get
// it.
const envoyListenerConfig = "listeners:\n" +
	"  - name: " + envoyListener + "\n" +
	"    address: 127.0.0.1:0\n" +
	"    nodes: [\"lab-client-*\"]\n" +
	"    routes: [ { prefix: /, service: " + service + " } ]\n"

// envoyBinary finds envoy as the e2e harness does (internal/toolbin).
func envoyBinary() (string, error) {
	p, err := toolbin.Envoy()
	if err != nil {
		return "", fmt.Errorf("lab: %w", err)
	}
	return p, nil
}

// envoyBootstrap is the bootstrap of client node i's Envoy: the product's
// (envoy.Bootstrap, as `xds-server envoy bootstrap` writes it: ADS to
// xdsAddr, load reports (LRS) to the same server, admin on a port the
// kernel picks), node lab-client-<i> of cluster lab, plus its subset
// index in its metadata (as the grpc-go clients' bootstrap), which the
// product's bootstrap has no option for.
func envoyBootstrap(xdsAddr string, i int) ([]byte, error) {
	b, err := envoy.Bootstrap(envoy.BootstrapConfig{NodeID: fmt.Sprintf("lab-client-%d", i), Cluster: "lab",
		Locality: envoy.Locality{Zone: "lab"}, XDSAddress: xdsAddr, AdminAddress: "127.0.0.1:0"})
	if err != nil {
		return nil, fmt.Errorf("lab: envoy %d: %w", i, err)
	}
	md, err := structpb.NewStruct(map[string]any{"subset": map[string]any{"index": i}})
	if err != nil {
		return nil, fmt.Errorf("lab: envoy %d: %w", i, err)
	}
	b.Node.Metadata = md
	return envoy.BootstrapYAML(b)
}

// envoyProc is one client node's Envoy.
type envoyProc struct {
	index int
	p     *proc
	admin string // host:port of its admin listener
	addr  string // host:port of its lab-ingress listener
}

// startEnvoys runs one Envoy per client node (--concurrency 1, hot restart
// off) against xdsAddr, each in its own directory under dir/tag, and
// waits for each one's admin listener.
func startEnvoys(ctx context.Context, bin, dir, tag, xdsAddr string, n int) ([]*envoyProc, error) {
	var out []*envoyProc
	for i := range n {
		e, err := startEnvoy(ctx, bin, filepath.Join(dir, tag, fmt.Sprintf("envoy-%d", i)), xdsAddr, i)
		if err != nil {
			stopEnvoys(out)
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func startEnvoy(ctx context.Context, bin, dir, xdsAddr string, i int) (*envoyProc, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	y, err := envoyBootstrap(xdsAddr, i)
	if err != nil {
		return nil, err
	}
	cfg, adminPath := filepath.Join(dir, "bootstrap.yaml"), filepath.Join(dir, "admin-address")
	if err := os.WriteFile(cfg, y, 0o644); err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	p, err := startProc(dir, "envoy", bin, []string{"-c", cfg, "--concurrency", "1", "--disable-hot-restart",
		"--admin-address-path", adminPath, "--log-level", "warn", "--drain-time-s", "1", "--parent-shutdown-time-s", "2"}, nil)
	if err != nil {
		return nil, err
	}
	e := &envoyProc{index: i, p: p}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := os.ReadFile(adminPath); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			e.admin = strings.TrimSpace(string(b))
			return e, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("lab: envoy %d exited (%v); see %s", i, p.err, p.log)
		case <-ctx.Done():
			p.stop(time.Second)
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond): // another process: poll its file
		}
		if time.Now().After(deadline) {
			p.stop(time.Second)
			return nil, fmt.Errorf("lab: envoy %d: no admin address after 60s; see %s", i, p.log)
		}
	}
}

// stopEnvoys stops every Envoy: SIGTERM to all, then waits for each.
func stopEnvoys(es []*envoyProc) {
	for _, e := range es {
		_ = e.p.cmd.Process.Signal(os.Interrupt)
	}
	for _, e := range es {
		e.p.stop(10 * time.Second)
	}
}

// envoyReadyTimeout bounds the wait for an Envoy's listener and endpoints.
const envoyReadyTimeout = 60 * time.Second

// awaitReady waits until e's own admin API shows the lab-ingress listener
// bound and want hosts in the lab cluster (its subset): polling another
// process, there is no event to await.
func (e *envoyProc) awaitReady(ctx context.Context, want int) error {
	deadline := time.Now().Add(envoyReadyTimeout)
	var last error
	for {
		addr, err := envoyListenerAddr(e.admin, envoyListener)
		if err == nil {
			var hosts []envoyHost
			if hosts, err = envoyHosts(e.admin, service); err == nil && len(hosts) != want {
				err = fmt.Errorf("%d hosts in cluster %s, want %d", len(hosts), service, want)
			}
			if err == nil {
				e.addr = addr
				return nil
			}
		}
		last = err
		select {
		case <-e.p.exited:
			return fmt.Errorf("lab: envoy %d exited (%v); see %s", e.index, e.p.err, e.p.log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lab: envoy %d not ready after %v: %v; see %s", e.index, envoyReadyTimeout, last, e.p.log)
		}
	}
}

// envoyFleet is one run's Envoys and the load generators sending through
// them.
type envoyFleet struct {
	envoys  []*envoyProc
	clients []*client
	unlike  map[int]bool // client nodes whose Envoy's /clusters is not the simulator's subset
}

// dialEnvoyClients starts one Envoy per rate against xdsAddr, waits until
// each has its listener and its subset of size hosts, and dials one gRPC
// client per Envoy (plain gRPC to the Envoy's listener, no xDS), warmed up
// as the grpc-go clients are.
func dialEnvoyClients(ctx context.Context, bin, dir, tag, xdsAddr string, rates []float64, size int) (*envoyFleet, error) {
	es, err := startEnvoys(ctx, bin, dir, tag, xdsAddr, len(rates))
	if err != nil {
		return nil, err
	}
	f := &envoyFleet{envoys: es}
	errs := make([]error, len(es))
	var wg sync.WaitGroup
	for k, e := range es {
		wg.Go(func() { errs[k] = e.awaitReady(ctx, size) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.close()
		return nil, err
	}
	for i, e := range es {
		conn, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			f.close()
			return nil, fmt.Errorf("lab: client %d: %w", i, err)
		}
		f.clients = append(f.clients, &client{index: i, rate: rates[i], conn: conn, stub: testgrpc.NewTestServiceClient(conn)})
	}
	for k, c := range f.clients {
		wg.Go(func() { errs[k] = c.warmUp(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

// close ends the clients, then the Envoys.
func (f *envoyFleet) close() {
	closeClients(f.clients)
	stopEnvoys(f.envoys)
}

// cpuSeconds is the Envoys' CPU time so far.
func (f *envoyFleet) cpuSeconds() float64 {
	total := 0.0
	for _, e := range f.envoys {
		total += e.p.cpuSeconds()
	}
	return total
}

// dial connects the run's clients to the xDS server at xdsAddr: grpc-go
// xDS clients, or (--clients envoy) one Envoy per client node and a
// gRPC client sending through it. The returned func closes them all.
func (e *env) dial(ctx context.Context, xdsAddr string, p policy, run int, rates []float64) ([]*client, func(), error) {
	if e.o.kind != envoyClients {
		cs, err := dialClients(ctx, xdsAddr, rates, nil)
		return cs, func() { closeClients(cs) }, err
	}
	tag := fmt.Sprintf("envoys-%s-run%d", p.slug(), run+1)
	f, err := dialEnvoyClients(ctx, e.bins["envoy"], e.dir, tag, xdsAddr, rates, min(cmpOr(p.subset, e.o.backends), e.o.backends))
	if err != nil {
		return nil, nil, err
	}
	f.unlike = envoySubsetMismatches(f.envoys, e.sims[cmpOr(p.subset, e.o.backends)].Fleet.Subsets, e.backends)
	if len(f.unlike) != 0 {
		e.log.Warn("Envoys' subsets (their /clusters) differ from the simulator's", "policy", p.label(e.o.backends), "envoys", len(f.unlike))
	}
	e.envoys = f
	return f.clients, func() { e.envoys = nil; f.close() }, nil
}

// envoysAlive fails when one of the run's Envoys has exited: its node's
// traffic failed or went elsewhere, the run's figures mean nothing.
func (e *env) envoysAlive() error {
	if e.envoys == nil {
		return nil
	}
	for _, ep := range e.envoys.envoys {
		select {
		case <-ep.p.exited:
			return fmt.Errorf("lab: envoy %d exited during the run (%v); see %s", ep.index, ep.p.err, ep.p.log)
		default:
		}
	}
	return nil
}

// envoyUnlike are the client nodes whose Envoy's own view of the lab
// cluster is not the simulator's subset; nil without Envoys.
func (e *env) envoyUnlike() map[int]bool {
	if e.envoys == nil {
		return nil
	}
	return e.envoys.unlike
}

// envoySubsetMismatches are the Envoys (by client index) whose own view
// of the lab cluster (/clusters) is not the simulator's subset (backend
// j's gRPC address for each j of subset i); an Envoy that cannot be read
// is one.
func envoySubsetMismatches(es []*envoyProc, sim [][]int, bs []*backend) map[int]bool {
	out := map[int]bool{}
	for i, ep := range es {
		hosts, err := envoyHosts(ep.admin, service)
		if err != nil || i >= len(sim) || !sameSubset(hosts, sim[i], bs) {
			out[i] = true
		}
	}
	return out
}

// sameSubset reports whether hosts are exactly the backends sub.
func sameSubset(hosts []envoyHost, sub []int, bs []*backend) bool {
	got := make([]string, 0, len(hosts))
	for _, h := range hosts {
		got = append(got, h.addr)
	}
	want := make([]string, 0, len(sub))
	for _, j := range sub {
		want = append(want, bs[j].grpc)
	}
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, want)
}
