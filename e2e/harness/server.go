package harness

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/xds-server/xds-server/internal/freeport"
)

var serverBin built

// ServerBinary builds cmd/xds-server once per test process (or returns
// $XDS_SERVER_BIN when set) and returns the path of the binary.
func ServerBinary(t testing.TB) string {
	t.Helper()
	return serverBin.get(t, "XDS_SERVER_BIN", "xds-server", "./cmd/xds-server")
}

// repoRoot is the module root, found from this file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago:
// an address that refuses connections. Do not hand it to a process that is
// to listen on it, as another process can take it in between: StartServer
// listens on port 0, and ServerOptions.PortArgs starts again when the port
// was taken.
func FreePort(t testing.TB) int {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return p
}

// freeAddr returns 127.0.0.1:<a port that was free a moment ago>.
// It is outside the kernel's ephemeral range (freeport), so a process
// restarted on it does not find it taken by an outgoing connection.
func freeAddr() (string, error) {
	ports, err := freeport.Loopback(1)
	if err != nil {
		return "", fmt.Errorf("harness: free port: %w", err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), nil
}

// Server is a running xds-server process.
type Server struct {
	// XDSAddr, AdminAddr and RateLimitAddr are the host:port the process
	// listens on, as its start-up line reports them.
	XDSAddr       string
	AdminAddr     string
	RateLimitAddr string
	// Admin is the client of the admin listener (HTTPS with
	// ServerOptions.AdminTLS); AdminURL builds its URLs.
	Admin   *http.Client
	scheme  string
	cmd     *exec.Cmd
	logs    *syncBuffer
	exited  chan struct{}
	exitErr error
	killed  atomic.Bool // Kill ended it: its exit status is expected
}

// StartServer runs xds-server with the given extra flags, its xDS, admin
// and rate-limit listeners on port 0 of 127.0.0.1 (the kernel picks free
// ports, so no other process can take them first), reads the addresses
// from its start-up line, waits until /healthz answers, and stops it
// (SIGTERM) at cleanup. The start-up line is logged at info: the flags must
// not set log.level above it. An address flag in args overrides the
// harness's.
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	return StartServerWith(t, ServerOptions{}, args...)
}

// ServerOptions are the harness's side of a server's settings.
type ServerOptions struct {
	// AdminTLS, when set, is the client TLS config of an admin listener
	// that serves HTTPS (the server's args set admin.tls.*).
	AdminTLS *tls.Config
	// PortArgs, when set, returns flags that need a port known before the
	// start (ratelimit.address with ratelimit.advertise_address, which the
	// server hands to Envoy): the harness calls it with 127.0.0.1 and a
	// free port, and when the process exits because another took the port
	// in between (address already in use), starts it again with a fresh
	// one, up to startAttempts times in all.
	PortArgs func(addr string) []string

	pick func() (string, error) // PortArgs' address chooser: freeAddr unless a test sets it
}

// startAttempts bounds the starts of one StartServerWith.
const startAttempts = 5

// StartServerWith is StartServer with options.
func StartServerWith(t testing.TB, opts ServerOptions, args ...string) *Server {
	t.Helper()
	pick := opts.pick
	if pick == nil {
		pick = freeAddr
	}
	bin := ServerBinary(t)
	for attempt := 1; ; attempt++ {
		all := []string{"--xds.address", anyPort, "--admin.address", anyPort, "--ratelimit.address", anyPort, "--xds.shutdown_grace", "0s"}
		if opts.PortArgs != nil {
			addr, err := pick()
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, opts.PortArgs(addr)...)
		}
		s, err := startServer(bin, opts, append(all, args...))
		if err == nil {
			t.Cleanup(func() {
				if err := s.Stop(); err != nil {
					t.Errorf("xds-server stop: %v", err)
				}
				if t.Failed() {
					t.Logf("xds-server logs:\n%s", s.logs.String())
				}
			})
			return s
		}
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			t.Fatalf("xds-server did not start (attempt %d): %v\nlogs:\n%s", attempt, err, s.logs.String())
		}
		t.Logf("harness: xds-server attempt %d: %v; starting it again on fresh ports", attempt, err)
	}
}

