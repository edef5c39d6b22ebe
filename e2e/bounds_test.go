package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xds-server/xds-server/e2e/harness"
)

// raiseFileLimit lets the test process hold want descriptors (raising the
// hard limit needs root; without it the soft limit goes to the hard one)
// and returns how many it may hold.
func raiseFileLimit(t *testing.T, want uint64) uint64 {
	t.Helper()
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Fatal(err)
	}
	old := r
	if r.Cur < want {
		r.Cur, r.Max = want, max(r.Max, want)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			r = old
			r.Cur = r.Max
			_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
		}
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
	return r.Cur
}

// flood opens n idle TCP connections to addr (64 at a time) and closes
// them at cleanup.
func flood(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	next := make(chan int)
	for range 64 {
		wg.Go(func() {
			for i := range next {
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					errs <- err
					return
				}
				conns[i] = c
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	select {
	case err := <-errs:
		t.Fatalf("dial: %v", err)
	default:
	}
	return conns
}

// rlsHandshakeTimeout is how long the rate-limit listener waits for a new
// connection's HTTP/2 preface (h2rpc's handshakeTimeout).
const rlsHandshakeTimeout = 10 * time.Second

// TestIdleRLSConnectionsStarveNothing reproduces the finding: 20,400 idle
// TCP connections to the rate-limit port exhausted the process's file
// descriptors and stalled xDS, RLS and admin. With ratelimit.max_connections
// (from the open-file limit, at most 5,000) the listener holds its cap, closes the rest at once,
// and xDS and admin still answer.
func TestIdleRLSConnectionsStarveNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	const want = 20_000
	n := want
	// The test process holds every client socket, plus Go's own: without
	// root the hard limit (20,000 here) bounds it, so the flood shrinks to
	// fit and still exceeds the cap 3 times over.
	if limit := raiseFileLimit(t, want+1000); limit < want+1000 {
		n = int(limit) - 1000
		t.Logf("open file limit %d: flooding with %d connections instead of %d", limit, n, want)
	}
	srv := harness.StartServer(t)
	srv.WaitReady(t)
	// ratelimit.max_connections' default: derived from the open-file limit, at most 5,000
	capacity := int(metricValue(t, srv, "", `listener_max_connections{listener="ratelimit"}`))
	if capacity <= 0 || capacity > 5000 || capacity >= n {
		t.Fatalf("ratelimit cap %d for a flood of %d", capacity, n)
	}

	began := time.Now()
	flood(t, srv.RateLimitAddr, n)
	if took := time.Since(began); took < rlsHandshakeTimeout-time.Second {
		awaitMetric(t, srv, `listener_open_connections{listener="ratelimit"} `+strconv.Itoa(capacity))
		awaitMetric(t, srv, `listener_connections_refused_total{listener="ratelimit"} `+strconv.Itoa(n-capacity))
	} else {
		// A flood slower than the handshake timeout (a busy machine): the
		// server closed the first idle connections, which made room for
		// later ones, so fewer were refused; never more than the cap open.
		t.Logf("the flood took %v: idle connections timed out meanwhile", took.Round(time.Millisecond))
		open := int(metricValue(t, srv, "", `listener_open_connections{listener="ratelimit"}`))
		refused := int(metricValue(t, srv, "", `listener_connections_refused_total{listener="ratelimit"}`))
		if open > capacity || refused < (n-capacity)/2 {
			t.Fatalf("%d open (cap %d), %d refused of a flood of %d", open, capacity, refused, n)
		}
	}

	resp, err := http.Get("http://" + srv.AdminAddr + "/healthz")
	if err != nil {
		t.Fatalf("admin during the flood: %v", err)
	}
	resp.Body.Close()
	conn, err := grpc.NewClient(srv.XDSAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := harness.StartADS(ctx, harness.ADSConfig{Conn: conn, NodeID: "during-flood", Types: []string{resource.ClusterType}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-c.Updates():
	case <-ctx.Done():
		t.Fatal("no xDS response during the RLS flood")
	}
}

// TestSlowAdminClientsAreCut reproduces the finding: admin connections
// sending one byte every few seconds were held forever. With
// admin.read_timeout the server closes them once the timeout passes; past
// admin.max_connections one is closed at once (shed or refused); once the slow
// ones are gone the admin answers again.
func TestSlowAdminClientsAreCut(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	const capacity, slow = 100, 150
	srv := harness.StartServer(t, "--admin.max_connections", strconv.Itoa(capacity), "--admin.read_timeout", "2s")
	srv.WaitReady(t)
	conns := flood(t, srv.AdminAddr, slow)
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	closedAt := []time.Duration{}
	for _, c := range conns {
		wg.Go(func() {
			_, _ = c.Write([]byte("POST /v1/drain HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")) // the body never ends
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			// EOF, or a reset when the server closed with the request unread
			if _, err := io.ReadAll(c); err == nil || errors.Is(err, syscall.ECONNRESET) {
				mu.Lock()
				closedAt = append(closedAt, time.Since(start))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(closedAt) != slow {
		t.Fatalf("the server closed %d of %d slow connections within 20s", len(closedAt), slow)
	}
	// The refused ones close at once; the held ones at the read timeout
	// (ReadHeaderTimeout is 10s, so a close before that is read_timeout's).
	for _, d := range closedAt {
		if d > 9*time.Second {
			t.Errorf("a slow connection was held %v, want about admin.read_timeout (2s)", d)
		}
	}
	// Past the cap the idlest connection is shed (or, once all are in a
	// request, the new one refused): either way it is closed at once. At
	// least slow-capacity are; the test's own metric reads, made while the
	// cap is full, may be shed too.
	deadline := time.Now().Add(20 * time.Second)
	for metricValue(t, srv, "", `listener_connections_refused_total{listener="admin"}`)+
		metricValue(t, srv, "", `listener_connections_shed_total{listener="admin"}`) < slow-capacity {
		if time.Now().After(deadline) {
			t.Fatalf("refused + shed admin connections never reached %d", slow-capacity)
		}
		time.Sleep(100 * time.Millisecond) // polling the server's metrics
	}
	resp, err := http.Get("http://" + srv.AdminAddr + "/healthz")
	if err != nil {
		t.Fatalf("admin after the slow clients: %v", err)
	}
	resp.Body.Close()
}
