package harness

import (
	"bufio"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

var exBackendBin built

// ExampleBackendBinary builds examples/backend once per test process (or
// returns $XDS_SERVER_BACKEND_BIN when set) and returns the path of the
// binary.
func ExampleBackendBinary(t testing.TB) string {
	t.Helper()
	return exBackendBin.get(t, "XDS_SERVER_BACKEND_BIN", "backend", "./examples/backend")
}

// ExBackend is a running example backend process (examples/backend).
type ExBackend struct {
	ID       string // Consul service id, from the ready line
	GRPCAddr string // host:port of the gRPC listener, from the ready line
	HTTPAddr string // host:port of the HTTP listener, from the ready line

	cmd    *exec.Cmd
	logs   *syncBuffer   // stderr: the backend's log
	exited chan struct{} // closed once the process has exited
	err    error         // of cmd.Wait, once exited is closed
}

// exBackendReadyTimeout bounds the wait for the ready line.
const exBackendReadyTimeout = 30 * time.Second

// StartExampleBackend runs the example backend with args and waits for its
// ready line ("ready grpc=A http=B id=C", printed once it serves and is
// registered in Consul). At cleanup, a backend still running is killed
// (SIGKILL) and, if the test failed, its log is logged.
func StartExampleBackend(t testing.TB, args ...string) *ExBackend {
	t.Helper()
	b := &ExBackend{logs: &syncBuffer{}, exited: make(chan struct{})}
	b.cmd = exec.Command(ExampleBackendBinary(t), args...)
	b.cmd.Dir = repoRoot()
	b.cmd.Stderr = b.logs
	stdout, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "ready ") {
				select {
				case ready <- line:
				default:
				}
			}
		}
		b.err = b.cmd.Wait() // after the last read of stdout
		close(b.exited)
	}()
	t.Cleanup(func() {
		_ = b.cmd.Process.Kill()
		<-b.exited
		if t.Failed() {
			t.Logf("example backend %s (%v) log:\n%s", b.ID, args, b.logs.String())
		}
	})
	select {
	case line := <-ready:
		fields := map[string]string{}
		for _, f := range strings.Fields(strings.TrimPrefix(line, "ready ")) {
			k, v, _ := strings.Cut(f, "=")
			fields[k] = v
		}
		b.ID, b.GRPCAddr, b.HTTPAddr = fields["id"], fields["grpc"], fields["http"]
		if b.ID == "" || b.GRPCAddr == "" || b.HTTPAddr == "" {
			t.Fatalf("example backend: ready line %q lacks id, grpc or http", line)
		}
	case <-b.exited:
		t.Fatalf("example backend exited before it was ready: %v\nlog:\n%s", b.err, b.logs.String())
	case <-time.After(exBackendReadyTimeout):
		t.Fatalf("example backend not ready within %v\nlog:\n%s", exBackendReadyTimeout, b.logs.String())
	}
	return b
}

// Signal sends sig to the backend.
func (b *ExBackend) Signal(sig syscall.Signal) error { return b.cmd.Process.Signal(sig) }

// Exited is closed once the process has exited.
func (b *ExBackend) Exited() <-chan struct{} { return b.exited }

// Wait waits up to limit for the process to exit and returns the error of
// its exit (nil for exit code 0).
func (b *ExBackend) Wait(limit time.Duration) error {
	select {
	case <-b.exited:
		return b.err
	case <-time.After(limit):
		return errors.New("example backend " + b.ID + " did not exit within " + limit.String())
	}
}

// Logs returns what the backend has logged so far (its stderr).
func (b *ExBackend) Logs() string { return b.logs.String() }