// anyPort has the kernel pick a free loopback port.
const anyPort = "127.0.0.1:0"

// errPortTaken: the process exited because a port it was to listen on
// was taken.
var errPortTaken = errors.New("a listener's port was taken (address already in use)")

// startServer runs one process and waits until it has logged its
// addresses and /healthz answers. On error the process has exited and s
// holds its logs.
func startServer(bin string, opts ServerOptions, args []string) (*Server, error) {
	s := &Server{
		Admin:  &http.Client{Timeout: 10 * time.Second},
		scheme: "http",
		logs:   &syncBuffer{},
		exited: make(chan struct{}),
	}
	if opts.AdminTLS != nil {
		s.Admin.Transport = &http.Transport{TLSClientConfig: opts.AdminTLS}
		s.scheme = "https"
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Dir = repoRoot()
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		return s, err
	}
	go func() { s.exitErr = s.cmd.Wait(); close(s.exited) }()
	err := s.awaitAddrs(30 * time.Second)
	if err == nil {
		err = s.waitHTTP("/healthz", 30*time.Second)
	}
	if err != nil {
		s.killed.Store(true)
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	return s, err
}

// awaitAddrs waits for the start-up line and sets the addresses from it.
func (s *Server) awaitAddrs(limit time.Duration) error {
	timeout := time.NewTimer(limit)
	defer timeout.Stop()
	for {
		grew := s.logs.grown() // before reading: a line written after the read closes it
		if a, ok := startedAddrs(s.logs.String()); ok {
			s.XDSAddr, s.AdminAddr, s.RateLimitAddr = a.xds, a.admin, a.rateLimit
			return nil
		}
		select {
		case <-grew:
		case <-s.exited: // Wait has copied all of the output
			if _, ok := startedAddrs(s.logs.String()); ok {
				return fmt.Errorf("exited after starting: %v", s.exitErr)
			}
			if strings.Contains(s.logs.String(), "address already in use") {
				return fmt.Errorf("exited (%v): %w", s.exitErr, errPortTaken)
			}
			return fmt.Errorf("exited: %v", s.exitErr)
		case <-timeout.C:
			return fmt.Errorf("no start-up line (msg=%q with the listeners' addresses) within %v; the harness needs it: is log.level above info?", startedMsg, limit)
		}
	}
}

// WaitReady waits until /readyz answers 200.
func (s *Server) WaitReady(t testing.TB) {
	t.Helper()
	if err := s.waitHTTP("/readyz", 30*time.Second); err != nil {
		t.Fatalf("xds-server not ready: %v\nlogs:\n%s", err, s.logs.String())
	}
}

// AdminURL is the URL of path on the admin listener.
func (s *Server) AdminURL(path string) string { return s.scheme + "://" + s.AdminAddr + path }

// Logs returns what the server has logged so far.
func (s *Server) Logs() string { return s.logs.String() }

// PID is the process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Stop sends SIGTERM and waits for the process; a non-zero exit is an error.
func (s *Server) Stop() error {
	select {
	case <-s.exited:
		if s.killed.Load() {
			return nil
		}
		return s.exitErr
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return s.exitErr
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return errors.New("did not exit within 30s of SIGTERM")
	}
}

// waitHTTP polls an admin path until it answers 200: the process is
// external, so there is no event to await.
func (s *Server) waitHTTP(path string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("exited: %v", s.exitErr)
		default:
		}
		resp, err := s.Admin.Get(s.AdminURL(path))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", path, resp.Status)
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("after %v: %w", limit, last)
}

// syncBuffer collects a process's output; grown awaits more of it.
type syncBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	grew chan struct{} // closed by the next Write
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.grew != nil {
		close(b.grew)
		b.grew = nil
	}
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// grown returns a channel closed by the next Write.
func (b *syncBuffer) grown() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.grew == nil {
		b.grew = make(chan struct{})
	}
	return b.grew
}
