package harness

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/xds-server/xds-server/internal/freeport"
	"github.com/xds-server/xds-server/internal/toolbin"
)

// RequireIntegrationEnv is the environment variable that, set to "1", turns
// a missing server binary from a skipped test into a failed one.
const RequireIntegrationEnv = "XDS_SERVER_REQUIRE_INTEGRATION"

// ConsulDatacenter is the datacenter of every agent started here.
const ConsulDatacenter = "dc1"

// consulReadyTimeout bounds the wait for an agent to answer with a leader.
const consulReadyTimeout = 60 * time.Second

// ConsulAgent is a `consul agent -dev` child process bound to 127.0.0.1.
// A -dev agent keeps its state in memory: after Stop and Start, services
// registered through the agent API are gone, while the services written with
// RegisterFile (into the agent's -config-dir) come back.
type ConsulAgent struct {
	t         testing.TB
	bin       string
	dir       string // temporary root of this agent: config dir and log
	configDir string
	logPath   string
	node      string
	dc        string // datacenter
	http      int    // HTTP API port; serf LAN and server RPC ports below
	serfLAN   int
	server    int
	serfWAN   int        // 0: no WAN
	tls       *ConsulTLS // nil: plain HTTP

	mu       sync.Mutex
	cmd      *exec.Cmd     // nil while stopped
	exited   chan struct{} // closed once cmd has exited
	client   *api.Client
	services []string // ids of the services defined in the config dir
	wan      []string // serf WAN addresses of the agents of the other datacenters (ConsulWAN)
	wanDCs   []string // the datacenters the agent must see to be ready (ConsulWAN)
}

// ConsulVersion is the Consul release the tests run against (the last
// open-source line this project builds; see scripts/install-consul.sh).
const ConsulVersion = toolbin.ConsulVersion

// ConsulBinary finds the consul binary of ConsulVersion: in
// $XDS_SERVER_CACHE/consul-<version>/bin, else
// $HOME/.cache/xds-server/consul-<version>/bin (where
// scripts/install-consul.sh builds it), else on PATH. A binary cached
// under another version's directory is never used.
func ConsulBinary() (string, error) {
	p, err := toolbin.Consul()
	if err != nil {
		return "", fmt.Errorf("harness: %w", err)
	}
	return p, nil
}

// Consul starts a Consul agent in -dev mode on free loopback ports (HTTP,
// serf LAN and server RPC; DNS, gRPC and serf WAN disabled) and waits until
// its HTTP API answers with an elected leader. The agent is stopped when the
// test ends; if the test failed, the tail of its log is logged. Without a
// consul binary the test is skipped, or fails when
// XDS_SERVER_REQUIRE_INTEGRATION=1.
func Consul(t testing.TB) *ConsulAgent {
	t.Helper()
	return ConsulWith(t, ConsulOptions{})
}

// ConsulWith is Consul with options.
func ConsulWith(t testing.TB, opts ConsulOptions) *ConsulAgent {
	t.Helper()
	bin, err := ConsulBinary()
	if err != nil {
		if os.Getenv(RequireIntegrationEnv) == "1" {
			t.Fatalf("%v; required because %s=1", err, RequireIntegrationEnv)
		}
		t.Skipf("%v; skipping (set %s=1 to fail instead)", err, RequireIntegrationEnv)
	}
	dir := t.TempDir()
	a := &ConsulAgent{t: t, bin: bin, dir: dir, configDir: filepath.Join(dir, "config"),
		logPath: filepath.Join(dir, "consul.log"), node: "xds-test", tls: opts.TLS, dc: cmp.Or(opts.Datacenter, ConsulDatacenter)}
	if err := os.Mkdir(a.configDir, 0o755); err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			t.Logf("harness: consul log tail (%s):\n%s", a.logPath, a.logTail(60))
		}
	})
	// A free port can be taken by someone else before consul binds it: try
	// again with fresh ports.
	for attempt := 1; ; attempt++ {
		ports, err := freeport.Loopback(4)
		if err != nil {
			t.Fatalf("harness: %v", err)
		}
		a.http, a.serfLAN, a.server = ports[0], ports[1], ports[2]
		if opts.WAN {
			a.serfWAN = ports[3]
		}
		err = a.start()
		if err == nil {
			return a
		}
		a.Stop()
		if attempt == 3 {
			t.Fatalf("harness: consul did not start: %v\nlog tail:\n%s", err, a.logTail(60))
		}
	}
}

// Addr is the host:port of the agent's HTTP API.
func (a *ConsulAgent) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(a.http))
}

// Node is the agent's node name.
func (a *ConsulAgent) Node() string { return a.node }

// Client returns an API client of the agent (no ACL token needed).
func (a *ConsulAgent) Client() *api.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.client
}

