package harness

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xds-server/xds-server/internal/freeport"
)

// redisReadyTimeout bounds the wait for a redis-server to answer PING.
const redisReadyTimeout = 30 * time.Second

// RedisOptions configures Redis. The zero value is a plain server without
// authentication.
type RedisOptions struct {
	// Password is the default user's password (--requirepass); "" means
	// no authentication.
	Password string
	// User and UserPassword add an ACL user with every permission.
	User, UserPassword string
	// TLS serves TLS only (no plaintext port), with a server certificate
	// for 127.0.0.1 and localhost signed by a CA generated for this server
	// (see CAFile). Clients are not asked for certificates.
	TLS bool
	// Config, when not empty, is written to redis.conf in the server's
	// directory and given first on the command line (a sentinel needs a
	// config file it can rewrite).
	Config string
	// Cluster runs the server as a cluster node (--cluster-enabled yes)
	// with a cluster bus port of its own (--cluster-port, drawn with the
	// client port; Redis's default, port+10000, may be taken or past
	// 65535).
	Cluster bool
	// Args are more command-line arguments, after the harness's own
	// (like "--cluster-node-timeout", "5000" or "--sentinel").
	Args []string
}

// RedisServer is a redis-server child process on 127.0.0.1 that keeps
// nothing on disk (--save "" --appendonly no): after Stop and Start its
// data is gone.
type RedisServer struct {
	t       testing.TB
	bin     string
	opts    RedisOptions
	dir     string
	logPath string
	port    int
	bus     int // cluster bus port (Cluster)

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil while stopped
	exited chan struct{} // closed once cmd has exited
}

// RedisBinary finds redis-server on PATH or at /usr/bin/redis-server.
func RedisBinary() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if fi, err := os.Stat("/usr/bin/redis-server"); err == nil && fi.Mode()&0o111 != 0 {
		return "/usr/bin/redis-server", nil
	}
	return "", errors.New("harness: no redis-server on PATH nor at /usr/bin/redis-server (apt-get install redis-server)")
}

// Redis starts a redis-server on a free loopback port and waits until it
// answers PING. It is stopped when the test ends; if the test failed, the
// tail of its log is logged. Without a redis-server binary the test is
// skipped, or fails when XDS_SERVER_REQUIRE_INTEGRATION=1.
func Redis(t testing.TB, opts RedisOptions) *RedisServer {
	t.Helper()
	bin, err := RedisBinary()
	if err != nil {
		if os.Getenv(RequireIntegrationEnv) == "1" {
			t.Fatalf("%v; required because %s=1", err, RequireIntegrationEnv)
		}
		t.Skipf("%v; skipping (set %s=1 to fail instead)", err, RequireIntegrationEnv)
	}
	dir := t.TempDir()
	r := &RedisServer{t: t, bin: bin, opts: opts, dir: dir, logPath: filepath.Join(dir, "redis.log")}
	if opts.TLS {
		if err := writeTestCerts(dir); err != nil {
			t.Fatalf("harness: %v", err)
		}
	}
	if opts.Config != "" {
		if err := os.WriteFile(filepath.Join(dir, "redis.conf"), []byte(opts.Config), 0o600); err != nil {
			t.Fatalf("harness: %v", err)
		}
	}
	t.Cleanup(func() {
		r.Stop()
		if t.Failed() {
			t.Logf("harness: redis log tail (%s):\n%s", r.logPath, tail(r.logPath, 40))
		}
	})
	// A free port can be taken before redis binds it: try fresh ones.
	for attempt := 1; ; attempt++ {
		ports, err := freeport.Loopback(2)
		if err != nil {
			t.Fatalf("harness: %v", err)
		}
		r.port, r.bus = ports[0], ports[1]
		if err = r.start(); err == nil {
			return r
		}
		r.Stop()
		if attempt == 3 {
			t.Fatalf("harness: redis-server did not start: %v\nlog tail:\n%s", err, tail(r.logPath, 40))
		}
	}
}

