package netlimit_test

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/xds-server/xds-server/netlimit"
)

// TestFloodIsCappedAndCounted opens twice the cap of idle connections:
// the listener holds the cap, closes the rest at once and counts them,
// and a slot freed by a closed connection is usable again.
func TestFloodIsCappedAndCounted(t *testing.T) {
	const max, flood = 50, 100
	reg := prometheus.NewRegistry()
	m := netlimit.NewMetrics(reg)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := netlimit.Limit(inner, "test", max, m)
	defer l.Close()
	accepted := make(chan net.Conn, flood)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range flood {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	// Every client past the cap sees its connection closed by the server.
	var closed atomic.Int64
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); err == io.EOF {
				closed.Add(1)
			}
		})
	}
	wg.Wait()
	if closed.Load() != flood-max {
		t.Errorf("%d clients were closed by the server, want %d", closed.Load(), flood-max)
	}
	if got := testutil.ToFloat64(m.Refused("test")); got != flood-max {
		t.Errorf("refused = %v, want %d", got, flood-max)
	}
	if l.Open() != max || testutil.ToFloat64(m.Open("test")) != max {
		t.Errorf("open = %d (gauge %v), want %d", l.Open(), testutil.ToFloat64(m.Open("test")), max)
	}
	first := <-accepted
	first.Close()
	first.Close() // a second Close gives nothing back twice
	if l.Open() != max-1 {
		t.Fatalf("open after one close = %d, want %d", l.Open(), max-1)
	}
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("a connection within the cap was not accepted")
	}
}

func TestRaiseFileLimit(t *testing.T) {
	n, err := netlimit.RaiseFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	if n < 1024 {
		t.Errorf("open file limit %d after raising, want at least 1024", n)
	}
}