// Stop kills the agent (SIGKILL: like a crash) and waits for it to exit.
// Stopping a stopped agent does nothing.
func (a *ConsulAgent) Stop() {
	a.mu.Lock()
	cmd, exited := a.cmd, a.exited
	a.cmd = nil
	a.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Start starts a stopped agent again on the same ports and waits until it
// has a leader, the services of its config dir are in the catalog and (an
// agent of ConsulWAN) it sees every datacenter again. The
// in-memory state is fresh: indexes start over, agent API registrations are
// gone. Starting a running agent does nothing. Failures fail the test.
func (a *ConsulAgent) Start() {
	a.t.Helper()
	a.mu.Lock()
	running := a.cmd != nil
	a.mu.Unlock()
	if running {
		return
	}
	if err := a.start(); err != nil {
		a.Stop()
		a.t.Fatalf("harness: consul did not restart on port %d: %v\nlog tail:\n%s", a.http, err, a.logTail(60))
	}
}

// start runs the agent process and waits until it is ready.
func (a *ConsulAgent) start() error {
	logf, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("harness: consul log: %w", err)
	}
	cmd := exec.Command(a.bin, a.args()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("harness: start %s: %w", a.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	client, err := api.NewClient(a.clientConfig())
	if err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("harness: consul client: %w", err)
	}
	a.mu.Lock()
	a.cmd, a.exited, a.client = cmd, exited, client
	a.mu.Unlock()
	return a.waitReady(exited)
}

// waitReady polls the agent until it has a leader and lists the services of
// its config dir in the catalog, or exits, or consulReadyTimeout passes.
func (a *ConsulAgent) waitReady(exited <-chan struct{}) error {
	deadline := time.After(consulReadyTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = a.ready(); last == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("consul exited before it was ready")
		case <-deadline:
			return fmt.Errorf("not ready within %v: %w", consulReadyTimeout, last)
		case <-tick.C:
		}
	}
}

// ready reports why the agent is not ready yet, or nil.
func (a *ConsulAgent) ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	leader, err := a.Client().Status().LeaderWithQueryOptions((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("status/leader: %w", err)
	}
	if leader == "" {
		return errors.New("no leader yet")
	}
	a.mu.Lock()
	want, dcs := slices.Clone(a.services), slices.Clone(a.wanDCs)
	a.mu.Unlock()
	if err := a.seesDatacenters(dcs); err != nil {
		return err
	}
	return a.synced(want)
}

// synced reports whether the agent's node is in the catalog (sessions need
// it) with every service id of want.
func (a *ConsulAgent) synced(want []string) error {
	node, _, err := a.Client().Catalog().Node(a.node, nil)
	if err != nil {
		return err
	}
	if node == nil {
		return fmt.Errorf("node %q not in the catalog yet", a.node)
	}
	for _, id := range want {
		if node == nil || node.Services[id] == nil {
			return fmt.Errorf("service %q not in the catalog yet", id)
		}
	}
	return nil
}

// RegisterFile writes a service definition into the agent's config dir, so
// that it survives restarts, reloads a running agent and waits until the
// service is in the catalog. Supported fields: ID (default Name), Name,
// Tags, Address, Port, Meta, Weights, and of Check and Checks: CheckID,
// Name, Notes, Status, TTL, HTTP, TCP, Interval, Timeout and
// DeregisterCriticalServiceAfter; others are ignored.
func (a *ConsulAgent) RegisterFile(t testing.TB, reg api.AgentServiceRegistration) {
	t.Helper()
	reg.ID = cmp.Or(reg.ID, reg.Name)
	data, err := serviceFileJSON(reg)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	path := filepath.Join(a.configDir, "service-"+strings.ReplaceAll(reg.ID, "/", "_")+".json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatalf("harness: %v", err)
	}
	a.mu.Lock()
	if !slices.Contains(a.services, reg.ID) {
		a.services = append(a.services, reg.ID)
	}
	running, exited := a.cmd != nil, a.exited
	a.mu.Unlock()
	if !running {
		return
	}
	if err := a.Client().Agent().Reload(); err != nil {
		t.Fatalf("harness: consul reload: %v", err)
	}
	if err := a.waitReady(exited); err != nil {
		t.Fatalf("harness: service %q from %s: %v", reg.ID, path, err)
	}
}

// serviceFileJSON renders reg as a Consul agent config file (snake_case keys).
func serviceFileJSON(reg api.AgentServiceRegistration) ([]byte, error) {
	svc := map[string]any{"id": reg.ID, "name": reg.Name}
	if len(reg.Tags) > 0 {
		svc["tags"] = reg.Tags
	}
	if reg.Address != "" {
		svc["address"] = reg.Address
	}
	if reg.Port != 0 {
		svc["port"] = reg.Port
	}
	if len(reg.Meta) > 0 {
		svc["meta"] = reg.Meta
	}
	if w := reg.Weights; w != nil {
		svc["weights"] = map[string]int{"passing": w.Passing, "warning": w.Warning}
	}
	var checks []map[string]string
	if reg.Check != nil {
		checks = append(checks, checkFileJSON(reg.Check))
	}
	for _, c := range reg.Checks {
		checks = append(checks, checkFileJSON(c))
	}
	if len(checks) > 0 {
		svc["checks"] = checks
	}
	data, err := json.MarshalIndent(map[string]any{"service": svc}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("service %q: %w", reg.ID, err)
	}
	return data, nil
}

func checkFileJSON(c *api.AgentServiceCheck) map[string]string {
	m := map[string]string{}
	for k, v := range map[string]string{
		"id": c.CheckID, "name": c.Name, "notes": c.Notes, "status": c.Status, "ttl": c.TTL,
		"http": c.HTTP, "tcp": c.TCP, "interval": c.Interval, "timeout": c.Timeout,
		"deregister_critical_service_after": c.DeregisterCriticalServiceAfter,
	} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}

// logTail returns the last n lines of the agent's log.
func (a *ConsulAgent) logTail(n int) string {
	data, err := os.ReadFile(a.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