// Addr is the server's host:port.
func (r *RedisServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// Port is the server's port.
func (r *RedisServer) Port() int { return r.port }

// CAFile is the PEM file of the CA that signed the server's certificate
// (TLS only).
func (r *RedisServer) CAFile() string { return filepath.Join(r.dir, "ca.pem") }

// Stop kills the server (SIGKILL: like a crash) and waits for it to exit.
// Stopping a stopped server does nothing.
func (r *RedisServer) Stop() {
	r.mu.Lock()
	cmd, exited := r.cmd, r.exited
	r.cmd = nil
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Pause stops the server's process (SIGSTOP): it keeps its port and its
// connections, and the kernel still accepts new ones, but it answers
// nothing, like a hung Redis, until Resume (SIGCONT). Stop works on a
// paused server.
func (r *RedisServer) Pause() { r.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (r *RedisServer) Resume() { r.signal(syscall.SIGCONT) }

func (r *RedisServer) signal(sig syscall.Signal) {
	r.t.Helper()
	r.mu.Lock()
	cmd := r.cmd
	r.mu.Unlock()
	if cmd == nil {
		r.t.Fatalf("harness: redis-server on port %d is stopped", r.port)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("harness: redis-server on port %d: %v: %v", r.port, sig, err)
	}
}

// Start starts a stopped server again on the same port, empty, and waits
// until it answers. Starting a running server does nothing. Failures fail
// the test.
func (r *RedisServer) Start() {
	r.t.Helper()
	r.mu.Lock()
	running := r.cmd != nil
	r.mu.Unlock()
	if running {
		return
	}
	if err := r.start(); err != nil {
		r.Stop()
		r.t.Fatalf("harness: redis-server did not restart on port %d: %v\nlog tail:\n%s", r.port, err, tail(r.logPath, 40))
	}
}

// args are the command line of the server.
func (r *RedisServer) args() []string {
	port := strconv.Itoa(r.port)
	plain := port
	if r.opts.TLS {
		plain = "0"
	}
	var a []string
	if r.opts.Config != "" {
		a = append(a, filepath.Join(r.dir, "redis.conf"))
	}
	a = append(a, "--bind", "127.0.0.1", "--port", plain, "--save", "", "--appendonly", "no",
		"--dir", r.dir, "--logfile", r.logPath, "--daemonize", "no", "--protected-mode", "no")
	if r.opts.TLS {
		a = append(a, "--tls-port", port, "--tls-auth-clients", "no",
			"--tls-cert-file", filepath.Join(r.dir, "server.pem"), "--tls-key-file", filepath.Join(r.dir, "server-key.pem"),
			"--tls-ca-cert-file", r.CAFile())
	}
	if r.opts.Cluster {
		a = append(a, "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(r.bus))
	}
	if r.opts.Password != "" {
		a = append(a, "--requirepass", r.opts.Password)
	}
	if r.opts.User != "" {
		a = append(a, "--user", r.opts.User, "on", ">"+r.opts.UserPassword, "~*", "&*", "+@all")
	}
	return append(a, r.opts.Args...)
}

// start runs the server and waits until it answers PING.
func (r *RedisServer) start() error {
	cmd := exec.Command(r.bin, r.args()...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("harness: start %s: %w", r.bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	r.mu.Lock()
	r.cmd, r.exited = cmd, exited
	r.mu.Unlock()
	deadline := time.After(redisReadyTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := r.ping()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("redis-server exited before it was ready")
		case <-deadline:
			return fmt.Errorf("not ready within %v: %w", redisReadyTimeout, err)
		case <-tick.C:
		}
	}
}

// ping sends PING; any reply (PONG, or NOAUTH when a password is set)
// means the server is serving.
func (r *RedisServer) ping() error {
	var conn net.Conn
	var err error
	d := &net.Dialer{Timeout: time.Second}
	if r.opts.TLS {
		pool := x509.NewCertPool()
		pem, rerr := os.ReadFile(r.CAFile())
		if rerr != nil {
			return rerr
		}
		pool.AppendCertsFromPEM(pem)
		conn, err = tls.DialWithDialer(d, "tcp", r.Addr(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	} else {
		conn, err = d.Dial("tcp", r.Addr())
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") && !strings.HasPrefix(line, "-NOAUTH") {
		return fmt.Errorf("PING: %q", strings.TrimSpace(line))
	}
	return nil
}

// writeTestCerts writes ca.pem, server.pem and server-key.pem into dir: a
// fresh ECDSA CA and a server certificate for 127.0.0.1 and localhost,
// valid for a day.
func writeTestCerts(dir string) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "xds-server test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return err
	}
	for name, block := range map[string]*pem.Block{"ca.pem": {Type: "CERTIFICATE", Bytes: caDER},
		"server.pem": {Type: "CERTIFICATE", Bytes: srvDER}, "server-key.pem": {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			return fmt.Errorf("harness: %w", err)
		}
	}
	return nil
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
