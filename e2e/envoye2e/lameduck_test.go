package envoye2e

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xds-server/xds-server/e2e/harness"
)

// ldConfig: the service web behind the listener ingress (a free port) of
// the Envoys of cluster edge; %s is more YAML at the top level.
const ldConfig = `
discovery:
  consul:
    services: [web]
listeners:
  - name: ingress
    address: 127.0.0.1:0
    nodes: ["edge"]
    routes:
      - { prefix: /, service: web, timeout: 10s }
%s`

// ldWorkers is the number of load workers per Envoy: also the most
// requests that can be in flight when Envoy applies a DRAINING, so the
// most a drained backend may answer after Envoy shows it DRAINING.
const ldWorkers = 2

// ldWait bounds each wait for Envoy or the load (a loaded 2-core machine).
const ldWait = 45 * time.Second

// ldDrainDelay is the example backend's -drain-delay: how long it keeps
// serving in lame duck while xds-server pushes DRAINING.
const ldDrainDelay = 4 * time.Second

// ldEnvoy is one Envoy of a test and the load through its listener.
type ldEnvoy struct {
	mode string // "sotw" or "delta"
	e    *harness.Envoy
	load *harness.HTTPLoad
}

// ldWriteConfig writes ldConfig (with extra) and returns its path.
func ldWriteConfig(t *testing.T, extra string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "xds-server.yaml")
	if err := os.WriteFile(p, fmt.Appendf(nil, ldConfig, extra), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ldStartBackend runs an example backend of service web, registered in
// consul with its HTTP port, on the given addresses (port 0: any).
func ldStartBackend(t *testing.T, consul *harness.ConsulAgent, id, httpAddr, grpcAddr string) *harness.ExBackend {
	t.Helper()
	return harness.StartExampleBackend(t, "-consul", consul.Addr(), "-service", "web", "-id", id,
		"-register-port", "http", "-http-addr", httpAddr, "-grpc-addr", grpcAddr,
		"-drain-delay", ldDrainDelay.String(), "-shutdown-timeout", "5s")
}

// ldStartEnvoys starts a state-of-the-world and a delta Envoy on xdsAddr
// (one or several, comma-separated), waits until each has the listener and
// n healthy hosts of web, and starts a steady load through each.
func ldStartEnvoys(t *testing.T, xdsAddr string, n int) []ldEnvoy {
	t.Helper()
	var out []ldEnvoy
	for _, delta := range []bool{false, true} {
		mode := map[bool]string{false: "sotw", true: "delta"}[delta]
		e := harness.StartEnvoy(t, harness.EnvoyOptions{NodeID: "ld-" + mode, XDSAddr: xdsAddr, Delta: delta})
		addr := e.AwaitListener(t, "ingress", ldWait)
		e.AwaitHosts(t, "web", ldWait, func(h []harness.EnvoyHost) bool { return len(h) == n && ldAllHealthy(h, "") })
		load := harness.StartHTTPLoad(harness.HTTPLoadConfig{URL: "http://" + addr + "/", Workers: ldWorkers,
			Interval: 10 * time.Millisecond})
		t.Cleanup(func() { load.Stop() })
		out = append(out, ldEnvoy{mode: mode, e: e, load: load})
	}
	for _, le := range out {
		ldAwaitLoad(t, le, "first answers", func(r harness.LoadResult) bool { return r.ByStatus[http.StatusOK] >= 20 })
	}
	return out
}

// ldAllHealthy: every host but except is HEALTHY (except: none if "").
func ldAllHealthy(hosts []harness.EnvoyHost, except string) bool {
	for _, h := range hosts {
		if h.Addr != except && h.Health != corev3.HealthStatus_HEALTHY {
			return false
		}
	}
	return true
}

// ldHealth is the health Envoy shows for the host at addr, and whether it
// has such a host.
func ldHealth(hosts []harness.EnvoyHost, addr string) (corev3.HealthStatus, bool) {
	for _, h := range hosts {
		if h.Addr == addr {
			return h.Health, true
		}
	}
	return 0, false
}

// ldAwaitDrained waits until every Envoy shows the host at addr DRAINING
// and every other host HEALTHY.
func ldAwaitDrained(t *testing.T, envoys []ldEnvoy, addr string) {
	t.Helper()
	for _, le := range envoys {
		le.e.AwaitHosts(t, "web", ldWait, func(h []harness.EnvoyHost) bool {
			s, ok := ldHealth(h, addr)
			return ok && s == corev3.HealthStatus_DRAINING && ldAllHealthy(h, addr)
		})
	}
}

// ldAwaitLoad waits until the load through le satisfies cond.
func ldAwaitLoad(t *testing.T, le ldEnvoy, what string, cond func(harness.LoadResult) bool) {
	t.Helper()
	le.e.Await(t, le.mode+" load: "+what, ldWait, func() (bool, string, error) {
		r := le.load.Snapshot()
		return cond(r), r.String(), nil
	})
}

// TestEnvoyLameDuck: steady HTTP load through a state-of-the-world and a
// delta Envoy while each of three example backends of web is restarted in
// turn (SIGTERM: Consul maintenance, -drain-delay, graceful stop,
// deregister; then the same id on the same ports), and while an admin
// drain and undrain happen. Each Envoy shows the backend DRAINING before
// it stops serving, sends it nothing new from then on, shows it HEALTHY
// again once it is back (or undrained), and no request fails.
func TestEnvoyLameDuck(t *testing.T) {
	skipShort(t)
	consul := harness.Consul(t)
	backends := make([]*harness.ExBackend, 3)
	for i := range backends {
		backends[i] = ldStartBackend(t, consul, fmt.Sprintf("web-%d", i+1), "127.0.0.1:0", "127.0.0.1:0")
	}
	srv := startServer(t, consul, "--config", ldWriteConfig(t, ""))
	envoys := ldStartEnvoys(t, srv.XDSAddr, len(backends))

	for i, b := range backends {
		backends[i] = ldRestart(t, consul, envoys, b)
	}
	ldAdminDrain(t, srv, envoys, backends[1])

	ldStopLoads(t, envoys)
}

// ldStopLoads stops the load through each Envoy, logs what it got, and
// fails the test for every request that failed or anything Envoy rejected.
func ldStopLoads(t *testing.T, envoys []ldEnvoy) {
	t.Helper()
	for _, le := range envoys {
		r := le.load.Stop()
		t.Logf("%s Envoy: %s", le.mode, r)
		if r.Failed() != 0 {
			t.Errorf("%s Envoy: %d of %d requests failed: %s\nEnvoy complained:\n%s", le.mode, r.Failed(), r.Total, r,
				strings.Join(le.e.Complaints(), "\n"))
		}
		le.e.AssertAccepted(t)
	}
}

// ldRestart restarts backend b as a rolling restart does (SIGTERM, wait
// for its exit, start it again with the same id and ports) and checks what
// each Envoy shows meanwhile; it returns the new process.
func ldRestart(t *testing.T, consul *harness.ConsulAgent, envoys []ldEnvoy, b *harness.ExBackend) *harness.ExBackend {
	t.Helper()
	signalled := time.Now()
	if err := b.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ldAwaitDrained(t, envoys, b.HTTPAddr)
	select {
	case <-b.Exited():
		t.Errorf("%s: Envoy showed it DRAINING only after it exited (%v after SIGTERM)", b.ID, time.Since(signalled))
	default:
	}
	t.Logf("%s: SIGTERM -> DRAINING in both Envoys in %v", b.ID, time.Since(signalled).Round(time.Millisecond))
	seen := make([]int, len(envoys))
	for i, le := range envoys {
		seen[i] = le.load.Snapshot().ByBackend[b.ID]
	}
	if err := b.Wait(ldDrainDelay + 20*time.Second); err != nil {
		t.Fatalf("%s: %v\nlog:\n%s", b.ID, err, b.Logs())
	}
	for i, le := range envoys {
		if n := le.load.Snapshot().ByBackend[b.ID] - seen[i]; n > ldWorkers {
			t.Errorf("%s Envoy: %d requests reached %s after Envoy showed it DRAINING (at most %d in flight)", le.mode, n, b.ID, ldWorkers)
		}
		hosts, err := le.e.Hosts("web")
		if s, ok := ldHealth(hosts, b.HTTPAddr); err != nil || !ok || s != corev3.HealthStatus_DRAINING {
			t.Errorf("%s Envoy: %s exited and deregistered, its host is %s, want DRAINING (drain.window) (err %v)",
				le.mode, b.ID, harness.DescribeHosts(hosts), err)
		}
		seen[i] = le.load.Snapshot().ByBackend[b.ID]
	}
	nb := ldStartBackend(t, consul, b.ID, b.HTTPAddr, b.GRPCAddr)
	for i, le := range envoys {
		le.e.AwaitHosts(t, "web", ldWait, func(h []harness.EnvoyHost) bool {
			_, ok := ldHealth(h, nb.HTTPAddr)
			return ok && ldAllHealthy(h, "")
		})
		ldAwaitLoad(t, le, "answers of the restarted "+b.ID, func(r harness.LoadResult) bool { return r.ByBackend[b.ID] > seen[i] })
	}
	return nb
}

// ldAdminDrain drains backend b through the admin API, checks that each
// Envoy shows it DRAINING and sends it nothing new while the load goes
// on, undrains it and checks that it is HEALTHY and answers again.
func ldAdminDrain(t *testing.T, srv *harness.Server, envoys []ldEnvoy, b *harness.ExBackend) {
	t.Helper()
	ldAdmin(t, srv, http.MethodPost, "/v1/drain", fmt.Sprintf(`{"service": "web", "endpoint": %q}`, b.ID))
	ldAwaitDrained(t, envoys, b.HTTPAddr)
	seen := make([]int, len(envoys))
	for i, le := range envoys {
		seen[i] = le.load.Snapshot().ByBackend[b.ID]
	}
	for _, le := range envoys {
		total := le.load.Snapshot().Total
		ldAwaitLoad(t, le, "100 requests while drained", func(r harness.LoadResult) bool { return r.Total >= total+100 })
	}
	for i, le := range envoys {
		if n := le.load.Snapshot().ByBackend[b.ID] - seen[i]; n > ldWorkers {
			t.Errorf("%s Envoy: %d requests reached %s after Envoy showed it DRAINING (admin drain; at most %d in flight)",
				le.mode, n, b.ID, ldWorkers)
		}
	}
	ldAdmin(t, srv, http.MethodDelete, "/v1/drain?service=web&endpoint="+url.QueryEscape(b.ID), "")
	for _, le := range envoys {
		le.e.AwaitHosts(t, "web", ldWait, func(h []harness.EnvoyHost) bool { return ldAllHealthy(h, "") })
		n := le.load.Snapshot().ByBackend[b.ID]
		ldAwaitLoad(t, le, "answers of "+b.ID+" once undrained", func(r harness.LoadResult) bool { return r.ByBackend[b.ID] > n })
	}
}

// ldAdmin sends an admin API call and fails the test unless it answers 200.
func ldAdmin(t *testing.T, srv *harness.Server, method, path, body string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.AdminURL(path), bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Admin.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		t.Fatalf("%s %s: %s: %s", method, path, resp.Status, b.String())
	}
}
