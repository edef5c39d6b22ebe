package main

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	orcadata "github.com/cncf/xds/go/xds/data/orca/v3"
	orcaservice "github.com/cncf/xds/go/xds/service/orca/v3"
	"github.com/hashicorp/consul/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// waitLimit bounds every wait for the backend process or Consul.
const waitLimit = 30 * time.Second

// buildBackend builds this command into a temporary directory.
func buildBackend(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "backend")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// process is a running backend binary.
type process struct {
	cmd    *exec.Cmd
	ready  map[string]string // fields of the ready line: grpc, http, id
	stderr syncBuffer
	exited chan struct{} // closed once the process has exited
	err    error         // of cmd.Wait, once exited is closed
}

// startProcess runs bin with args and waits for its ready line. The
// process is killed when the test ends, if still running; its log is
// logged if the test failed.
func startProcess(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready ") {
				ready <- sc.Text()
			}
		}
		p.err = p.cmd.Wait() // after the last read of stdout
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("backend log:\n%s", p.stderr.String())
		}
	})
	select {
	case line := <-ready:
		p.ready = readyFields(t, line)
	case <-p.exited:
		t.Fatalf("backend exited before it was ready: %v", p.err)
	case <-time.After(waitLimit):
		t.Fatalf("backend not ready within %v", waitLimit)
	}
	return p
}

// readyFields parses "ready grpc=A http=B id=C".
func readyFields(t *testing.T, line string) map[string]string {
	t.Helper()
	fields := map[string]string{}
	for _, f := range strings.Fields(strings.TrimPrefix(line, "ready ")) {
		k, v, _ := strings.Cut(f, "=")
		fields[k] = v
	}
	for _, k := range []string{"grpc", "http", "id"} {
		if fields[k] == "" {
			t.Fatalf("ready line %q has no %s", line, k)
		}
	}
	return fields
}

// signal sends sig to the process.
func (p *process) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits for the process to exit and fails the test unless it exits 0.
func (p *process) wait(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(waitLimit):
		t.Fatalf("backend did not exit within %v", waitLimit)
	}
	if p.err != nil {
		t.Fatalf("backend exited with %v, want 0", p.err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// dial connects to addr without TLS.
func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// unaryCall makes one UnaryCall and returns the server_id of the answer.
func unaryCall(t *testing.T, conn *grpc.ClientConn) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	resp, err := testgrpc.NewTestServiceClient(conn).UnaryCall(ctx, &testgrpc.SimpleRequest{})
	if err != nil {
		t.Fatalf("UnaryCall: %v", err)
	}
	return resp.GetServerId()
}

// startSlowCall starts a UnaryCall that asks for delay and returns once
// the backend has started it (its response headers arrived). finish waits
// for the answer.
func startSlowCall(t *testing.T, conn *grpc.ClientConn, delay time.Duration) (finish func() (*testgrpc.SimpleResponse, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	ctx = metadata.AppendToOutgoingContext(ctx, delayKey, strconv.FormatInt(delay.Milliseconds(), 10))
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{StreamName: "UnaryCall"}, "/grpc.testing.TestService/UnaryCall")
	if err != nil {
		t.Fatalf("slow call: %v", err)
	}
	if err := stream.SendMsg(&testgrpc.SimpleRequest{}); err != nil {
		t.Fatalf("slow call: send: %v", err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatalf("slow call: close send: %v", err)
	}
	if _, err := stream.Header(); err != nil {
		t.Fatalf("slow call: header: %v", err)
	}
	return func() (*testgrpc.SimpleResponse, error) {
		resp := new(testgrpc.SimpleResponse)
		return resp, stream.RecvMsg(resp)
	}
}

// openORCA opens an out-of-band ORCA stream (at the backend's minimum
// report interval).
func openORCA(t *testing.T, conn *grpc.ClientConn) orcaservice.OpenRcaService_StreamCoreMetricsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	stream, err := orcaservice.NewOpenRcaServiceClient(conn).StreamCoreMetrics(ctx, &orcaservice.OrcaLoadReportRequest{})
	if err != nil {
		t.Fatalf("orca stream: %v", err)
	}
	return stream
}

// recvORCA receives the next report of stream.
func recvORCA(t *testing.T, stream orcaservice.OpenRcaService_StreamCoreMetricsClient) *orcadata.OrcaLoadReport {
	t.Helper()
	r, err := stream.Recv()
	if err != nil {
		t.Fatalf("orca stream: %v", err)
	}
	return r
}

// awaitMaintenance waits, with blocking queries, until Consul's health
// view of service shows the critical maintenance check of id.
func awaitMaintenance(t *testing.T, client *api.Client, service, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	q := (&api.QueryOptions{WaitTime: waitLimit}).WithContext(ctx)
	for {
		checks, meta, err := client.Health().Checks(service, q)
		if err != nil {
			t.Fatalf("no maintenance check for %s within %v: %v", id, waitLimit, err)
		}
		for _, c := range checks {
			if c.CheckID == "_service_maintenance:"+id && c.Status == api.HealthCritical {
				return
			}
		}
		q.WaitIndex = meta.LastIndex
	}
}
