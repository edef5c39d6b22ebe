package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/xds-server/xds-server/internal/freeport"
	"github.com/xds-server/xds-server/internal/pause"
)

// consulStartTimeout bounds the wait for a Consul agent's leader.
const consulStartTimeout = 60 * time.Second

// ConsulConnect is a `consul agent -dev` process on loopback with its gRPC
// port open: the catalog of every mode of the real-Envoy benchmark and,
// in the Consul mode, the xDS server (Connect is on in -dev mode).
type ConsulConnect struct {
	Bin      string
	HTTPAddr string // host:port of the HTTP API
	GRPCAddr string // host:port of the plaintext gRPC (xDS) port
	Client   *api.Client

	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartConsulConnect runs the agent of binary bin with its config dir and
// log in dir, on free ports (three attempts), and waits for its leader.
func StartConsulConnect(ctx context.Context, bin, dir string) (*ConsulConnect, error) {
	var errs []error
	for range 3 {
		c, err := startConsulConnect(ctx, bin, dir)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func startConsulConnect(ctx context.Context, bin, dir string) (*ConsulConnect, error) {
	ports, err := freeport.Loopback(4)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	c := &ConsulConnect{Bin: bin, dir: dir, exited: make(chan struct{}),
		HTTPAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		GRPCAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
	configDir := filepath.Join(dir, "consul-config")
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, "consul.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	c.cmd = exec.Command(bin, "agent", "-dev", "-node=bench", "-datacenter=dc1", "-bind=127.0.0.1", "-client=127.0.0.1",
		"-config-dir="+configDir, "-log-level=warn", "-http-port="+strconv.Itoa(ports[0]), "-grpc-port="+strconv.Itoa(ports[1]),
		"-serf-lan-port="+strconv.Itoa(ports[2]), "-server-port="+strconv.Itoa(ports[3]),
		"-serf-wan-port=-1", "-dns-port=-1", "-grpc-tls-port=-1", "-hcl=disable_update_check = true")
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if err := c.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("bench: start %s: %w", bin, err)
	}
	go func() { _ = c.cmd.Wait(); logf.Close(); close(c.exited) }()
	if c.Client, err = api.NewClient(&api.Config{Address: c.HTTPAddr, Datacenter: "dc1"}); err == nil {
		err = c.awaitLeader(ctx)
	}
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("bench: consul: %w\n%s", err, c.LogTail(20))
	}
	return c, nil
}

// awaitLeader polls until the agent has a leader and its node is in the
// catalog.
func (c *ConsulConnect) awaitLeader(ctx context.Context) error {
	deadline := time.Now().Add(consulStartTimeout)
	var last error = errors.New("not polled")
	for time.Now().Before(deadline) {
		select {
		case <-c.exited:
			return errors.New("exited before it was ready")
		default:
		}
		q := (&api.QueryOptions{}).WithContext(ctx)
		leader, err := c.Client.Status().LeaderWithQueryOptions(q)
		if err == nil && leader != "" {
			node, _, err := c.Client.Catalog().Node("bench", q)
			if err == nil && node != nil {
				return nil
			}
			last = fmt.Errorf("node not in the catalog yet (%v)", err)
		} else {
			last = fmt.Errorf("no leader yet (%v)", err)
		}
		if !pause.For(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("not ready within %v: %w", consulStartTimeout, last)
}

// PID is the agent's process id.
func (c *ConsulConnect) PID() int { return c.cmd.Process.Pid }

// Stop kills the agent and waits for it.
func (c *ConsulConnect) Stop() {
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// LogTail is the last n lines of the agent's log.
func (c *ConsulConnect) LogTail(n int) string {
	b, err := os.ReadFile(filepath.Join(c.dir, "consul.log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// sidecarPort is the port of every endpoint's (never running) sidecar.
const sidecarPort = 21000

// RegisterNodes registers the catalog through Consul's catalog API, the
// way agents on other machines would have: endpoint e of service s on its
// own node (named like the endpoint, at its address) with a passing
// node-level check (CheckID(s, e)) that the benchmark flips
// (NodeFlipper). With sidecars, each endpoint also has a Connect sidecar
// proxy on its node (port 21000; nothing listens), which the node check
// covers too: Consul's xDS gives its Envoys the sidecars of a service,
// with the health of the endpoints they front.
func RegisterNodes(ctx context.Context, catalog *api.Catalog, cat Catalog, sidecars bool, workers int) error {
	w := (&api.WriteOptions{}).WithContext(ctx)
	return forEach(ctx, workers, cat.Size(), func(i int) error {
		s, e := i/cat.Endpoints, i%cat.Endpoints
		id, name, addr := cat.id(s, e), cat.Service(s), cat.address(s, e)
		reg := &api.CatalogRegistration{Node: id, Address: addr, Datacenter: "dc1",
			Service: &api.AgentService{ID: id, Service: name, Address: addr, Port: endpointPort,
				Meta: map[string]string{"zone": "zone-" + strconv.Itoa(e%3)}},
			Check: &api.AgentCheck{Node: id, CheckID: cat.CheckID(s, e), Name: "endpoint", Status: api.HealthPassing}}
		if _, err := catalog.Register(reg, w); err != nil {
			return fmt.Errorf("bench: register %s: %w", id, err)
		}
		if !sidecars {
			return nil
		}
		proxy := &api.CatalogRegistration{Node: id, Address: addr, Datacenter: "dc1", SkipNodeUpdate: true,
			Service: &api.AgentService{Kind: api.ServiceKindConnectProxy, ID: id + "-sidecar-proxy", Service: name + "-sidecar-proxy",
				Address: addr, Port: sidecarPort, Proxy: &api.AgentServiceConnectProxyConfig{
					DestinationServiceName: name, DestinationServiceID: id, LocalServicePort: endpointPort}}}
		if _, err := catalog.Register(proxy, w); err != nil {
			return fmt.Errorf("bench: register %s's sidecar: %w", id, err)
		}
		return nil
	})
}

// NodeFlipper flips the node checks of RegisterNodes between passing and
// critical (a catalog write) and remembers what it last set.
type NodeFlipper struct {
	cat     Catalog
	catalog *api.Catalog
	flipped
}

// NewNodeFlipper starts from the registered state: every check passing.
func NewNodeFlipper(cat Catalog, catalog *api.Catalog) *NodeFlipper {
	return &NodeFlipper{cat: cat, catalog: catalog}
}

// Down reports whether endpoint e of service s is critical now.
func (f *NodeFlipper) Down(s, e int) bool { return f.isDown(s, e) }

// Flip turns the check of endpoint e of service s critical if it passes,
// passing if it is critical.
func (f *NodeFlipper) Flip(ctx context.Context, s, e int) error {
	status := api.HealthCritical
	if f.Down(s, e) {
		status = api.HealthPassing
	}
	id := f.cat.id(s, e)
	reg := &api.CatalogRegistration{Node: id, Address: f.cat.address(s, e), Datacenter: "dc1", SkipNodeUpdate: true,
		Check: &api.AgentCheck{Node: id, CheckID: f.cat.CheckID(s, e), Name: "endpoint", Status: status}}
	if _, err := f.catalog.Register(reg, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("bench: flip %s to %s: %w", f.cat.CheckID(s, e), status, err)
	}
	f.set(s, e, status == api.HealthCritical)
	return nil
}

// AwaitConnectCatalog waits until Consul lists every endpoint's sidecar
// as passing.
func AwaitConnectCatalog(ctx context.Context, client *api.Client, cat Catalog, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for s := 0; s < cat.Services; {
		entries, _, err := client.Health().Connect(cat.Service(s), "", true, (&api.QueryOptions{}).WithContext(ctx))
		switch {
		case err == nil && len(entries) == cat.Endpoints:
			s++
			continue
		case time.Now().After(deadline):
			return fmt.Errorf("bench: %s: %d passing sidecars after %v, want %d (%v)", cat.Service(s), len(entries), timeout, cat.Endpoints, err)
		}
		if !pause.For(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
	return nil
}

// EnvoyProxyID is the id of the sidecar proxy Envoy i plays on the Consul side.
func EnvoyProxyID(i int) string { return fmt.Sprintf("bench-envoy-%03d-sidecar-proxy", i) }

// RegisterEnvoyProxy registers Envoy i of the Consul side: an instance of
// service "bench-envoy" with a sidecar proxy (EnvoyProxyID(i)) whose
// public listener is 127.0.0.1:port and whose upstreams are every service
// of cat, each on a Unix socket in sockDir (no TCP port per upstream).
func RegisterEnvoyProxy(ctx context.Context, agent *api.Agent, cat Catalog, i, port int, sockDir string) error {
	ups := make([]api.Upstream, cat.Services)
	for s := range ups {
		path := filepath.Join(sockDir, fmt.Sprintf("s%03d.sock", s))
		if len(path) > 100 { // sun_path is 108 bytes
			return fmt.Errorf("bench: socket path %s too long for a Unix socket", path)
		}
		ups[s] = api.Upstream{DestinationName: cat.Service(s), LocalBindSocketPath: path, LocalBindSocketMode: "0700"}
	}
	id := fmt.Sprintf("bench-envoy-%03d", i)
	reg := &api.AgentServiceRegistration{ID: id, Name: "bench-envoy", Address: "127.0.0.1", Port: 1,
		Check: &api.AgentServiceCheck{CheckID: id + "-ttl", TTL: "1h", Status: api.HealthPassing},
		Connect: &api.AgentServiceConnect{SidecarService: &api.AgentServiceRegistration{Port: port, // its id is EnvoyProxyID(i)
			Checks: api.AgentServiceChecks{{CheckID: EnvoyProxyID(i) + "-ttl", TTL: "1h", Status: api.HealthPassing}},
			Proxy:  &api.AgentServiceConnectProxyConfig{Config: map[string]any{"bind_address": "127.0.0.1"}, Upstreams: ups}}},
	}
	if err := agent.ServiceRegisterOpts(reg, api.ServiceRegisterOpts{}.WithContext(ctx)); err != nil {
		return fmt.Errorf("bench: register %s: %w", id, err)
	}
	return nil
}

// Bootstrap writes to path the bootstrap `consul connect envoy -bootstrap`
// generates for the proxy proxyID, admin listener on 127.0.0.1:0.
func (c *ConsulConnect) Bootstrap(ctx context.Context, proxyID, path string) error {
	cmd := exec.CommandContext(ctx, c.Bin, "connect", "envoy", "-bootstrap", "-proxy-id", proxyID,
		"-http-addr", "http://"+c.HTTPAddr, "-grpc-addr", "http://"+c.GRPCAddr, "-admin-bind", "127.0.0.1:0")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bench: %s: %w: %s", strings.Join(cmd.Args, " "), err, errb.String())
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// forEach calls f(0..n-1), workers at a time, and returns the first error
// (the remaining calls are not made).
func forEach(ctx context.Context, workers, n int, f func(i int) error) error {
	jobs := make(chan int)
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				if err := f(i); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return cmp.Or(first, ctx.Err())
}
