package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"google.golang.org/grpc"

	"github.com/xds-server/xds-server/e2e/harness"
)

// TestLameDuckShutdown runs the binary against a real Consul agent: it
// registers with its check and meta and serves; on SIGTERM it enters
// maintenance and reports the lame-duck ORCA metric at once, keeps serving
// new RPCs and connections for the drain delay, lets the in-flight RPC
// finish, deregisters and exits 0.
func TestLameDuckShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs the binary against Consul")
	}
	consul := harness.Consul(t)
	p := startProcess(t, buildBackend(t), "-consul", consul.Addr(), "-service", "echo", "-id", "echo-1",
		"-meta", "zone=a", "-meta", "team=edge", "-tags", "v1,canary",
		"-drain-delay", "1s", "-shutdown-timeout", "20s", "-utilization", "0.25")
	if p.ready["id"] != "echo-1" {
		t.Fatalf("ready id = %q, want echo-1", p.ready["id"])
	}
	assertRegistered(t, consul.Client(), p)

	conn := dial(t, p.ready["grpc"])
	if id := unaryCall(t, conn); id != "echo-1" {
		t.Fatalf("UnaryCall server_id = %q, want echo-1", id)
	}
	orca := openORCA(t, conn)
	if r := recvORCA(t, orca); r.GetCpuUtilization() != 0.25 || r.GetNamedMetrics()["lame_duck"] != 0 {
		t.Fatalf("first ORCA report = %v, want cpu_utilization 0.25 and no lame_duck", r)
	}
	finish := startSlowCall(t, conn, 2500*time.Millisecond)
	sigterm := time.Now()
	p.signal(t, syscall.SIGTERM)

	if r := recvORCA(t, orca); r.GetNamedMetrics()["lame_duck"] != 1 {
		t.Fatalf("ORCA report after SIGTERM = %v, want lame_duck 1", r)
	}
	awaitMaintenance(t, consul.Client(), "echo", "echo-1")
	t.Logf("maintenance and ORCA lame_duck seen %v after SIGTERM", time.Since(sigterm))
	assertServingInLameDuck(t, p, conn)

	resp, err := finish()
	if err != nil || resp.GetServerId() != "echo-1" {
		t.Fatalf("in-flight call = %v, %v; want an answer from echo-1", resp, err)
	}
	for {
		if _, err = orca.Recv(); err != nil {
			break
		}
	}
	if !errors.Is(err, io.EOF) {
		t.Fatalf("ORCA stream at shutdown: %v, want a clean end (EOF)", err)
	}
	p.wait(t)
	t.Logf("exited %v after SIGTERM", time.Since(sigterm))
	services, err := consul.Client().Agent().Services()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := services["echo-1"]; ok {
		t.Fatalf("echo-1 still registered after exit: %v", services)
	}
	for _, step := range []string{"step 1/4", "step 2/4", "step 3/4", "step 4/4", "shutdown complete"} {
		if !strings.Contains(p.stderr.String(), step) {
			t.Errorf("log has no %q", step)
		}
	}
}

// assertRegistered checks the agent's registration of the backend p.
func assertRegistered(t *testing.T, client *api.Client, p *process) {
	t.Helper()
	svc, _, err := client.Agent().Service("echo-1", nil)
	if err != nil {
		t.Fatalf("echo-1 not registered: %v", err)
	}
	_, port, _ := net.SplitHostPort(p.ready["grpc"])
	if svc.Service != "echo" || net.JoinHostPort(svc.Address, strconv.Itoa(svc.Port)) != p.ready["grpc"] {
		t.Errorf("service = %s at %s:%d, want echo at %s", svc.Service, svc.Address, svc.Port, p.ready["grpc"])
	}
	if svc.Meta["orca_port"] != port || svc.Meta["zone"] != "a" || svc.Meta["team"] != "edge" {
		t.Errorf("meta = %v, want orca_port=%s zone=a team=edge", svc.Meta, port)
	}
	if !slices.Equal(svc.Tags, []string{"v1", "canary"}) {
		t.Errorf("tags = %v, want [v1 canary]", svc.Tags)
	}
	checks, err := client.Agent().ChecksWithFilter(`ServiceID == "echo-1"`)
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) != 1 {
		t.Fatalf("checks of echo-1 = %v, want one HTTP check", checks)
	}
	for _, c := range checks {
		if c.Type != "http" || c.Status != api.HealthPassing {
			t.Errorf("check = %s %s, want a passing http check", c.Type, c.Status)
		}
	}
}

// assertServingInLameDuck checks that the backend in lame duck still
// answers RPCs on an open connection and on a new one, opens ORCA streams
// reporting lame duck, and answers /healthz with 200.
func assertServingInLameDuck(t *testing.T, p *process, conn *grpc.ClientConn) {
	t.Helper()
	if id := unaryCall(t, conn); id != "echo-1" {
		t.Errorf("UnaryCall in lame duck: server_id = %q, want echo-1", id)
	}
	fresh := dial(t, p.ready["grpc"])
	if id := unaryCall(t, fresh); id != "echo-1" {
		t.Errorf("UnaryCall on a new connection in lame duck: server_id = %q, want echo-1", id)
	}
	if first := recvORCA(t, openORCA(t, fresh)); first.GetNamedMetrics()["lame_duck"] != 1 {
		t.Errorf("first report of a new ORCA stream in lame duck = %v, want lame_duck 1", first)
	}
	resp, err := http.Get("http://" + p.ready["http"] + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz in lame duck: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz in lame duck = %d %q, want 200", resp.StatusCode, body)
	}
}

// TestShutdownWithoutConsul: with Consul gone, the shutdown sequence logs
// the failed Consul calls and still exits 0, without hanging.
func TestShutdownWithoutConsul(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs the binary against Consul")
	}
	consul := harness.Consul(t)
	p := startProcess(t, buildBackend(t), "-consul", consul.Addr(), "-drain-delay", "100ms",
		"-consul-timeout", "1s")
	consul.Stop()
	p.signal(t, syscall.SIGTERM)
	p.wait(t)
	for _, want := range []string{"not Consul maintenance", "deregistration failed", "shutdown complete"} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("log has no %q", want)
		}
	}
}

// TestSecondSignal: a second signal cuts a long drain delay short.
func TestSecondSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs the binary against Consul")
	}
	consul := harness.Consul(t)
	p := startProcess(t, buildBackend(t), "-consul", consul.Addr(), "-id", "echo-2", "-service", "echo",
		"-drain-delay", "10m")
	p.signal(t, syscall.SIGTERM)
	awaitMaintenance(t, consul.Client(), "echo", "echo-2")
	p.signal(t, syscall.SIGINT)
	p.wait(t) // within waitLimit, far less than the drain delay
	if !strings.Contains(p.stderr.String(), "drain cut short") {
		t.Errorf("log has no %q", "drain cut short")
	}
}
