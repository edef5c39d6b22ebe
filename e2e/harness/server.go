package harness

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// ServerBinary builds cmd/xds-server once per test process (or returns
// $XDS_SERVER_BIN when set) and returns the path of the binary.
func ServerBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("XDS_SERVER_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "xds-server-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "xds-server")
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/xds-server")
		cmd.Dir = repoRoot()
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// repoRoot is the module root, found from this file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Server is a running xds-server process.
type Server struct {
	XDSAddr   string
	AdminAddr string
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

// StartServer runs xds-server with the given extra flags on free loopback
// ports, waits until /healthz answers, and stops it (SIGTERM) at cleanup.
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	return StartServerWith(t, ServerOptions{}, args...)
}

// ServerOptions are the harness's side of a server's settings.
type ServerOptions struct {
	// AdminTLS, when set, is the client TLS config of an admin listener
	// that serves HTTPS (the server's args set admin.tls.*).
	AdminTLS *tls.Config
}

// StartServerWith is StartServer with options.
func StartServerWith(t testing.TB, opts ServerOptions, args ...string) *Server {
	t.Helper()
	s := &Server{
		XDSAddr:   "127.0.0.1:" + strconv.Itoa(FreePort(t)),
		AdminAddr: "127.0.0.1:" + strconv.Itoa(FreePort(t)),
		Admin:     &http.Client{Timeout: 10 * time.Second},
		scheme:    "http",
		logs:      &syncBuffer{},
		exited:    make(chan struct{}),
	}
	if opts.AdminTLS != nil {
		s.Admin.Transport = &http.Transport{TLSClientConfig: opts.AdminTLS}
		s.scheme = "https"
	}
	all := append([]string{"--xds.address", s.XDSAddr, "--admin.address", s.AdminAddr, "--xds.shutdown_grace", "0s", "--ratelimit.address", "127.0.0.1:0"}, args...)
	s.cmd = exec.Command(ServerBinary(t), all...)
	s.cmd.Dir = repoRoot()
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exitErr = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("xds-server stop: %v", err)
		}
		if t.Failed() {
			t.Logf("xds-server logs:\n%s", s.logs.String())
		}
	})
	if err := s.waitHTTP("/healthz", 30*time.Second); err != nil {
		t.Fatalf("xds-server did not start: %v\nlogs:\n%s", err, s.logs.String())
	}
	return s
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

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
