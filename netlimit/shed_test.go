package netlimit_test

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/netlimit"
)

// shedServer serves h on a listener of cap max that sheds idle
// connections.
func shedServer(t *testing.T, max int, h http.Handler) (*netlimit.Listener, *netlimit.Metrics) {
	t.Helper()
	m := netlimit.NewMetrics(prometheus.NewRegistry())
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := netlimit.Limit(inner, "admin", max, m)
	l.ShedIdle()
	srv := &http.Server{Handler: h, ConnState: l.ConnState, ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l, m
}

func dialN(t *testing.T, addr string, n int, hello string) []net.Conn {
	t.Helper()
	var out []net.Conn
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if hello != "" {
			if _, err := c.Write([]byte(hello)); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { c.Close() })
		out = append(out, c)
	}
	return out
}

// awaitOpen waits until the listener holds n connections.
func awaitOpen(t *testing.T, l *netlimit.Listener, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for l.Open() != n {
		if time.Now().After(deadline) {
			t.Fatalf("open = %d, want %d", l.Open(), n)
		}
		time.Sleep(5 * time.Millisecond) // polling a counter of another goroutine
	}
}

// TestShedIdleKeepsProbesAnswered: a listener full of slow clients that
// never finish their request headers closes the one idle longest to
// admit each new connection, so a health probe is answered; the cap
// holds and each shed connection is counted.
func TestShedIdleKeepsProbesAnswered(t *testing.T) {
	const max = 10
	l, m := shedServer(t, max, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	slow := dialN(t, l.Addr().String(), max, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
	awaitOpen(t, l, max)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}
	for i := range 3 {
		resp, err := client.Get("http://" + l.Addr().String() + "/healthz")
		if err != nil {
			t.Fatalf("probe %d with the cap full of slow clients: %v", i, err)
		}
		resp.Body.Close()
	}
	// The first probe took the place of the oldest slow client; the
	// others found its slot free again, or took another's if the server
	// had not closed the previous probe's connection yet.
	if got := testutil.ToFloat64(m.Shed("admin")); got < 1 || got > 3 {
		t.Errorf("shed = %v, want 1 to 3", got)
	}
	if got := testutil.ToFloat64(m.Refused("admin")); got != 0 {
		t.Errorf("refused = %v, want 0", got)
	}
	// The oldest slow client was the one shed.
	_ = slow[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := slow[0].Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the oldest slow client: %v, want EOF (shed)", err)
	}
	if l.Open() > max {
		t.Errorf("open = %d, over the cap %d", l.Open(), max)
	}
}

// TestShedIdleSparesRequests: connections in a request are never shed;
// with every slot in one, a new connection is refused.
func TestShedIdleSparesRequests(t *testing.T) {
	const max = 5
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{}, max)
	l, m := shedServer(t, max, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	dialN(t, l.Addr().String(), max, "GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	for range max {
		<-entered
	}
	c := dialN(t, l.Addr().String(), 1, "")[0]
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("a connection past a cap of busy ones: %v, want EOF (refused)", err)
	}
	if got := testutil.ToFloat64(m.Refused("admin")); got != 1 {
		t.Errorf("refused = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.Shed("admin")); got != 0 {
		t.Errorf("shed = %v, want 0", got)
	}
}

// TestReadTimeoutsCounted: a connection whose read hits its deadline is
// counted once, however often it reads again.
func TestReadTimeoutsCounted(t *testing.T) {
	m := netlimit.NewMetrics(prometheus.NewRegistry())
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := netlimit.Limit(inner, "xds", 0, m)
	defer l.Close()
	dialN(t, l.Addr().String(), 1, "")
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 2 {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("read without data succeeded")
		}
	}
	if got := testutil.ToFloat64(m.ReadTimeouts("xds")); got != 1 {
		t.Errorf("read timeouts = %v, want 1", got)
	}
}
